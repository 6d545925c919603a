"""The holder board's view of writes, which holder-aimed faults are timed by."""

from __future__ import annotations

from harness.run.holder_ops import REACHED_AGENT_S, HolderBoard


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_write_is_a_critical_section_from_its_lease_check_to_half_its_work() -> None:
    clock = Clock()
    board = HolderBoard(clock)
    board.began_write("w1", work_s=0.2)
    assert not board.in_critical_section("w1"), "just sent: the agent may not have checked yet"
    clock.now += 2 * REACHED_AGENT_S
    assert board.in_critical_section("w1")
    assert not board.in_critical_section("w2")
    clock.now = 100.09
    assert board.in_critical_section("w1")
    clock.now = 100.11
    assert not board.in_critical_section("w1"), "too little work left for a fault to land in"
    clock.now = 100.05
    board.ended_write("w1", accepted=True)
    assert not board.in_critical_section("w1")


def test_a_write_with_no_work_has_no_critical_section_to_aim_at() -> None:
    clock = Clock()
    board = HolderBoard(clock)
    board.began_write("w1", work_s=0.0)
    for _ in range(3):
        clock.now += REACHED_AGENT_S
        assert not board.in_critical_section("w1")


def test_accepted_writes_are_counted_from_the_holders_last_grant() -> None:
    board = HolderBoard()
    board.granted("L0", "w1")
    for accepted in (True, False, True):
        board.began_write("w1", work_s=0.05)
        board.ended_write("w1", accepted=accepted)
    assert board.accepted_since_grant("w1") == 2
    assert board.accepted_since_grant("w2") == 0
    board.granted("L0", "w1")
    assert board.accepted_since_grant("w1") == 0


def test_the_waiter_is_the_latest_worker_with_an_acquire_open_that_holds_nothing() -> None:
    board = HolderBoard()
    assert board.waiter() is None
    board.began_acquire("w1")
    board.began_acquire("w2")
    assert board.waiter() == "w2", "the one that began waiting last waits longest in a queue"
    board.granted("L0", "w2")
    board.ended_acquire("w2")
    assert board.waiter() == "w1"
    board.began_acquire("w2")  # a holder asking again still holds its lock: not a waiter
    assert board.waiter() == "w1"
    board.ended_acquire("w1")
    assert board.waiter() is None


def test_the_board_sees_a_write_inside_the_clients_call_and_times_calls() -> None:
    now = [0.0]
    board = HolderBoard(clock=lambda: now[0])
    assert board.typical_call_s() is None
    board.began_write("w1", 0.05)
    assert board.in_flight("w1") and not board.in_flight("w2")
    now[0] = 0.03
    assert board.in_write_call("w1") is None, "still in the agent's work"
    now[0] = 0.08
    into = board.in_write_call("w1")
    assert into is not None and abs(into - (0.08 - 0.05 - REACHED_AGENT_S)) < 1e-9
    now[0] = 0.09
    board.ended_write("w1", accepted=True)
    assert not board.in_flight("w1") and board.in_write_call("w1") is None
    typical = board.typical_call_s()
    assert typical is not None and abs(typical - 0.04) < 1e-9
