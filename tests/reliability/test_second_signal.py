"""A second stop signal (Ctrl-C twice) cuts the wait for operations still in flight short, and
nothing else: the first signal stays the one recorded, and a holder left behind that finishes
later writes nothing into the closed history (issue 22)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from harness.node.interrupts import Interrupted, hurried, interrupts_once, shielded
from harness.record import HistoryWriter, read_history
from harness.run.recorder import Recorder
from harness.run.runner import _join


def test_a_second_signal_is_kept_after_the_first_and_hurries(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with interrupts_once() as seen:
        with pytest.raises(Interrupted):
            signal.raise_signal(signal.SIGTERM)
        assert not hurried(seen)
        with shielded():
            signal.raise_signal(signal.SIGINT)  # announced, never raised
        assert [stop.signal for stop in seen] == ["SIGTERM", "SIGINT"]
        assert hurried(seen)
    assert "SIGINT: no more waiting for operations in flight" in capsys.readouterr().err


def test_the_wait_for_hanging_holders_ends_at_once_when_hurried() -> None:
    release = threading.Event()
    hanging = threading.Thread(target=release.wait, daemon=True)
    hanging.start()
    try:
        began = time.monotonic()
        _join([hanging], 30.0, lambda: time.monotonic() - began > 0.3)
        assert time.monotonic() - began < 5
        assert hanging.is_alive()  # left behind, not waited for
        began = time.monotonic()
        _join([hanging], 0.3, lambda: False)  # without a second signal: the whole timeout
        assert time.monotonic() - began >= 0.3
    finally:
        release.set()
        hanging.join()


def test_a_holder_finishing_after_the_history_closed_writes_nothing(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    with HistoryWriter(history) as writer:
        recorder = Recorder(writer)
        recorder.record(0, "invoke", "acquire", {"lock": "L"}, node="w1")
        recorder.close()
        late = recorder.record(0, "ok", "acquire", {"lock": "L", "epoch": 1}, node="w1")
    assert late.index == -1
    assert [event.type for event in read_history(history)] == ["invoke"]
