"""Overlapping faults in the default schedule: restarts inside a holder's pause and right after
the takeover (``restart-while-paused``, played as a pause and a kill overlay), the lengths just
over the TTL, and how the player places the overlap."""

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
    HOLDER,
    RESTART_WHILE_PAUSED,
    Schedule,
    Window,
    generate_schedule,
    playable,
)
from nemeses.kinds import ANCHOR, COMPOUND, OVERLAPS, RESUMES_BASE, START_AFTER_WRITES
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
    """The pauses that play a restart-while-paused window."""
    return [
        w
        for w in schedule.windows
        if w.params.get(COMPOUND) == RESTART_WHILE_PAUSED and OVERLAPS not in w.params
    ]


def restarts(schedule: Schedule) -> list[tuple[Window, Window]]:
    """Each such pause with the kill overlay that restarts a daemon inside it."""
    by_base = {w.params[OVERLAPS]: w for w in schedule.windows if OVERLAPS in w.params}
    return [(base, by_base[base.index]) for base in compounds(schedule)]


def test_a_compound_is_played_as_a_pause_and_a_kill_right_after_it() -> None:
    schedule = default_schedule(5)
    assert RESTART_WHILE_PAUSED not in {w.kind for w in schedule.windows}
    for position, window in enumerate(schedule.windows):
        if window.params.get(COMPOUND) == RESTART_WHILE_PAUSED and OVERLAPS in window.params:
            base = schedule.windows[position - 1]
            assert (base.kind, window.kind) == ("pause", "kill")
            assert window.params[OVERLAPS] == base.index
            assert window.targets in (("s1",), ("l1",))
    assert [w.index for w in schedule.windows] == list(range(len(schedule.windows)))


def test_the_defaults_overlap_a_restart_with_a_holder_pause() -> None:
    assert TestSpec().nemeses == DEFAULT_NEMESES
    assert RESTART_WHILE_PAUSED in DEFAULT_NEMESES
    for seed in range(20):
        assert compounds(default_schedule(seed)), f"seed {seed}: a minute with no overlap"


def test_over_many_runs_every_overlap_shape_and_both_restarted_roles_are_drawn() -> None:
    pairs = restarts(default_schedule(4, duration_ns=3000 * TTL))
    shapes = {kill.params["restart_at"] for _, kill in pairs}
    assert shapes == {"resume", "inside", "takeover"}
    inside = [kill for _, kill in pairs if kill.params["restart_at"] == "inside"]
    assert {NODES[kill.targets[0]] for kill in inside} == {"store", "lock"}
    assert {kill.params["process"] for kill in inside} == {"store", "lock-server"}
    # The shape that finds a lazily saved mark restarts the store.
    takeover = [kill for _, kill in pairs if kill.params["restart_at"] == "takeover"]
    assert {kill.targets for kill in takeover} == {("s1",)}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_an_inside_restart_lands_inside_the_pause(seed: int) -> None:
    for pause, kill in restarts(default_schedule(seed)):
        assert pause.targets == (HOLDER,) and pause.params["process"] == "agent"
        assert pause.ttl_multiple > 1, "the holder must be paused past its lease"
        assert kill.duration_ns < pause.duration_ns / 10, "killed and started again at once"
        if kill.params["restart_at"] == "inside":
            offset = kill.start_ns - pause.start_ns
            assert 0.1 * pause.duration_ns <= offset <= 0.9 * pause.duration_ns
            assert kill.params[ANCHOR] == "inside" and RESUMES_BASE not in kill.params
        else:
            assert kill.params[RESUMES_BASE] is True


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_a_takeover_restart_is_due_after_the_new_holders_first_few_writes(seed: int) -> None:
    for pause, kill in restarts(default_schedule(seed)):
        writes = kill.params.get(START_AFTER_WRITES)
        if kill.params["restart_at"] == "takeover":
            assert kill.params[ANCHOR] == "takeover"
            assert isinstance(writes, int) and 1 <= writes <= 3
            assert kill.start_ns == pause.end_ns, "at the pause's end at the latest"
        else:
            assert writes is None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_every_default_run_has_a_takeover_restart(seed: int) -> None:
    """Even 30 s: the shape that finds a lazily saved mark is never left to luck."""
    pairs = restarts(default_schedule(seed, duration_ns=30 * TTL))
    assert pairs and pairs[0][1].params["restart_at"] == "takeover"


def test_a_recorded_compound_window_is_played_as_the_same_pair_keeping_the_indices() -> None:
    """A history from before the pair existed: one restart-while-paused window, then others."""
    old = compound(3000, restart_at="takeover", end_after_writes=2)
    later = Window(1, 9000 * MS, 500 * MS, "pause", (HOLDER,), 0.5, "w2", {"process": "agent"})
    schedule = playable(Schedule(1, TTL, 20 * TTL, (old, later)))
    pause, kill, after = schedule.windows
    assert [w.index for w in schedule.windows] == [0, 2, 1]
    assert (pause.kind, kill.kind, after) == ("pause", "kill", later)
    assert pause.params == {"process": "agent", COMPOUND: RESTART_WHILE_PAUSED}
    assert kill.targets == ("s1",) and kill.params["process"] == "store"
    assert kill.params[START_AFTER_WRITES] == 2 and kill.params[OVERLAPS] == 0
    assert playable(schedule) == schedule, "a played schedule is played as it is"


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
    windows = [w for w in default_schedule(2, 3000 * TTL).windows if OVERLAPS not in w.params]
    assert {w.ttl_multiple for w in windows} >= set(DEFAULT_TTL_MULTIPLES)
    assert {w.ttl_multiple for w in compounds(default_schedule(2, 3000 * TTL))} == {
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
    bases = [w for w in schedule.windows if OVERLAPS not in w.params]
    assert {w.ttl_multiple for w in bases} == {0.5, 1.1}
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
    """A restart-while-paused window as it was drawn (and as old histories recorded it)."""
    base = {"restart": "s1", "process": "agent", "restart_process": "store"}
    return Window(
        0, 1 * MS, duration_ms * MS, RESTART_WHILE_PAUSED, (HOLDER,), 3.0, "w3", base | params
    )


def play(
    window: Window, nemesis: NoopNemesis, resolve_holder: Any, writes: Any = None
) -> Recording:
    """Play ``window`` as a run does: composed into its pair first."""
    record = Recording()
    windows = playable(Schedule(1, TTL, 120 * TTL, (window,))).windows
    with NemesisPlayer(
        fake_cluster(), nemesis, windows, clock(), record, resolve_holder, holder_work=writes
    ) as player:
        player.join(30)
    return record


def test_the_player_restarts_at_the_drawn_moment_inside_the_pause() -> None:
    nemesis = NoopNemesis()
    record = play(compound(80, restart_at="inside", step_at_ns=30 * MS), nemesis, lambda: "w1")
    assert [f for f, _ in nemesis.calls] == ["start-pause", "start-kill", "stop-kill", "stop-pause"]
    starts = {f: value for f, value in record.events if f.startswith("start-")}
    stops = {f: value for f, value in record.events if f.startswith("stop-")}
    assert starts["start-kill"]["scheduled"] == 31 * MS
    assert starts["start-pause"]["confirmed"] <= starts["start-kill"]["confirmed"]
    assert stops["stop-kill"]["confirmed"] <= stops["stop-pause"]["confirmed"]
    assert stops["stop-pause"]["scheduled"] == 81 * MS, "an inside restart keeps the pause's end"
    assert all(value["applied"] is True for value in stops.values())
    assert {value[COMPOUND] for _, value in record.events} == {RESTART_WHILE_PAUSED}


class Writes:
    """A holder board's view of writes: who is inside a write, and accepted counts."""

    def __init__(self) -> None:
        self.working: set[str] = set()
        self.accepted: dict[str, int] = {}

    def in_critical_section(self, node: str) -> bool:
        return node in self.working

    def accepted_since_grant(self, node: str) -> int:
        return self.accepted.get(node, 0)


def test_a_takeover_restart_lands_once_the_new_holder_had_its_writes_accepted() -> None:
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

    window = compound(60_000, restart_at="takeover", end_after_writes=2)
    record = Recording()
    windows = playable(Schedule(1, TTL, 120 * TTL, (window,))).windows
    with NemesisPlayer(
        fake_cluster(), nemesis, windows, now, record, holder, holder_work=writes
    ) as player:
        player.join(30)
    events = dict(record.events)
    assert events["start-pause"]["targets"] == ["w1"]
    assert events["start-kill"]["targets"] == ["s1"]
    assert moments["second write"] <= events["start-kill"]["scheduled"] < window.end_ns
    # The paused holder runs again once the restart is done, not at the pause's end.
    assert events["stop-pause"]["resumed_on_restart"] == 1
    assert events["stop-kill"]["confirmed"] <= events["stop-pause"]["scheduled"] < window.end_ns
    assert [f for f, _ in nemesis.calls][-1] == "stop-pause"


def test_a_resume_restart_lands_at_the_pauses_end_and_the_holder_waits_for_it() -> None:
    nemesis = NoopNemesis()
    record = play(compound(40, restart_at="resume"), nemesis, lambda: "w1")
    events = dict(record.events)
    assert events["start-kill"]["scheduled"] == 41 * MS
    assert events["stop-pause"]["resumed_on_restart"] == 1
    assert events["stop-pause"]["confirmed"] >= events["stop-kill"]["confirmed"]


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


def test_a_takeover_that_never_comes_restarts_at_the_pauses_end() -> None:
    nemesis = NoopNemesis()
    window = compound(40, restart_at="takeover", end_after_writes=1)
    record = play(window, nemesis, lambda: "w1")
    events = dict(record.events)
    assert events["start-kill"]["scheduled"] >= window.end_ns
    assert events["stop-pause"]["resumed_on_restart"] == 1
