"""``run`` refuses, before any container starts, a spec that cannot expose its planted bug."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.record.spec import TestSpec
from harness.run.exposure import Need, exposure_fields, need_of, switches_of, unexposed
from nemeses import Schedule, Window
from systems import HOLDER_FLAWS, BugSwitch, Exposure
from systems.reference import ReferenceSystem

SWITCHES = switches_of(ReferenceSystem())


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", "--store", str(tmp_path / "store"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["--workload", "rmw", "--bug", "unfenced-path"], "--workload sinks"),
        (["--bug", "epoch-in-memory", "--nemesis", "kill", "--target", "holder"], "--target lock"),
        (["--bug", "no-store-check", "--fault-lengths", "0.5"], "--fault-lengths 3"),
        (["--bug", "store-forgets", "--nemesis", "pause"], "--nemesis restart-while-paused"),
        (["--fault-lengths", "100", "--time-limit", "5"], "--time-limit"),
        (["--fault-lengths", "1e9", "--time-limit", "5"], "--fault-lengths"),
        (["--bug", "no-store-check", "--nemesis", "none"], "--nemesis pause"),
    ],
    ids=[
        "rmw-unfenced",
        "kill-holder",
        "short",
        "wrong-kind",
        "none-fits",
        "beyond-bounds",
        "no-faults",
    ],
)
def test_an_unexposable_spec_exits_3_with_the_fix_and_starts_nothing(
    tmp_path: Path, args: list[str], fix: str
) -> None:
    done = _run(tmp_path, *args)
    assert done.returncode == 3, done.stderr
    assert fix in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "store").exists()


def test_without_nemesis_run_picks_the_fault_that_exposes_the_switch(tmp_path: Path) -> None:
    # Too short for any fault, so it stops before Docker, naming the fault it picked.
    done = _run(tmp_path, "--bug", "epoch-in-memory", "--time-limit", "2")
    assert done.returncode == 3
    assert "--nemesis kill" in done.stderr
    assert exposure_fields(SWITCHES, ["epoch-in-memory"]) == {
        "nemeses": ("kill",),
        "targets": ("lock",),
    }
    assert exposure_fields(SWITCHES, ["store-forgets"]) == {
        "nemeses": ("restart-while-paused",),
        "targets": ("holder",),
    }
    assert exposure_fields(SWITCHES, ["epoch-in-memory", "store-forgets"]) == {}
    assert exposure_fields(SWITCHES, []) == {}


def test_the_holder_flaws_are_judged_like_a_systems_switches() -> None:
    assert set(HOLDER_FLAWS) <= set(SWITCHES)
    rmw = need_of(SWITCHES["reacquire-no-reread"].exposed_by)
    assert rmw.workloads == {"rmw"} and rmw.past_lease


def test_an_exposure_is_read_as_what_a_run_must_contain() -> None:
    # Any stop of the holder stands in for a pause; a stop must outlast the lease.
    paused = need_of(Exposure(faults=("pause",)))
    assert paused == Need(
        frozenset({"pause", "freeze", "throttle", "partition", "restart-while-paused"}),
        frozenset({"worker"}),
        True,
        frozenset(),
    )
    # A kill of the lock service needs no length, and the compound stands only for itself.
    killed = need_of(Exposure(faults=("kill",), targets=("lock",)))
    assert (killed.kinds, killed.roles, killed.past_lease) == ({"kill"}, {"lock"}, False)
    assert need_of(Exposure(faults=("restart-while-paused",))).kinds == {"restart-while-paused"}
    assert need_of(Exposure(faults=("pause",), workload="sinks")).workloads == {"sinks"}
    assert need_of(Exposure(faults=("pause",), locks=3)).locks == 3


def test_a_switch_that_needs_several_locks_is_refused_with_one() -> None:
    switch = BugSwitch("one-lock-hides-it", "", Exposure(faults=("pause",), locks=3), ())
    roles = {"l1": "lock", "w1": "worker"}
    spec = TestSpec(bugs=("one-lock-hides-it",), ttl=1.0, time_limit=30.0, fault_lengths=(3.0,))
    window = Window(0, 1_000_000_000, 3_000_000_000, "pause", ("holder",), 3.0, "w1")
    schedule = Schedule(1, 1_000_000_000, 30_000_000_000, (window,))
    problem = unexposed(spec, schedule, roles, {switch.name: switch})
    assert problem is not None and "--locks 3" in problem
    assert unexposed(replace(spec, locks=3), schedule, roles, {switch.name: switch}) is None


def test_a_switch_may_need_a_fault_on_one_named_node() -> None:
    # redis's async-failover: the replica r2 must be cut off, not any lock node.
    switch = BugSwitch("replica-cut", "", Exposure(faults=("partition",), targets=("r2",)), ())
    roles = {"r1": "lock", "r2": "lock", "w1": "worker"}
    spec = TestSpec(bugs=("replica-cut",), ttl=1.0, time_limit=30.0, fault_lengths=(8.0,))

    def cut(node: str) -> Schedule:
        window = Window(0, 1_000_000_000, 8_000_000_000, "partition", (node,), 8.0)
        return Schedule(1, 1_000_000_000, 30_000_000_000, (window,))

    assert unexposed(spec, cut("r2"), roles, {switch.name: switch}) is None
    problem = unexposed(spec, cut("r1"), roles, {switch.name: switch})
    assert problem is not None and "--target r2" in problem


def test_a_holder_pause_overlapped_by_a_store_kill_stands_for_restart_while_paused() -> None:
    roles = {"l1": "lock", "s1": "store", "w1": "worker", "w2": "worker"}
    spec = TestSpec(bugs=("store-forgets",), nemeses=("pause", "kill"), targets=("holder", "store"))
    ttl = 1_000_000_000
    pause = Window(0, ttl, 3 * ttl, "pause", ("holder",), 3.0, "w1", {})
    kill = Window(1, 2 * ttl, ttl, "kill", ("s1",), 1.0, None, {"overlaps": 0, "anchor": "inside"})
    apart = replace(kill, start_ns=6 * ttl, params={})
    assert unexposed(spec, Schedule(1, ttl, 20 * ttl, (pause, kill)), roles, SWITCHES) is None
    problem = unexposed(spec, Schedule(1, ttl, 20 * ttl, (pause, apart)), roles, SWITCHES)
    assert problem is not None and "restart-while-paused" in problem
    alone = unexposed(spec, Schedule(1, ttl, 20 * ttl, (pause,)), roles, SWITCHES)
    assert alone is not None
