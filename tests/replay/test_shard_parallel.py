"""``run-all --shard I/N`` splits a matrix by row number, deterministically and completely;
``--parallel N`` runs rows side by side and still reports them in matrix order."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from rich.console import Console

from checkers import check_file
from harness.cli import EXIT_ERROR, main
from harness.cli.run_all import run_matrix
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.judge import RunOutcome
from harness.run.matrix import MatrixError, entries_from, parse_shard, shard
from harness.run.store import new_run_dir
from nemeses import Schedule

_ROWS = 7


def _matrix(tmp_path: Path) -> Path:
    matrix = tmp_path / "m.json"
    runs = [{"seed": 100 + n, "time_limit": 5 + n} for n in range(_ROWS)]
    matrix.write_text(json.dumps({"runs": runs[:4], "cross": {"seed": [104, 105, 106]}}))
    return matrix


def _dry(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    argv = ["run-all", "--matrix", str(_matrix(tmp_path)), "--dry-run", *extra]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--store", str(tmp_path / "store")])
    assert done.value.code == 0
    return capsys.readouterr().out.splitlines()


def test_the_shards_hold_every_row_once_and_always_the_same_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = _dry(tmp_path, capsys)
    assert len(whole) == _ROWS
    shards = [_dry(tmp_path, capsys, "--shard", f"{i}/3") for i in (1, 2, 3)]
    assert sorted(line for lines in shards for line in lines) == sorted(whole)
    assert [[int(line.split(".")[0]) for line in lines] for lines in shards] == [
        [1, 4, 7],
        [2, 5],
        [3, 6],
    ]
    assert _dry(tmp_path, capsys, "--shard", "2/3") == shards[1]


def test_more_shards_than_rows_leaves_some_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _dry(tmp_path, capsys, "--shard", "9/9") == []
    assert len(_dry(tmp_path, capsys, "--shard", "7/9")) == 1


@pytest.mark.parametrize("text", ["0/3", "4/3", "x/3", "2", "2/", "-1/3"])
def test_a_bad_shard_exits_3_with_an_example(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run-all", "--matrix", str(_matrix(tmp_path)), "--dry-run", "--shard", text]
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == EXIT_ERROR
    assert "e.g. --shard 2/4" in capsys.readouterr().err
    with pytest.raises(MatrixError):
        parse_shard(text)


def test_shard_of_a_matrix_keeps_the_matrix_row_numbers() -> None:
    entries = entries_from({"cross": {"seed": list(range(10))}})
    assert [e.number for e in entries] == list(range(1, 11))
    assert [e.spec.seed for e in shard(entries, 2, 4)] == [1, 5, 9]


class _SideBySide:
    """A runner that stores a valid run, but only once ``width`` runs are in flight together:
    run one at a time and the barrier breaks, which run-all records as a crashed run."""

    def __init__(self, store: Path, width: int, *, valid: bool = True) -> None:
        self.store = store
        self.barrier = threading.Barrier(width, timeout=60) if width > 1 else None
        self.valid = valid
        self.threads: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, spec: RunSpec, schedule: Schedule | None = None) -> RunOutcome:
        with self.lock:
            self.threads.add(threading.current_thread().name)
            run = new_run_dir(f"{spec.test_name}-{spec.seed}", self.store)
        if self.barrier is not None:
            self.barrier.wait()
        run.write_json(run.test_json, {"spec": spec.to_json()})
        run.write_json(run.results, {"valid": self.valid, "anomaly_types": []})
        return RunOutcome(run, check_file(run.history), interrupted=False)


def test_parallel_runs_go_side_by_side_and_report_in_matrix_order(tmp_path: Path) -> None:
    entries = entries_from({"cross": {"seed": [11, 12, 13, 14]}})
    runner = _SideBySide(tmp_path / "store", width=2)
    console = Console(stderr=True, force_terminal=False)
    results = run_matrix(entries, runner, console, parallel=2)
    assert [r.error for r in results] == [None] * 4
    assert [r.entry.spec.seed for r in results] == [11, 12, 13, 14]
    assert [r.verdict for r in results] == ["valid"] * 4
    assert len(runner.threads) == 2


def test_parallel_fail_fast_starts_no_run_after_a_surprise(tmp_path: Path) -> None:
    entries = entries_from({"cross": {"seed": [1, 2, 3, 4, 5]}})
    runner = _SideBySide(tmp_path / "store", width=2, valid=False)
    console = Console(stderr=True, force_terminal=False)
    results = run_matrix(entries, runner, console, parallel=2, fail_fast=True)
    assert [r.entry.spec.seed for r in results] == [1, 2]
    assert all(r.mismatch is not None for r in results)
