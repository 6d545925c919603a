"""Overlapping faults in the default schedule: restarts inside a holder's pause and right after
the takeover, the lengths just over the TTL, and how the player places the overlap."""

from __future__ import annotations

import threading
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.record.spec import TestSpec
from nemeses import (
    DEFAULT_NEMESES,
    DEFAULT_TTL_MULTIPLES,
    END_AFTER_WRITES,
    HOLDER,
    RESTART_WHILE_PAUSED,
    STEP_AT_NS,
    Schedule,
    Window,
    generate_schedule,
)
from nemeses.noop import NoopNemesis
from nemeses.player import NemesisPlayer
from systems import load_system
from tests.support.nemesis_fakes import Recording, clock, fake_cluster

NODES = {"l1": "lock", "s1": "store", "w1": "worker", "w2": "worker", "w3": "worker"}
TTL = 1_000_000_000
MS = 1_000_000


def default_schedule(seed: int, duration_ns: int = 60 * TTL) -> Schedule:
    """The schedule a run with no --nemesis and no --fault-lengths draws."""
    return generate_schedule(
        seed,
        NODES,
        lease_ttl_ns=TTL,
        duration_ns=duration_ns,
        kinds=DEFAULT_NEMESES,
        targets=(HOLDER,),
        processes={"worker": "agent", "store": "store", "lock": "lock-server"},
    )


def compounds(schedule: Schedule) -> list[Window]:
    return [w for w in schedule.windows if w.kind == RESTART_WHILE_PAUSED]


def test_the_defaults_overlap_a_restart_with_a_holder_pause() -> None:
    assert TestSpec().nemeses == DEFAULT_NEMESES
    assert RESTART_WHILE_PAUSED in DEFAULT_NEMESES
    for seed in range(20):
        assert compounds(default_schedule(seed)), f"seed {seed}: a minute with no overlap"


def test_over_many_runs_every_overlap_shape_and_both_restarted_roles_are_drawn() -> None:
    windows = compounds(default_schedule(4, duration_ns=3000 * TTL))
    shapes = {w.params["restart_at"] for w in windows}
    assert shapes == {"resume", "inside", "takeover"}
    inside = [w for w in windows if w.params["restart_at"] == "inside"]
    assert {NODES[w.params["restart"]] for w in inside} == {"store", "lock"}
    assert {w.params["restart_process"] for w in inside} == {"store", "lock-server"}
    # The shape that finds a lazily saved mark restarts the store.
    assert {w.params["restart"] for w in windows if w.params["restart_at"] == "takeover"} == {"s1"}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_an_inside_restart_lands_inside_the_pause(seed: int) -> None:
    for window in compounds(default_schedule(seed)):
        assert window.targets == (HOLDER,) and window.params["process"] == "agent"
        assert window.ttl_multiple > 1, "the holder must be paused past its lease"
        step = window.params.get(STEP_AT_NS)
        if window.params["restart_at"] == "inside":
            assert isinstance(step, int)
            assert 0.1 * window.duration_ns <= step <= 0.9 * window.duration_ns
            assert END_AFTER_WRITES not in window.params
        else:
            assert step is None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_a_takeover_restart_is_due_after_the_new_holders_first_few_writes(seed: int) -> None:
    for window in compounds(default_schedule(seed)):
        writes = window.params.get(END_AFTER_WRITES)
        if window.params["restart_at"] == "takeover":
            assert isinstance(writes, int) and 1 <= writes <= 3
        else:
            assert writes is None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_every_default_run_has_a_takeover_restart(seed: int) -> None:
    """Even 30 s: the shape that finds a lazily saved mark is never left to luck."""
    windows = compounds(default_schedule(seed, duration_ns=30 * TTL))
    assert windows and windows[0].params["restart_at"] == "takeover"


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), kinds=st.permutations(["pause", "kill", "partition", "freeze"]))
def test_every_kind_is_played_once_before_any_is_played_twice(seed: int, kinds: list[str]) -> None:
    schedule = generate_schedule(
        seed, NODES, lease_ttl_ns=TTL, duration_ns=120 * TTL, kinds=kinds,
        targets=("store",), ttl_multiples=(0.5,),
    )  # fmt: skip
    played = [w.kind for w in schedule.windows]
    for start in range(0, len(played) - len(kinds) + 1, len(kinds)):
        assert sorted(played[start : start + len(kinds)]) == sorted(kinds)


def test_the_default_lengths_table_has_the_lengths_just_over_the_ttl() -> None:
    assert DEFAULT_TTL_MULTIPLES == (0.15, 0.8, 1.1, 1.5, 3.0, 8.0)
    windows = default_schedule(2, duration_ns=3000 * TTL).windows
    assert {w.ttl_multiple for w in windows} == set(DEFAULT_TTL_MULTIPLES)
    assert {w.ttl_multiple for w in windows if w.kind == RESTART_WHILE_PAUSED} == {
        1.1,
        1.5,
        3.0,
        8.0,
    }
    for window in windows:
        assert window.duration_ns == round(window.ttl_multiple * TTL)


def test_a_given_lengths_table_is_honoured_by_the_overlaps_too() -> None:
    schedule = generate_schedule(
        9, NODES, lease_ttl_ns=TTL, duration_ns=600 * TTL, kinds=DEFAULT_NEMESES,
        ttl_multiples=(0.5, 1.1),
    )  # fmt: skip
    assert {w.ttl_multiple for w in schedule.windows} == {0.5, 1.1}
    assert {w.ttl_multiple for w in compounds(schedule)} == {1.1}


def test_the_same_seed_draws_the_same_overlaps_and_they_survive_json() -> None:
    first, again = default_schedule(17), default_schedule(17)
    assert first == again
    assert compounds(first)
    assert Schedule.from_json(first.to_json()) == first
    assert [w.params for w in compounds(default_schedule(18))] != [
        w.params for w in compounds(first)
    ]


def test_lazy_mark_is_exposed_by_the_defaults() -> None:
    switch = load_system("reference").bug_switches()["lazy-mark"]  # type: ignore[attr-defined]
    spec = TestSpec()
    assert switch.exposed_by.faults == spec.nemeses
    assert switch.exposed_by.targets == spec.targets
    assert switch.exposed_by.ttl_multiples == spec.fault_lengths == ()
    assert switch.exposed_by.workload == spec.workload


# -- the player ---------------------------------------------------------------------------------


def compound(duration_ms: int, **params: Any) -> Window:
    base = {"restart": "s1", "process": "agent", "restart_process": "store"}
    return Window(
        0, 1 * MS, duration_ms * MS, RESTART_WHILE_PAUSED, (HOLDER,), 3.0, "w3", base | params
    )


def play(window: Window, nemesis: NoopNemesis, resolve_holder: Any) -> Recording:
    record = Recording()
    with NemesisPlayer(fake_cluster(), nemesis, [window], clock(), record, resolve_holder) as p:
        p.join(30)
    return record


def test_the_player_restarts_at_the_drawn_moment_inside_the_pause() -> None:
    nemesis = NoopNemesis()
    record = play(compound(80, restart_at="inside", **{STEP_AT_NS: 30 * MS}), nemesis, lambda: "w1")
    assert [f for f, _ in nemesis.calls] == [
        "start-restart-while-paused",
        "step-restart-while-paused",
        "stop-restart-while-paused",
    ]
    (_, start), (_, stop) = record.events
    assert stop["step_scheduled"] == 31 * MS
    assert start["confirmed"] <= stop["step_scheduled"] <= stop["step_confirmed"]
    assert stop["step_confirmed"] <= stop["confirmed"] and stop["scheduled"] == 81 * MS
    assert stop["applied"] is True


def test_a_step_past_a_shortened_window_is_left_to_the_stop() -> None:
    nemesis = NoopNemesis()
    play(compound(20, restart_at="inside", **{STEP_AT_NS: 40 * MS}), nemesis, lambda: "w1")
    assert [f for f, _ in nemesis.calls] == [
        "start-restart-while-paused",
        "stop-restart-while-paused",
    ]


def test_a_failed_step_makes_the_window_not_applied() -> None:
    nemesis = NoopNemesis(failing=["step-restart-while-paused"])
    record = play(compound(40, restart_at="inside", **{STEP_AT_NS: 10 * MS}), nemesis, lambda: "w1")
    stop = record.events[-1][1]
    assert stop["applied"] is False and stop["error"].startswith("step: ")
    assert nemesis.in_force == []


class Writes:
    """A holder board's view of writes: who is inside a write, and accepted counts."""

    def __init__(self) -> None:
        self.working: set[str] = set()
        self.accepted: dict[str, int] = {}

    def in_critical_section(self, node: str) -> bool:
        return node in self.working

    def accepted_since_grant(self, node: str) -> int:
        return self.accepted.get(node, 0)


def test_a_takeover_window_ends_once_the_new_holder_had_its_writes_accepted() -> None:
    nemesis = NoopNemesis()
    writes = Writes()
    granted = threading.Event()
    now = clock()
    moments: dict[str, int] = {}

    def holder() -> str:
        if not granted.is_set() and nemesis.calls:  # paused: the lease passes to w2 a bit later
            time.sleep(0.02)
            moments["granted"] = now()
            granted.set()
            threading.Thread(target=write_twice, daemon=True).start()
        return "w2" if granted.is_set() else "w1"

    def write_twice() -> None:
        for _ in range(2):
            time.sleep(0.03)
            writes.accepted["w2"] = writes.accepted.get("w2", 0) + 1
        moments["second write"] = now()

    window = compound(60_000, restart_at="takeover", **{END_AFTER_WRITES: 2})
    record = Recording()
    with NemesisPlayer(
        fake_cluster(), nemesis, [window], now, record, holder, holder_work=writes
    ) as player:
        player.join(30)
    (_, start), (_, stop) = record.events
    assert start["targets"] == ["w1"]
    assert stop["new_holder"] == "w2"
    assert stop["takeover"] >= moments["granted"], "the restart waits for the new grant"
    assert moments["second write"] <= stop["scheduled"] < window.end_ns
    assert stop["confirmed"] >= stop["scheduled"]
    assert [f for f, _ in nemesis.calls][-1] == "stop-restart-while-paused"


def test_without_a_view_of_writes_a_takeover_window_ends_at_the_takeover() -> None:
    nemesis = NoopNemesis()
    taken = threading.Event()

    def holder() -> str:
        if nemesis.calls:
            taken.set()
        return "w2" if taken.is_set() else "w1"

    record = play(compound(60_000, restart_at="takeover", **{END_AFTER_WRITES: 3}), nemesis, holder)
    stop = record.events[-1][1]
    assert stop["new_holder"] == "w2" and stop["scheduled"] == stop["takeover"]


def test_a_holder_window_starts_inside_one_of_the_holders_writes() -> None:
    nemesis = NoopNemesis()
    writes = Writes()
    now = clock()
    sent: list[int] = []

    def send_later() -> None:
        time.sleep(0.02)
        sent.append(now())
        writes.working.add("w1")

    threading.Thread(target=send_later, daemon=True).start()
    record = Recording()
    # A 4 s lease: the player waits up to a quarter of it for the write, far longer than the
    # sender's 20 ms even on a loaded machine.
    window = Window(0, 1 * MS, 200 * MS, "pause", (HOLDER,), 0.05, "w3", {"process": "agent"})
    with NemesisPlayer(
        fake_cluster(), nemesis, [window], now, record, lambda: "w1", holder_work=writes
    ) as player:
        player.join(30)
    (_, start), _ = record.events
    assert start["mid_write"] is True and start["targets"] == ["w1"]
    assert start["confirmed"] >= sent[0], "it waits until the holder is inside a write"


def test_a_holder_that_does_not_write_is_faulted_after_a_quarter_lease() -> None:
    nemesis = NoopNemesis()
    now = clock()
    record = Recording()
    window = Window(0, 1 * MS, 20 * MS, "pause", (HOLDER,), 0.5, "w3", {"process": "agent"})
    with NemesisPlayer(
        fake_cluster(), nemesis, [window], now, record, lambda: "w1", holder_work=Writes()
    ) as player:
        player.join(30)
    (_, start), _ = record.events
    assert start["mid_write"] is False
    assert start["confirmed"] >= 1 * MS + 0.25 * 40 * MS  # the TTL is 20 ms / 0.5


def test_a_takeover_that_never_comes_ends_the_window_on_schedule() -> None:
    nemesis = NoopNemesis()
    window = compound(40, restart_at="takeover", **{END_AFTER_WRITES: 1})
    record = play(window, nemesis, lambda: "w1")
    stop = record.events[-1][1]
    assert stop["scheduled"] == window.end_ns and "takeover" not in stop
