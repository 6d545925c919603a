"""``fencecheck shrink`` on real clusters: a planted-bug run with many fault windows shrinks to
one or two, and the run that shows the minimal candidate replays it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import EXIT_INVALID
from tests.support.cli import fencecheck

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

_BUDGET = 10
"""Candidate runs: a few seconds each once the first drops have shortened the run."""


def test_a_planted_bug_run_shrinks_to_at_most_two_windows(tmp_path: Path) -> None:
    store = tmp_path / "store"
    # seed 2 with a 0.5 s lease draws 13 windows over 25 s, pauses of 0.15 to 8 TTLs
    first = fencecheck(
        "run",
        "--bug",
        "no-store-check",
        "--ttl",
        "0.5",
        "--time-limit",
        "25",
        "--seed",
        "2",
        "--store",
        str(store),
        "--no-progress",
    )
    assert first.returncode == EXIT_INVALID, first.stderr[-2000:]
    original = (store / "latest").resolve()
    windows = json.loads((original / "test.json").read_text())["schedule"]["windows"]
    assert len(windows) >= 8

    shrunk = fencecheck("shrink", str(original), "--budget", str(_BUDGET), "--no-progress")
    story = shrunk.stdout + shrunk.stderr[-3000:]
    assert shrunk.returncode == EXIT_INVALID, story
    result = json.loads((original / "shrunk.json").read_text())
    assert result["anomaly"] == "stale-write", story
    assert result["windows_before"] == len(windows)
    assert 1 <= result["windows_after"] <= 2, story
    assert result["runs"] <= _BUDGET
    assert f"in {result['runs']} runs" in shrunk.stdout
    assert f"reproduce: fencecheck replay {result['evidence']}" in shrunk.stdout
    assert "matrix row: " in shrunk.stdout

    evidence = Path(result["evidence"])
    assert evidence != original
    assert "stale-write" in json.loads((evidence / "results.json").read_text())["anomaly_types"]
    played = json.loads((evidence / "test.json").read_text())
    assert played["schedule"]["windows"] == result["schedule"]["windows"]
    assert played["spec"]["time_limit"] < 25
    assert (evidence / "report.html").exists()
