"""bench/switch_runs.py's summaries: what each SUMMARY line and table row counts (the runs
themselves are real clusters, run only by hand)."""

from __future__ import annotations

import pytest

from bench.switch_runs import Run, summarize_detection, summarize_false_alarms


def test_a_switch_summary_counts_the_caught_runs_and_their_median(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = [
        Run(1, "False", True, 4_000_000_000),
        Run(2, "True"),
        Run(3, "False", True, 10_000_000_000),
        Run(4, "False", True, 6_000_000_000),
        Run(5, "refused: no proxy"),
    ]
    row = summarize_detection("fence-per-connection", runs, 60.0)
    assert row == ("fence-per-connection", "3/5", "6.0 s", "2,5")
    line = capsys.readouterr().out
    assert line.startswith("SUMMARY fence-per-connection: caught 3/5, median to first violation")
    assert "seeds 1..5" in line and "missed seeds 2,5" in line and "60 s runs" in line


def test_a_system_summary_counts_invalid_valid_unknown_and_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = [
        Run(1, "True"),
        Run(2, "False"),
        Run(3, "None"),
        Run(4, "True"),
        Run(5, "error: the engine went away"),
    ]
    row = summarize_false_alarms("etcd", runs, "hold,delay,reset", 20.0)
    assert row == ("etcd", "1/5", "2", "1", "error: the engine went away")
    line = capsys.readouterr().out
    assert line.startswith("SUMMARY etcd under hold,delay,reset: invalid 1/5 (valid 2, invalid 1,")
    assert "unknown 1, refused or broken 1" in line
    assert "invalid seeds 2, unknown seeds 3" in line
