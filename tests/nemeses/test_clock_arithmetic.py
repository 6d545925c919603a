"""The clock faults' arithmetic: a rate window starts and ends without a jump, a step jumps by
exactly its size, and the control file's text is what libfaketime reads as meant."""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.nodeside import clock, wire
from harness.nodeside.clock import ClockState, control_text
from nemeses.clock import NemesisError, confirmed


def test_a_rate_window_starts_and_ends_without_a_jump() -> None:
    real = ClockState()
    start, end = 100.0, 104.0
    fast = real.at_rate(2.0, start)
    assert fast.fake_at(start) == pytest.approx(real.fake_at(start))
    back = fast.at_rate(1.0, end)
    assert back.fake_at(end) == pytest.approx(fast.fake_at(end))
    # Inside the window the clock ran 2x: 4 real seconds gained 4 fake ones.
    assert back.offset_at(end + 10.0) == pytest.approx(4.0)


def test_a_slow_window_leaves_the_clock_behind_by_what_it_lost() -> None:
    slow = ClockState().at_rate(0.25, 10.0).at_rate(1.0, 18.0)
    assert slow.offset_at(30.0) == pytest.approx(-6.0)


def test_a_step_jumps_by_its_size_and_a_step_back_undoes_it() -> None:
    ahead = ClockState().stepped(3.0, 50.0)
    assert ahead.fake_at(50.0) - ClockState().fake_at(50.0) == pytest.approx(3.0)
    assert ahead.offset_at(70.0) == pytest.approx(3.0)
    assert ahead.stepped(-3.0, 60.0).offset_at(61.0) == pytest.approx(0.0)


def test_a_step_inside_a_rate_window_keeps_the_rate() -> None:
    state = ClockState().at_rate(2.0, 0.0).stepped(-1.5, 1.0)
    assert state.rate == 2.0
    assert state.fake_at(1.0) == pytest.approx(0.5)
    assert state.fake_at(2.0) == pytest.approx(2.5)


def test_control_text_uses_offsets_at_rate_one_and_anchors_otherwise() -> None:
    assert control_text(ClockState().stepped(3.0, 5.0), 99.0) == "+3.000000 x1"
    # libfaketime reads "+-1.5" as 0: the sign must stand alone.
    assert control_text(ClockState().stepped(-1.5, 5.0), 99.0) == "-1.500000 x1"
    rate = ClockState().stepped(2.0, 0.0).at_rate(0.5, 1000.0)
    assert control_text(rate, 1010.0) == "@1007.000000 x0.5"


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="above 0"):
        ClockState(rate=0.0)


def test_preload_settings_are_read_back_from_the_command_line() -> None:
    argv = clock.preloaded("lock-server", ["python3", "server.py"], "wire:10.0.0.2:7001")
    assert argv[-2:] == ["python3", "server.py"]
    found = clock.preload_of(argv)
    assert found == clock.Preload(f"{clock.CONTROL_DIR}/lock-server", "wire:10.0.0.2:7001")
    assert clock.preload_of(["python3", "server.py"]) is None
    assert clock.preload_of(["env", "A=1", "python3"]) is None
    assert clock.preload_in(argv[1:6]) == found  # as /proc/PID/environ lists them
    wall = clock.preloaded("lock-server", ["python3", "server.py"], "wire:x:1", wall_only=True)
    assert "FAKETIME_DONT_FAKE_MONOTONIC=1" in wall
    assert clock.preload_of(wall) == clock.Preload(found.control, "wire:x:1", wall_only=True)


@pytest.fixture
def server() -> Iterator[str]:
    line_server = wire.LineServer(("127.0.0.1", 0), lambda request: {"ok": True})
    thread = threading.Thread(target=line_server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = line_server.server_address[:2]
        yield f"wire:{host}:{port}"
    finally:
        line_server.shutdown()
        line_server.server_close()
        thread.join()


def test_the_writer_changes_the_clock_from_where_it_is_and_reads_it_back(
    server: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "clock" / "agent")
    done = clock.apply(path, "step", 3.0, server)
    assert Path(path).read_text() == "+3.000000 x1" == done["text"]
    ((midpoint, seen, round_trip),) = done["readings"]
    # This server is not preloaded: its clock is the real one, read within the round trip.
    assert abs(seen - midpoint) <= round_trip
    rate = clock.apply(path, "rate", 2.0, server)
    assert ClockState.from_json(rate["before"]).offset_at(0.0) == pytest.approx(3.0)
    assert len(rate["readings"]) == 2  # a rate is confirmed by its slope
    assert rate["text"].startswith("@") and rate["text"].endswith(" x2")
    after = ClockState.from_json(clock.apply(path, "rate", 1.0, server)["after"])
    assert after.rate == 1.0 and after.offset_at(0.0) == pytest.approx(3.0, abs=0.5)
    assert clock.apply(path, "reset", 0.0, "")["text"] == "+0.000000 x1"


def test_changes_to_one_control_file_take_turns_and_none_is_lost(tmp_path: Path) -> None:
    # A step inside a rate on one process: the two writers run side by side on the node.
    path = str(tmp_path / "clock" / "agent")
    clock.apply(path, "step", 1.0, "")
    with open(f"{path}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        writers = [
            threading.Thread(target=clock.apply, args=(path, "step", by, "")) for by in (2.0, 4.0)
        ]
        for writer in writers:
            writer.start()
        writers[0].join(0.3)
        # Neither writer can change the clock while another holds the file.
        assert all(writer.is_alive() for writer in writers)
        assert Path(path).read_text() == "+1.000000 x1"
    for writer in writers:
        writer.join(10)
    assert Path(path).read_text() == "+7.000000 x1"


def test_every_wire_server_answers_clock_without_the_secret() -> None:
    line_server = wire.LineServer(("127.0.0.1", 0), lambda request: {"ok": True}, token="s")
    thread = threading.Thread(target=line_server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = line_server.server_address[:2]
        reply = wire.call((str(host), int(port)), {"op": wire.CLOCK}, 5.0)
    finally:
        line_server.shutdown()
        line_server.server_close()
        thread.join()
    assert reply["ok"] is True and reply["wall"] > 0 and reply["mono"] > 0


def test_a_rate_reading_may_lag_by_the_wait_for_the_first_read_but_never_run_ahead() -> None:
    after = ClockState(100.0, 100.0, 4.0)  # 4x from the write at real 100
    done = {"before": ClockState().to_json(), "after": after.to_json(), "written_at": 100.0}
    done["text"] = control_text(after, 100.0)
    # Read 0.2 s after the write: the process first read its clock then, held at 100 till then.
    done["readings"] = [[100.2, 100.0 + 0.005, 0.01]]
    assert confirmed("w1:agent", done)["scheduled"]["rate"] == 4.0
    done["readings"] = [[100.2, after.fake_at(100.2) + 0.2, 0.01]]  # ahead: not libfaketime's
    with pytest.raises(NemesisError, match="off the real one"):
        confirmed("w1:agent", done)
