"""Schedules: determinism, lease-aware durations, recovery gaps, targets, JSON, resolution."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemeses.kinds import LOCK_FOLLOWER, Draw
from nemeses.protocol import NemesisError
from nemeses.registry import FAULT_KINDS, fault_kind
from nemeses.schedule import (
    DEFAULT_TTL_MULTIPLES,
    HOLDER,
    WAITER,
    Schedule,
    Window,
    generate_schedule,
    resolve,
)
from nemeses.topology import partition_drops

NODES = {"l1": "lock", "s1": "store", "w1": "worker", "w2": "worker", "w3": "worker"}
TTL = 1_000_000_000
RUN = 120 * TTL


def schedule(seed: int, **overrides: object) -> Schedule:
    options: dict[str, object] = {
        "lease_ttl_ns": TTL,
        "duration_ns": RUN,
        "targets": (HOLDER, "lock", "store", "worker"),
        "processes": {"worker": "agent", "lock": "lockd"},
    }
    options.update(overrides)
    return generate_schedule(seed, NODES, **options)  # type: ignore[arg-type]


def test_same_seed_same_schedule_and_another_seed_another() -> None:
    assert schedule(7) == schedule(7)
    assert schedule(7).to_json() == schedule(7).to_json()
    assert schedule(7).windows != schedule(8).windows


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_durations_are_ttl_multiples_and_windows_leave_recovery_gaps(seed: int) -> None:
    # A compound's second window (a restart inside a holder's pause) is an instant overlay.
    windows = [w for w in schedule(seed).windows if "overlaps" not in w.params]
    assert windows, "two minutes of a 1 s lease must hold faults"
    for window in windows:
        assert window.ttl_multiple in DEFAULT_TTL_MULTIPLES
        assert window.duration_ns == round(window.ttl_multiple * TTL)
        assert window.kind in FAULT_KINDS
    assert windows[0].start_ns >= TTL
    assert windows[-1].end_ns <= RUN - TTL
    for earlier, later in itertools.pairwise(windows):
        assert later.start_ns - earlier.end_ns >= 1.25 * TTL
    assert [w.index for w in schedule(seed).windows] == list(range(len(schedule(seed).windows)))


def test_every_kind_and_every_multiple_show_up_over_a_long_run() -> None:
    windows = schedule(3, duration_ns=2000 * TTL).windows
    compounds = {w.params["compound"] for w in windows if "compound" in w.params}
    assert {window.kind for window in windows} | compounds == set(FAULT_KINDS)
    bases = [w for w in windows if "overlaps" not in w.params]
    assert {window.ttl_multiple for window in bases} == set(DEFAULT_TTL_MULTIPLES)
    topologies = {w.params["topology"] for w in windows if w.kind == "partition"}
    assert topologies == {"isolate", "halves", "bridge", "one-way", "lock-cut"}


def test_custom_table_and_kinds_are_honoured() -> None:
    windows = schedule(1, kinds=("pause",), ttl_multiples=(0.5, 2.0)).windows
    assert {window.kind for window in windows} == {"pause"}
    assert {window.ttl_multiple for window in windows} <= {0.5, 2.0}


def test_holder_windows_carry_a_seeded_fallback_worker_and_the_role_process() -> None:
    windows = schedule(11, targets=(HOLDER,), kinds=("pause", "kill")).windows
    assert windows
    for window in windows:
        assert window.targets == (HOLDER,)
        assert window.fallback in ("w1", "w2", "w3")
        # Besides its process, a holder window says where in a write it lands and how it ends.
        assert window.params["process"] == "agent"
        assert set(window.params) <= {"process", "aim", "call_share", "resume"}


def test_waiter_windows_carry_a_worker_fallback_and_resolve_to_the_waiter() -> None:
    windows = schedule(11, targets=(WAITER,), kinds=("pause",)).windows
    assert windows
    for window in windows:
        assert window.targets == (WAITER,) and window.wants_waiter
        assert window.fallback in ("w1", "w2", "w3")
        assert window.params == {"process": "agent"}
    first = windows[0]
    assert resolve(first, list(NODES), "w1", waiter="w2").targets == ("w2",)
    assert resolve(first, list(NODES), "w1").targets == (first.fallback,)
    with pytest.raises(NemesisError, match="waiter targets need at least one worker"):
        generate_schedule(1, {"l1": "lock"}, lease_ttl_ns=TTL, duration_ns=RUN, targets=(WAITER,))


def test_role_and_node_targets_draw_nodes_of_that_role() -> None:
    for window in schedule(5, targets=("lock",), kinds=("pause", "freeze")).windows:
        assert window.targets == ("l1",)
        assert window.params.get("process") in (None, "lockd")
    for window in schedule(5, targets=("s1",), kinds=("throttle",)).windows:
        assert window.targets == ("s1",)
        assert window.params == {"cpu": 0.02}


def test_json_round_trip_survives_serialisation() -> None:
    original = schedule(21)
    text = json.dumps(original.to_json())
    assert Schedule.from_json(json.loads(text)) == original


def test_a_run_too_short_for_any_fault_has_an_empty_schedule() -> None:
    assert schedule(1, duration_ns=2 * TTL).windows == ()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kinds": ("explode",)}, "unknown fault kind"),
        ({"targets": ("w9",)}, "unknown target 'w9'"),
        ({"lease_ttl_ns": 0}, "must be positive"),
        ({"ttl_multiples": ()}, "TTL multiples"),
    ],
)
def test_bad_inputs_are_refused_with_the_fix(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(NemesisError, match=message):
        schedule(1, **overrides)


def test_resolve_uses_the_holder_then_the_fallback() -> None:
    window = Window(0, TTL, TTL, "pause", (HOLDER,), 1.0, "w3", {"process": "agent"})
    assert resolve(window, list(NODES), "w1").targets == ("w1",)
    fallback = resolve(window, list(NODES), None)
    assert fallback.targets == ("w3",)
    assert fallback.params == {"process": "agent"}


def test_a_holder_cut_from_the_lock_service_still_reaches_the_store() -> None:
    window = Window(
        0, TTL, TTL, "partition", (HOLDER,), 3.0, "w3", {"topology": "lock-cut", "peers": ["l1"]}
    )
    fault = resolve(window, list(NODES), "w2")
    drops = {tuple(drop) for drop in fault.params["drops"]}
    assert drops == {("w2", "l1"), ("l1", "w2")}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), holder=st.sampled_from(["w1", "w2", "w3", None]))
def test_every_generated_partition_resolves_to_drops_among_the_nodes(
    seed: int, holder: str | None
) -> None:
    for window in schedule(seed, kinds=("partition",)).windows:
        fault = resolve(window, list(NODES), holder)
        drops = {tuple(drop) for drop in fault.params["drops"]}
        assert drops
        assert all(a in NODES and b in NODES and a != b for a, b in drops)
        if window.params["topology"] == "one-way":
            assert not any((b, a) in drops for a, b in drops)


def test_partition_topologies() -> None:
    nodes = list(NODES)
    isolate = partition_drops("isolate", ["w2"], nodes)
    assert isolate == {d for peer in nodes if peer != "w2" for d in (("w2", peer), (peer, "w2"))}
    assert partition_drops("isolate", ["w2"], nodes, ["l1"]) == {("w2", "l1"), ("l1", "w2")}
    halves = partition_drops("halves", ["w1", "l1"], nodes)
    assert ("w1", "w2") in halves and ("l1", "s1") in halves and ("w1", "l1") not in halves
    bridge = partition_drops("bridge", ["w3"], nodes, ["w1", "l1"])
    assert ("w1", "s1") in bridge and ("s1", "l1") in bridge
    assert not any("w3" in drop for drop in bridge)
    assert partition_drops("one-way", ["w1"], nodes, ["l1"]) == {("w1", "l1")}
    assert partition_drops("one-way", ["w1"], nodes, ["l1"], inbound=True) == {("l1", "w1")}


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31), allowed=st.sets(st.sampled_from(("isolate", "halves")), min_size=1)
)
def test_partitions_are_drawn_only_among_the_topologies_the_run_allows(
    seed: int, allowed: set[str]
) -> None:
    # Alone, as an overlay of a pause and at the holder: every window keeps to --partitions.
    windows = [
        w
        for kinds in (("partition",), ("pause", "partition"))
        for w in schedule(seed, kinds=kinds, overlap=1.0, topologies=sorted(allowed)).windows
        if w.kind == "partition"
    ]
    assert windows
    assert {w.params["topology"] for w in windows} <= allowed


def test_lock_cut_alone_cuts_a_holder_from_the_lock_service_and_nothing_else() -> None:
    windows = schedule(3, kinds=("partition",), targets=(HOLDER,), topologies=("lock-cut",)).windows
    assert windows and all(w.params["topology"] == "lock-cut" for w in windows)
    for window in windows:
        fault = resolve(window, list(NODES), "w2")
        assert {tuple(drop) for drop in fault.params["drops"]} == {("w2", "l1"), ("l1", "w2")}


def test_a_lock_follower_is_only_isolated_so_a_run_without_isolate_is_refused() -> None:
    members = {"l1": "lock", "l2": "lock", "l3": "lock", **NODES}
    draw = Draw(random.Random(1), LOCK_FOLLOWER, "lock", members, {}, 1.0, topologies=("isolate",))
    assert fault_kind("partition").draw(draw)[1]["topology"] == "isolate"
    with pytest.raises(NemesisError, match="which allows isolate"):
        fault_kind("partition").draw(replace(draw, topologies=("halves", "lock-cut")))


@pytest.mark.parametrize(
    ("topologies", "targets", "message"),
    [
        ((), (HOLDER,), "give at least one partition topology"),
        (("circle",), (HOLDER,), "unknown partition topology circle"),
        # The lock service cannot be cut from itself.
        (("lock-cut",), ("lock",), "no partition of --partitions lock-cut can be aimed at l1"),
    ],
)
def test_partitions_no_window_can_take_are_refused(
    topologies: tuple[str, ...], targets: tuple[str, ...], message: str
) -> None:
    with pytest.raises(NemesisError, match=message):
        schedule(1, kinds=("partition",), targets=targets, topologies=topologies)


@pytest.mark.parametrize(
    ("topology", "targets", "peers", "message"),
    [
        ("circle", ["w1"], None, "unknown partition topology"),
        ("isolate", ["w9"], None, "unknown target node"),
        ("isolate", ["w1"], ["w1"], "both a target and a peer"),
        ("one-way", ["w1"], None, "needs peers"),
        ("bridge", ["w1", "w2"], ["l1"], "exactly one target"),
        ("halves", list(NODES), None, "would be empty"),
    ],
)
def test_bad_partitions_are_refused(
    topology: str, targets: list[str], peers: list[str] | None, message: str
) -> None:
    with pytest.raises(NemesisError, match=message):
        partition_drops(topology, targets, list(NODES), peers)
