"""The player: what it records, holder resolution, failures, and healing on interruption."""

from __future__ import annotations

from typing import Any

import pytest

from nemeses import standard_nemesis
from nemeses.noop import NoopNemesis
from nemeses.player import NemesisPlayer
from nemeses.protocol import NemesisError
from nemeses.schedule import HOLDER, HOLDER_MEMBER, LOCK_FOLLOWER, WAITER, Window
from tests.support.nemesis_fakes import FakeNode, Recording, clock, fake_cluster

MS = 1_000_000


def window(index: int, start_ms: int, kind: str = "pause", **extra: Any) -> Window:
    options: dict[str, Any] = {"targets": ("w1",), "fallback": None, "params": {}}
    options.update(extra)
    return Window(index, start_ms * MS, 5 * MS, kind, ttl_multiple=0.15, **options)


def test_each_window_is_recorded_started_then_stopped_with_both_times() -> None:
    nodes = fake_cluster()
    nemesis = NoopNemesis()
    record = Recording()
    windows = [window(0, 5, params={"process": "agent"}), window(1, 20, "freeze")]
    with NemesisPlayer(nodes, nemesis, windows, clock(), record) as player:
        player.join(10)
        assert not player.running
    assert [f for f, _ in record.events] == [
        "start-pause",
        "stop-pause",
        "start-freeze",
        "stop-freeze",
    ]
    start = record.events[0][1]
    assert start["targets"] == ["w1"] and start["process"] == "agent" and start["id"] == 0
    assert start["applied"] is True and start["scheduled"] == 5 * MS
    assert start["confirmed"] >= start["scheduled"]
    stop = record.events[1][1]
    assert stop["scheduled"] == 10 * MS and stop["confirmed"] >= stop["scheduled"]
    assert "interrupted" not in stop
    assert nemesis.set_up and nemesis.torn_down and nemesis.in_force == []


def test_a_fault_that_fails_is_recorded_as_not_applied_with_the_error() -> None:
    nemesis = NoopNemesis(failing=["start-throttle"])
    record = Recording()
    with NemesisPlayer(fake_cluster(), nemesis, [window(0, 1, "throttle")], clock(), record) as p:
        p.join(10)
    (f, start), (_, stop) = record.events
    assert f == "start-throttle"
    assert start["applied"] is False and "failing as asked" in start["error"]
    assert "confirmed" not in start
    assert stop["applied"] is True


@pytest.mark.parametrize(
    ("holder", "target", "source"), [("w2", "w2", "lease"), (None, "w3", "fallback")]
)
def test_the_holder_is_asked_when_the_window_starts(
    holder: str | None, target: str, source: str
) -> None:
    nemesis = NoopNemesis()
    record = Recording()
    asked: list[int] = []

    def resolve_holder() -> str | None:
        asked.append(1)
        return holder

    windows = [window(0, 1, targets=(HOLDER,), fallback="w3")]
    with NemesisPlayer(fake_cluster(), nemesis, windows, clock(), record, resolve_holder) as p:
        p.join(10)
    start = record.events[0][1]
    assert start["targets"] == [target] and start["holder"] == source
    assert nemesis.calls[0][1].targets == (target,)
    if holder is not None:
        assert asked == [1]
    else:
        # Nobody holds the lease: the player keeps asking for up to one TTL before falling back.
        assert len(asked) > 1


@pytest.mark.parametrize(
    ("leader", "fallback", "target", "source"),
    [("l2", "l1", "l1", "elected"), ("l1", "l1", "l2", "elected"), (None, "l1", "l1", "fallback")],
)
def test_a_follower_window_aims_at_a_member_that_does_not_lead(
    leader: str | None, fallback: str, target: str, source: str
) -> None:
    nodes = fake_cluster()
    nodes["l2"] = FakeNode("l2", "lock", "10.9.0.99")
    nemesis = NoopNemesis()
    record = Recording()
    windows = [window(0, 1, targets=(LOCK_FOLLOWER,), fallback=fallback)]
    player = NemesisPlayer(nodes, nemesis, windows, clock(), record, resolve_leader=lambda: leader)
    with player as p:
        p.join(10)
    start = record.events[0][1]
    assert start["targets"] == [target] and start["leader"] == source
    assert nemesis.calls[0][1].targets == (target,)


def test_a_window_opening_during_a_handover_waits_for_the_next_holder() -> None:
    nemesis = NoopNemesis()
    record = Recording()
    answers = iter([None, None, "w2"])

    def resolve_holder() -> str | None:
        return next(answers, "w2")

    windows = [window(0, 1, targets=(HOLDER,), fallback="w3")]
    with NemesisPlayer(fake_cluster(), nemesis, windows, clock(), record, resolve_holder) as p:
        p.join(10)
    start = record.events[0][1]
    assert start["targets"] == ["w2"] and start["holder"] == "lease"


def test_a_holder_that_is_no_node_makes_the_fault_not_applied() -> None:
    record = Recording()
    windows = [window(0, 1, targets=(HOLDER,), fallback="w3")]
    player = NemesisPlayer(fake_cluster(), NoopNemesis(), windows, clock(), record, lambda: "x9")
    with player:
        player.join(10)
    assert record.events[0][1]["applied"] is False
    assert "'x9' is not a node" in record.events[0][1]["error"]


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_player_leaves_no_fault_behind(interruption: type[BaseException]) -> None:
    nodes = fake_cluster()
    record = Recording()
    long_windows = [
        Window(0, 1 * MS, 60_000 * MS, "pause", ("w1",), 8.0, None, {"process": "agent"}),
        Window(1, 70_000 * MS, 1 * MS, "freeze", ("w2",), 0.15),
    ]
    agent = nodes["w1"].daemon("agent")
    player = NemesisPlayer(nodes, standard_nemesis(), long_windows, clock(), record)
    with pytest.raises(interruption), player:
        record.wait_for("start-pause")
        assert nodes["w1"].process_state(agent) == "T"
        raise interruption()
    assert nodes["w1"].process_state(agent) == "S"
    assert [f for f, _ in record.events] == ["start-pause", "stop-pause"]
    assert record.events[1][1]["interrupted"] is True
    assert not nodes["w2"].frozen


def test_heal_is_idempotent_and_records_the_stop_of_a_window_left_open() -> None:
    nemesis = NoopNemesis()
    record = Recording()
    windows = [Window(0, 1 * MS, 60_000 * MS, "kill", ("s1",), 8.0)]
    player = NemesisPlayer(fake_cluster(), nemesis, windows, clock(), record)
    player.start()
    record.wait_for("start-kill")
    first = player.heal()
    second = player.heal()
    assert first.ok and second.ok
    assert [f for f, _ in record.events] == ["start-kill", "stop-kill"]
    assert nemesis.in_force == []
    with pytest.raises(NemesisError, match="already been started"):
        player.start()


def test_a_schedule_the_nemesis_cannot_play_is_refused_before_it_starts() -> None:
    nemesis = NoopNemesis(["pause"])
    player = NemesisPlayer(fake_cluster(), nemesis, [window(0, 1, "kill")], clock(), Recording())
    with pytest.raises(NemesisError, match="has kill faults"):
        player.start()
    assert not nemesis.set_up


def test_a_crashed_player_thread_is_reported_by_join() -> None:
    def broken(f: str, value: dict[str, Any]) -> None:
        raise OSError("history closed")

    nemesis = NoopNemesis()
    player = NemesisPlayer(fake_cluster(), nemesis, [window(0, 1)], clock(), broken)
    player.start()
    with pytest.raises(NemesisError, match="crashed: history closed"):
        player.join(10)
    report = player.heal()
    assert nemesis.in_force == [], "the fault is undone even though nothing can be recorded"
    assert report.errors == ["could not record stop-pause: history closed"]


def members_cluster() -> dict[str, FakeNode]:
    """Three lock members ``e1..e3`` and two workers."""
    roles = [("e1", "lock"), ("e2", "lock"), ("e3", "lock"), ("w1", "worker"), ("w2", "worker")]
    return {name: FakeNode(name, role, f"10.9.1.{i + 2}") for i, (name, role) in enumerate(roles)}


def first_start(windows: list[Window], **resolvers: Any) -> dict[str, Any]:
    record = Recording()
    with NemesisPlayer(members_cluster(), NoopNemesis(), windows, clock(), record, **resolvers):
        return record.wait_for("start-pause")


@pytest.mark.parametrize(
    ("leader", "follower", "how"),
    [
        ("e1", "e2", "elected"),
        ("e2", "e3", "elected"),
        ("e3", "e2", "elected"),
        (None, "e2", "fallback"),
    ],
)
def test_a_follower_window_hits_a_member_that_does_not_lead(
    leader: str | None, follower: str, how: str
) -> None:
    aimed = window(0, 1, targets=(LOCK_FOLLOWER,), fallback="e2")
    start = first_start([aimed], resolve_leader=lambda: leader)
    assert start["targets"] == [follower] and start["leader"] == how


def test_a_holder_member_window_hits_the_member_the_holders_client_talks_to() -> None:
    aimed = window(0, 1, targets=(HOLDER_MEMBER,), fallback="e1")
    members = {"w1": "e1", "w2": "e3"}
    start = first_start([aimed], resolve_holder=lambda: "w2", resolve_member=members.get)
    assert start["targets"] == ["e3"] and start["member"] == "client" and start["holder"] == "lease"
    unknown = first_start([aimed], resolve_holder=lambda: "w2")
    assert unknown["targets"] == ["e1"] and unknown["member"] == "fallback"


def test_a_waiter_window_hits_a_worker_waiting_for_the_lock_else_the_drawn_worker() -> None:
    aimed = window(0, 1, targets=(WAITER,), fallback="w1")
    start = first_start([aimed], resolve_holder=lambda: "w1", resolve_waiter=lambda: "w2")
    assert start["targets"] == ["w2"] and start["waiter"] == "waiting"
    assert "holder" not in start, "a waiter window does not wait for the holder"
    nobody = first_start([aimed], resolve_waiter=lambda: None)
    assert nobody["targets"] == ["w1"] and nobody["waiter"] == "fallback"
