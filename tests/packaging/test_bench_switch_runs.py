"""bench/switch_runs.py's summaries: what each SUMMARY line and table row counts (the runs
themselves are real clusters, run only by hand)."""

from __future__ import annotations

import argparse

import pytest

from bench.switch_runs import (
    Family,
    Run,
    describe,
    false_alarm_faults,
    summarize_detection,
    summarize_false_alarms,
)

FAMILY = Family(
    switches={"mark-no-fsync": "reference"},
    nemeses=("power-loss", "kill", "pause"),
    systems=("reference", "etcd"),
    default_systems=("reference", "etcd"),
    workloads={"etcd": "sinks"},
)


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
    assert row == ("etcd", "hold,delay,reset", "1/5", "2", "1", "error: the engine went away")
    line = capsys.readouterr().out
    assert line.startswith("SUMMARY etcd under hold,delay,reset: invalid 1/5 (valid 2, invalid 1,")
    assert "unknown 1, refused or broken 1" in line
    assert "invalid seeds 2, unknown seeds 3" in line


def _args(**given: object) -> argparse.Namespace:
    unset = dict.fromkeys(("nemesis", "target", "fault_lengths", "ttl", "workload"))
    return argparse.Namespace(**{**unset, **given})


def test_the_false_alarm_runs_take_the_family_faults_and_its_workload_for_a_system() -> None:
    reference = false_alarm_faults(FAMILY, "reference", _args())
    assert reference == {"nemeses": ("power-loss", "kill", "pause")}
    etcd = false_alarm_faults(FAMILY, "etcd", _args())
    assert etcd == {"nemeses": ("power-loss", "kill", "pause"), "workload": "sinks"}
    assert describe(etcd) == "power-loss,kill,pause, workload sinks"


def test_the_command_line_overrides_the_family_and_says_so_in_the_title() -> None:
    given = _args(
        nemesis=("power-loss",),
        target=("lock-all",),
        fault_lengths=(1.1,),
        ttl=4.0,
        workload="append",
    )
    faults = false_alarm_faults(FAMILY, "etcd", given)
    assert faults == {
        "nemeses": ("power-loss",),
        "targets": ("lock-all",),
        "fault_lengths": (1.1,),
        "ttl": 4.0,
        "workload": "append",
    }
    assert describe(faults) == "power-loss at lock-all, fault lengths 1.1, TTL 4 s, workload append"
