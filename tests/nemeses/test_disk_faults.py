"""The power-loss and disk fault kinds without a cluster: their draws, sentences, coverage and
refusals (their effect on a real lazy file system: test_lazyfs.py and the Docker run tests)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from checkers.coverage import coverage_of
from checkers.explain import describe_fault
from harness.nodeside.lazyfs import copy_sparse
from harness.record import Event
from harness.record.schedule import Window
from harness.record.verdict import FaultWindow
from nemeses import END_AFTER_WRITES, LOCK_LEADER, NemesisError, generate_schedule, resolve
from nemeses.disk import (
    DISK_FULL,
    FSYNC_ERROR,
    GROUP,
    POWER_LOSS,
    POWER_LOSS_KIND,
    SLOW_DISK,
    SLOW_DISK_KIND,
    SLOW_TTL_MULTIPLES,
    dropped_sentence,
)
from nemeses.kinds import STAND_IN, Draw
from nemeses.registry import KINDS
from systems.base import disk_problem
from systems.noop import NoopSystem
from systems.reference import ReferenceSystem

NODES = {"l1": "lock", "s1": "store", "w1": "worker", "w2": "worker"}
S = 1_000_000_000


def _draw(target: str, role: str, seed: int = 1) -> Draw:
    return Draw(random.Random(seed), target, role, NODES, {"worker": "agent"}, 0.02, 3 * S, S)


DISK_KINDS = tuple(name for name, kind in KINDS.items() if kind.needs_disk)


def test_the_disk_kinds_are_those_whose_entries_say_they_need_the_lazy_file_system() -> None:
    assert set(DISK_KINDS) == {POWER_LOSS, DISK_FULL, FSYNC_ERROR, SLOW_DISK}


def test_power_loss_at_a_store_is_one_window_at_that_node() -> None:
    assert POWER_LOSS_KIND.draw(_draw("s1", "store")) == (("s1",), {})


def test_power_loss_at_the_holder_lands_right_after_the_takeover() -> None:
    seen = {}
    for seed in range(20):
        targets, params = POWER_LOSS_KIND.draw(_draw("holder", "worker", seed))
        assert targets == ("holder",)
        assert params["process"] == "agent"
        assert params["restart_at"] == "takeover"
        seen[params["restart"]] = params[END_AFTER_WRITES]
    # The store right after the new holder's first accepted write; the lock right after a grant.
    assert seen == {"s1": 1, "l1": 0}


def test_slow_disk_draws_a_ttl_multiple_per_fsync_at_a_store_or_lock_node() -> None:
    targets, params = SLOW_DISK_KIND.draw(_draw("holder", "worker"))
    assert targets[0] in ("s1", "l1")
    assert params["delay_ttl"] in SLOW_TTL_MULTIPLES
    assert params["delay_s"] == params["delay_ttl"]  # a TTL of 1 s


def test_a_schedule_of_disk_kinds_aims_every_window_at_a_server_or_the_holder() -> None:
    schedule = generate_schedule(
        7, NODES, lease_ttl_ns=S, duration_ns=60 * S, kinds=DISK_KINDS, targets=("holder",)
    )
    # A power loss at the holder is played as its pause and a power loss of a server.
    assert {window.kind for window in schedule.windows} == {*DISK_KINDS, "pause"}
    for window in schedule.windows:
        if window.kind == "pause":
            assert window.params["compound"] == POWER_LOSS and window.targets == ("holder",)
        else:
            assert window.targets[0] in ("s1", "l1")


def test_the_sentence_says_what_a_power_loss_dropped() -> None:
    dropped = {"/data": {"writes": 3, "bytes": 412, "files": 1, "entry_changes": 0}}
    assert dropped_sentence("s1", dropped) == "s1 lost power: 3 unsynced writes (412 bytes) dropped"
    nothing = {"/data": {"writes": 0, "bytes": 0, "files": 0, "entry_changes": 0}}
    assert dropped_sentence("s1", nothing) == "s1 lost power: nothing unsynced to drop"
    entries = {"/data": {"writes": 1, "bytes": 9, "files": 1, "entry_changes": 2}}
    assert dropped_sentence("l1", entries) == (
        "l1 lost power: 1 unsynced write (9 bytes) and 2 unsynced directory changes dropped"
    )


def test_an_explanation_puts_the_time_before_the_details() -> None:
    window = FaultWindow(
        POWER_LOSS,
        ("s1",),
        12_100_000_000,
        14_000_000_000,
        1,
        2,
        opened="s1 lost power: 3 unsynced writes (412 bytes) dropped",
        closed="s1's power came back",
    )
    assert describe_fault(window) == (
        "s1 lost power at 12.1 s: 3 unsynced writes (412 bytes) dropped, "
        "and s1's power came back at 14 s"
    )


def _power_loss(index: int, at: float, writes: int) -> list[Event]:
    lost = {"writes": writes, "bytes": 100 * writes, "files": 1, "entry_changes": 0}
    start = {"id": index, "targets": ["s1"], "lost": lost, "applied": True}
    stop = {"id": index, "targets": ["s1"], "applied": True}
    return [
        Event(2 * index, round(at * S), "nemesis", "info", f"start-{POWER_LOSS}", start),
        Event(2 * index + 1, round((at + 1) * S), "nemesis", "info", f"stop-{POWER_LOSS}", stop),
    ]


def test_coverage_counts_power_losses_and_those_that_dropped_data() -> None:
    events = [*_power_loss(0, 1.0, 3), *_power_loss(1, 5.0, 0)]
    coverage = coverage_of(events, lease_ttl=1.0, roles=NODES)
    assert coverage.power_losses == {
        "total": 2,
        "dropped_data": 1,
        "writes_dropped": 3,
        "bytes_dropped": 300,
    }
    assert coverage.restarts == {"store": 2}
    assert not any("power loss" in gap for gap in coverage.gaps())


def test_a_run_whose_power_losses_dropped_nothing_says_so() -> None:
    coverage = coverage_of(_power_loss(0, 1.0, 0), lease_ttl=1.0, roles=NODES)
    assert any("none of the 1 power losses dropped anything" in gap for gap in coverage.gaps())


def test_a_system_that_does_not_say_where_its_data_is_is_refused_disk_faults() -> None:
    assert disk_problem(ReferenceSystem(), [POWER_LOSS, DISK_FULL, SLOW_DISK]) is None
    assert disk_problem(NoopSystem(), []) is None
    refusal = disk_problem(NoopSystem(), [POWER_LOSS])
    assert refusal is not None
    assert "TakesDiskFaults" in refusal and POWER_LOSS in refusal


ENSEMBLE = {"z1": "lock", "z2": "lock", "z3": "lock", "s1": "store", "w1": "worker"}


def test_power_loss_at_a_group_takes_that_many_of_the_role_at_once() -> None:
    for seed in range(10):
        draw = Draw(random.Random(seed), "lock-all", "lock", ENSEMBLE, {}, 0.02, 3 * S, S)
        assert POWER_LOSS_KIND.draw(draw) == (("z1", "z2", "z3"), {GROUP: "all"})
    majorities = set()
    for seed in range(20):
        draw = Draw(random.Random(seed), "lock-majority", "lock", ENSEMBLE, {}, 0.02, 3 * S, S)
        targets, params = POWER_LOSS_KIND.draw(draw)
        assert params == {GROUP: "majority"} and len(targets) == 2
        majorities.add(targets)
    assert majorities == {("z1", "z2"), ("z1", "z3"), ("z2", "z3")}


def test_a_group_target_schedules_every_power_loss_on_the_whole_group() -> None:
    schedule = generate_schedule(
        3, ENSEMBLE, lease_ttl_ns=S, duration_ns=60 * S, kinds=(POWER_LOSS,), targets=("lock-all",)
    )
    assert schedule.windows
    assert {w.targets for w in schedule.windows} == {("z1", "z2", "z3")}
    # Every node it powered off is restarted at its stop, as the kill kind's are.
    assert POWER_LOSS_KIND.restarted(("z1", "z2", "z3"), {GROUP: "all"}) == ("z1", "z2", "z3")


def test_a_group_target_is_refused_with_a_kind_that_does_not_take_groups() -> None:
    with pytest.raises(NemesisError, match="only power-loss can; drop kill"):
        generate_schedule(
            3,
            ENSEMBLE,
            lease_ttl_ns=S,
            duration_ns=60 * S,
            kinds=(POWER_LOSS, "kill"),
            targets=("lock-majority",),
        )
    with pytest.raises(NemesisError, match="no store node"):
        generate_schedule(
            3,
            NODES | {"s1": "worker"},
            lease_ttl_ns=S,
            duration_ns=60 * S,
            kinds=(POWER_LOSS,),
            targets=("store-all",),
        )


@pytest.mark.parametrize("kind", [POWER_LOSS, DISK_FULL, FSYNC_ERROR, SLOW_DISK])
def test_a_holder_disk_fault_lands_on_the_node_of_record_where_the_system_names_one(
    kind: str,
) -> None:
    """Redis names its primary (``lock-leader``): a power loss (the pair's) or a disk fault aimed
    at the holder hits the primary when it starts, with the server drawn among both standing in
    for it (never a worker): a replica's failing disk spares what the holders depend on."""
    nodes = {"r1": "lock", "r2": "lock", "w1": "worker", "w2": "worker"}

    def windows(records: dict[str, str]) -> list[Window]:
        schedule = generate_schedule(
            5,
            nodes,
            lease_ttl_ns=S,
            duration_ns=120 * S,
            kinds=(kind,),
            targets=("holder",),
            records=records,
        )
        return [w for w in schedule.windows if w.kind == kind]

    aimed = windows({"lock": LOCK_LEADER})
    assert aimed
    for window in aimed:
        assert window.targets == (LOCK_LEADER,) and window.fallback in ("r1", "r2")
        assert STAND_IN not in window.params
        assert resolve(window, list(nodes), "w1", "r2").targets == ("r2",)
        assert resolve(window, list(nodes), "w1", None).targets == (window.fallback,)
    # On a system that names no such node, or none for this role, the node drawn among the role's.
    for records in ({}, {"store": LOCK_LEADER}):
        plain = windows(records)
        assert plain and {w.targets for w in plain} <= {("r1",), ("r2",)}


def test_a_power_loss_rebuilds_a_preallocated_file_with_its_holes(tmp_path: Path) -> None:
    """ZooKeeper pads each log to 64 MB with one byte at its end: the copy keeps the hole (a
    whole copy took seconds per member and power loss) and every byte."""
    source, target = tmp_path / "log.1", tmp_path / "copy"
    size = 64 << 20
    with source.open("wb") as file:
        file.write(b"txn 1\n")
        file.seek(size - 1)
        file.write(b"\0")
    copy_sparse(str(source), str(target))
    assert target.stat().st_size == size
    with target.open("rb") as file:
        assert file.read(6) == b"txn 1\n"
        file.seek(size - 4096)
        assert file.read() == bytes(4096)
    assert target.stat().st_blocks * 512 < 1 << 20
