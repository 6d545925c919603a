"""``fencecheck replay``: a stored invalid run, replayed with its seed and recorded schedule,
shows its anomaly again; runs that cannot be replayed exit 3 with the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR, EXIT_INVALID, main
from harness.history import Sink
from harness.run.record import NodeEntry, RunRecord
from harness.run.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.store import new_run_dir
from tests.support.cli import fencecheck


def _stored(store: Path, schedule: dict[str, object], *, checked: bool) -> Path:
    """A run directory as the runner leaves it (no cluster needed to read one back)."""
    spec = RunSpec(store=store, seed=5)
    run = new_run_dir(spec.test_name, store)
    record = RunRecord(
        spec=spec,
        run_id="r",
        started="2026-01-01T00:00:00+00:00",
        command="fencecheck run --seed 5",
        lease_ttl=1.0,
        schedule=schedule,
        inventory=(Sink("store", True, "none", ""),),
        topology=(NodeEntry("w1", "worker"),),
    )
    run.write_json(run.test_json, record.to_json())
    if checked:
        run.write_json(run.results, {"valid": False, "anomaly_types": ["stale-write"]})
    return run.path


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert isinstance(done.value.code, int)
    return done.value.code


_SCHEDULE = {"seed": 5, "lease_ttl_ns": 10**9, "duration_ns": 3 * 10**10, "windows": []}


@pytest.mark.parametrize(
    ("schedule", "checked", "says"),
    [
        ({}, True, "records no fault schedule"),
        ({"seed": 5}, True, "bad schedule"),
        (_SCHEDULE, False, "was never checked"),
    ],
)
def test_a_run_that_cannot_be_replayed_exits_3_naming_why(
    schedule: dict[str, object],
    checked: bool,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _stored(tmp_path / "store", schedule, checked=checked)
    assert _exit(["replay", str(run), "--no-progress"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err
    assert len(list((tmp_path / "store").glob("*/*/history.jsonl"))) == 1  # nothing was run


def test_a_folder_that_is_no_run_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(["replay", str(tmp_path), "--no-progress"]) == EXIT_ERROR
    assert "is not a run directory" in capsys.readouterr().err


@pytest.mark.docker
def test_a_stored_invalid_run_replays_with_its_anomaly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = fencecheck(
        "run",
        "--bug",
        "no-store-check",
        "--fault-lengths",
        "3",
        "--time-limit",
        "12",
        "--seed",
        "7",
        "--store",
        str(store),
        "--no-progress",
    )
    assert first.returncode == EXIT_INVALID, first.stderr[-2000:]
    original = (store / "latest").resolve()
    assert "stale-write" in json.loads((original / "results.json").read_text())["anomaly_types"]

    again = fencecheck("replay", str(original), "--no-progress")
    story = again.stdout + again.stderr[-2000:]
    assert again.returncode == EXIT_INVALID, story
    assert (
        "reproduced: original invalid (stale-write), replay invalid (stale-write)" in again.stdout
    ), story
    replayed = (store / "latest").resolve()
    assert replayed != original
    old = json.loads((original / "test.json").read_text())
    new = json.loads((replayed / "test.json").read_text())
    assert new["schedule"] == old["schedule"]
    assert new["spec"]["seed"] == old["spec"]["seed"] == 7
    assert new["command"] == f"fencecheck replay {original}"
    assert "stale-write" in json.loads((replayed / "results.json").read_text())["anomaly_types"]
