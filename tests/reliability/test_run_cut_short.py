"""Runs cut short still end checked: a full store disk, SIGHUP, Ctrl-C during cluster start or
system setup, and Ctrl-C pressed several times. Each leaves no container behind, a history that
was checked, results and a report that say why the run ended early."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from harness.cli import EXIT_ERROR
from harness.node.docker.cluster import LABEL_RUN
from harness.node.docker.engine import engine

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

_FINAL_READ_ADVICE = "end the workload with a final read"


def _start(store: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--no-progress",
            "--store",
            str(store),
            "--seed",
            "11",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
    )


def _wait_for_line(stream: IO[str], needle: str, seen: list[str]) -> None:
    for line in stream:
        seen.append(line)
        if needle in line:
            return
    raise AssertionError(f"the run never printed {needle!r}: {''.join(seen)}")


def _finish(run: subprocess.Popen[str], seen: list[str]) -> tuple[int, str]:
    out, err = run.communicate(timeout=240)
    return run.returncode, "".join(seen) + err + out


def _assert_nothing_left(store: Path) -> dict[str, object]:
    test = json.loads((store / "latest" / "test.json").read_text())
    client = engine()
    label = f"{LABEL_RUN}={test['run_id']}"
    assert not client.containers.list(all=True, filters={"label": label})
    assert not client.networks.list(filters={"label": label})
    results: dict[str, object] = json.loads((store / "latest" / "results.json").read_text())
    assert (store / "latest" / "report.html").exists()
    return results


@pytest.fixture
def killer() -> Iterator[list[subprocess.Popen[str]]]:
    """Runs to kill if a test fails half-way (never leave a controller behind)."""
    runs: list[subprocess.Popen[str]] = []
    yield runs
    for run in runs:
        if run.poll() is None:
            run.kill()
            run.wait()


@pytest.mark.parametrize(
    ("after", "phases"),
    [("→", ("cluster start",)), (" up: ", ("system setup", "the workload"))],
    ids=["during-cluster-start", "during-setup"],
)
def test_ctrl_c_before_the_workload_leaves_a_checked_run(
    after: str, phases: tuple[str, ...], tmp_path: Path, killer: list[subprocess.Popen[str]]
) -> None:
    store = tmp_path / "store"
    run = _start(store, "--time-limit", "30")
    killer.append(run)
    seen: list[str] = []
    assert run.stderr is not None
    _wait_for_line(run.stderr, after, seen)
    run.send_signal(signal.SIGINT)
    code, output = _finish(run, seen)
    assert code in (1, 2), output
    assert "Traceback" not in output
    results = _assert_nothing_left(store)
    interrupted = results["interrupted"]
    assert isinstance(interrupted, dict)
    assert interrupted["signal"] == "SIGINT"
    assert interrupted["phase"] in phases
    reasons = results["unknown_reasons"]
    assert isinstance(reasons, list)
    assert reasons[0].startswith("the run was interrupted by SIGINT at ")
    assert not any(_FINAL_READ_ADVICE in reason for reason in reasons)
    report = (store / "latest" / "report.html").read_text()
    assert "the run was interrupted by SIGINT" in report


def _poll(ready: Callable[[], bool], what: str) -> None:
    for _ in range(600):
        if ready():
            return
        time.sleep(0.2)
    raise AssertionError(f"gave up waiting for {what}")


@pytest.mark.parametrize(
    "signals",
    [[signal.SIGHUP], [signal.SIGINT, signal.SIGINT, signal.SIGINT, signal.SIGINT]],
    ids=["sighup", "ctrl-c-four-times"],
)
def test_sighup_and_repeated_ctrl_c_heal_and_check(
    signals: list[int], tmp_path: Path, killer: list[subprocess.Popen[str]]
) -> None:
    store = tmp_path / "store"
    run = _start(store, "--time-limit", "60", "--nemesis", "pause")
    killer.append(run)

    # store/latest moves to a run only once it is checked: watch the run in progress.
    def running() -> bool:
        return any(h.stat().st_size > 20_000 for h in store.glob("*/*/history.jsonl"))

    _poll(running, "the workload to run")
    for signum in signals:
        run.send_signal(signum)
        time.sleep(0.3)
    code, output = _finish(run, [])
    assert code in (1, 2), output
    assert "Traceback" not in output
    results = _assert_nothing_left(store)
    interrupted = results["interrupted"]
    assert isinstance(interrupted, dict)
    assert interrupted["signal"] == signal.Signals(signals[0]).name


def test_a_full_disk_stops_the_run_heals_and_exits_3(
    tmpfs: Callable[[str], Path], killer: list[subprocess.Popen[str]]
) -> None:
    tiny_disk = tmpfs("")  # 64 KiB: full a few seconds into the run
    run = _start(tiny_disk, "--time-limit", "60", "--nemesis", "pause")
    killer.append(run)
    code, output = _finish(run, [])
    assert code == EXIT_ERROR, output
    assert "Traceback" not in output
    assert "the disk is full" in output
    (test_file,) = tiny_disk.glob("*/*/test.json")  # latest names checked runs only
    test = json.loads(test_file.read_text())
    client = engine()
    assert not client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={test['run_id']}"})
    # What was written is a readable history: the checker judged it (the verdict is printed).
    assert "events" in output and "history.jsonl" in output
