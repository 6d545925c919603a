"""A process that moves its own clock (the holders' agents): it reads the control file as
libfaketime does, its timed waits last the real time asked for under a step and a rate, and an
``@`` anchor is taken at a real time read after the file (the arithmetic of a reading that ran
ahead of its schedule)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.nodeside import clock
from harness.nodeside.clock import ClockState, OwnClock, control_text, parse_control
from nemeses.clock import NemesisError, confirmed

_ROOT = Path(__file__).resolve().parents[2]


def test_the_control_file_reads_back_as_the_writer_meant() -> None:
    stepped = ClockState().stepped(-1.5, 50.0)
    back = parse_control(control_text(stepped, 80.0), 90.0, 10.0)
    assert back.offset_at(95.0) == pytest.approx(-1.5)
    rate = ClockState().stepped(2.0, 0.0).at_rate(0.5, 1000.0)
    # Read 0.01 s after the write: the clock reads the written value then, at 0.5x from there.
    anchored = parse_control(control_text(rate, 1000.0), 1000.01, 10.0)
    assert anchored.fake_at(1000.01) == pytest.approx(1002.0)
    assert anchored.fake_at(1002.01) == pytest.approx(1003.0)
    # "+D xR" counts the rate from the process's first clock read, as libfaketime does.
    assert parse_control("+3 x2", 110.0, 100.0).offset_at(110.0) == pytest.approx(13.0)
    for unreadable in ("", "\n", "+-3 x1", "@x x2", "nonsense"):
        assert parse_control(unreadable, 5.0, 1.0).offset_at(7.0) == 0.0


def test_an_anchor_taken_before_the_write_runs_ahead_of_the_schedule() -> None:
    """Why a changed file is anchored at a real time read after it: a process preempted after
    reading the real clock (99.95) and before reading the file the writer replaced at 100.0
    would start the written value 0.05 s early; at 2x its clock reads 0.1 s ahead of the
    schedule, more than a reading's uncertainty (2x its 20 ms round trip plus 20 ms), which the
    nemesis rightly calls a failed fault. Anchored at a time read after the file, it lags."""
    before = ClockState()
    after = before.at_rate(2.0, 100.0)
    text = control_text(after, 100.0)
    done = {
        "before": before.to_json(),
        "after": after.to_json(),
        "written_at": 100.0,
        "text": text,
    }
    midpoint, trip = 100.03, 0.02
    for read_at, fails in ((99.95, True), (100.001, False)):
        seen = parse_control(text, read_at, 0.0).fake_at(midpoint)
        done["readings"] = [[midpoint, seen, trip]]
        if fails:
            assert seen - after.fake_at(midpoint) == pytest.approx(0.1)
            with pytest.raises(NemesisError, match="off the real one"):
                confirmed("l1:redis", done)
        else:
            assert confirmed("l1:redis", done)["scheduled"]["rate"] == 2.0


def test_own_clock_follows_its_file_at_every_read(tmp_path: Path) -> None:
    control = tmp_path / "agent"
    own, wall = OwnClock(str(control)), OwnClock(str(control), wall_only=True)
    assert abs(own.time() - time.time()) < 0.05  # no file: the real clock
    control.write_text("+30.000000 x1")
    assert own.time() - time.time() == pytest.approx(30.0, abs=0.05)
    assert own.monotonic() - time.monotonic() == pytest.approx(30.0, abs=0.05)
    assert own.perf_counter() - time.perf_counter() == pytest.approx(30.0, abs=0.05)
    assert wall.monotonic() - time.monotonic() == pytest.approx(0.0, abs=0.05)
    control.write_text(f"@{time.time() + 30.0:.6f} x0.5")
    first, first_real = own.time(), time.time()
    time.sleep(0.2)
    ran = own.time() - first
    assert ran == pytest.approx((time.time() - first_real) * 0.5, abs=0.03)


def test_a_process_that_moves_its_own_clock_keeps_its_timed_waits(tmp_path: Path) -> None:
    """Under libfaketime these waits never return (measured: harness.nodeside.clock); a process
    that follows its control file itself waits the time asked for, by its own clock's rate
    (stepped: as asked; at 0.25x: 4x as long), and its lease logic reads the faulted clock."""
    control = tmp_path / "agent"
    program = """
import json, queue, sys, threading, time
from harness.nodeside import clock
own = clock.follow_control_file()
def timed(wait):
    start = own._monotonic_ns()
    wait()
    return (own._monotonic_ns() - start) / 1e9
lock = threading.Lock()
lock.acquire()
out = {"installed": own is not None}
for text in sys.argv[1:]:
    with open(own.path, "w") as control:
        control.write(text.replace("NOW", repr(time.time())))
    ahead = time.monotonic() - own._monotonic_ns() / 1e9
    waits = [
        timed(lambda: threading.Event().wait(0.2)),
        timed(lambda: lock.acquire(timeout=0.2)),
        timed(lambda: time.sleep(0.2)),
    ]
    out[text] = {"ahead": ahead, "waits": waits}
print(json.dumps(out))
"""
    argv = clock.preloaded("agent", [sys.executable, "-c", program], "", library=None)
    argv = [f"FAKETIME_TIMESTAMP_FILE={control}" if "TIMESTAMP" in w else w for w in argv]
    steps = ["+30.000000 x1", "-30.000000 x1", "@NOW x0.25"]
    env = {**os.environ, "PYTHONPATH": str(_ROOT)}
    env.pop("LD_PRELOAD", None)
    done = subprocess.run([*argv, *steps], capture_output=True, text=True, timeout=30, env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["installed"] is True
    assert out[steps[0]]["ahead"] == pytest.approx(30.0, abs=0.1)
    assert out[steps[1]]["ahead"] == pytest.approx(-30.0, abs=0.1)
    for text in steps[:2]:  # a step leaves a wait alone
        assert all(0.19 <= wait < 1.0 for wait in out[text]["waits"]), (text, out[text])
    # At 0.25x a wait by this clock lasts 4x as long, but for the bare lock's, kept real.
    event, lock, sleep = out[steps[2]]["waits"]
    assert 0.75 <= event < 2.0 and 0.75 <= sleep < 2.0 and 0.19 <= lock < 0.6, out[steps[2]]


def test_a_preloaded_process_leaves_its_clock_to_the_library() -> None:
    argv = clock.preloaded("agent", ["python3"], "wire:x:1")
    environ = dict(word.split("=", 1) for word in argv[1:-1])
    assert clock.follow_control_file(environ) is None  # libfaketime moves it already
    assert clock.follow_control_file({}) is None
    itself = clock.preloaded("a", ["p"], "ask", True, library=None)
    assert not any(word.startswith("LD_PRELOAD=") for word in itself)
    assert clock.preload_of(itself) == clock.Preload(clock.control_file("a"), "ask", True)
