"""The disk fault kinds in real runs of the reference system: the correct system stays valid
under all four, each fault confirmed by the lazy file system's own report; a store that never
fsyncs its marks is caught by ``fencecheck run --bug mark-no-fsync`` with nothing else named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import EXIT_INVALID, EXIT_VALID
from nemeses.disk import DISK_FULL, FSYNC_ERROR, POWER_LOSS, SLOW_DISK
from tests.support.cli import fencecheck

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


def _run(store: Path, *args: str) -> tuple[Any, dict[str, Any], list[dict[str, Any]], str]:
    run = fencecheck(
        "run", "--time-limit", "20", "--store", str(store), "--no-progress", "--json", *args
    )
    story = run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(run.stdout)
    history = Path(result["run_dir"]) / "history.jsonl"
    faults = [
        event
        for event in map(json.loads, history.read_text().splitlines())
        if event["process"] == "nemesis"
    ]
    return run, result, faults, story


def test_the_correct_system_stays_valid_and_each_disk_fault_is_confirmed(tmp_path: Path) -> None:
    kinds = (POWER_LOSS, DISK_FULL, FSYNC_ERROR, SLOW_DISK)
    run, result, faults, story = _run(
        tmp_path, "--nemesis", ",".join(kinds), "--target", "store,lock", "--seed", "2"
    )
    assert run.returncode == EXIT_VALID, story
    applied = {event["f"] for event in faults if event["value"].get("applied")}
    for kind in kinds:
        assert f"start-{kind}" in applied and f"stop-{kind}" in applied, story
    for event in faults:
        said = event["value"].get("said", "")
        if event["f"] == f"start-{POWER_LOSS}":
            assert said.startswith(f"{event['value']['targets'][0]} lost power: "), said
            assert set(event["value"]["lost"]) == {"writes", "bytes", "files", "entry_changes"}
        elif event["f"].startswith("stop-") and event["f"] != f"stop-{POWER_LOSS}":
            assert "'s disk recovered after " in said, said
    assert result["coverage"]["power_losses"]["total"] >= 1, story


def test_mark_no_fsync_is_caught_by_the_faults_run_picks_by_itself(tmp_path: Path) -> None:
    run, result, faults, story = _run(tmp_path, "--bug", "mark-no-fsync", "--seed", "1")
    assert run.returncode == EXIT_INVALID, story
    assert {"lost-write", "stale-write"} & set(result["anomaly_types"]), story
    assert any(event["f"] == f"start-{POWER_LOSS}" for event in faults), story
