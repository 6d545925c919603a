"""The recorder under many threads: every event written once, in index order, before record
returns; a failed or short write stops the history and nothing is written after it."""

from __future__ import annotations

import errno
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.record import Event, HistoryWriter, read_history, validated
from harness.run.recorder import Recorder


def _record_from_threads(recorder: Recorder, threads: int, ops: int) -> list[list[int]]:
    """Each thread records ``ops`` operations (invoke, then ok) on its own process; returns the
    indexes each thread got back, after checking each one is already in the file."""
    got: list[list[int]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def holder(process: int) -> None:
        start.wait()
        for op in range(ops):
            value = {"key": f"k{process}", "id": f"{process}-{op}"}
            for kind in ("invoke", "ok"):
                event = recorder.record(process, kind, "write", value, node=f"w{process}")
                got[process].append(event.index)

    workers = [threading.Thread(target=holder, args=(p,)) for p in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return got


def test_many_threads_record_every_event_once_in_index_and_time_order(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    threads, ops = 16, 300
    with HistoryWriter(history) as writer:
        recorder = Recorder(writer)
        got = _record_from_threads(recorder, threads, ops)
        # Written before record() returned: the file holds every event before it is closed.
        written = list(read_history(history))
    assert len(written) == 2 * threads * ops
    assert [e.index for e in written] == list(range(2 * threads * ops))
    assert list(validated(written)) == written  # times never go back; invokes then completions
    for process, indexes in enumerate(got):
        mine = [e.index for e in written if e.process == process]
        assert indexes == mine
    assert recorder.counters.completions["ok"] == threads * ops
    assert recorder.counters.writes["ok"] == threads * ops


class _FullDisk(HistoryWriter):
    """A history whose disk fills after ``room`` events."""

    def __init__(self, path: Path, room: int) -> None:
        super().__init__(path)
        self.room = room

    def append(self, **event: Any) -> Event:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        self.room -= 1
        return super().append(**event)


def test_a_failed_write_stops_the_history_and_nothing_follows_it(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    with _FullDisk(history, room=3) as writer:
        recorder = Recorder(writer)
        kept = [recorder.record(1, "invoke", "read", {"key": f"k{n}"}) for n in range(3)]
        lost = recorder.record(1, "ok", "read", {"key": "k2"})
        after = recorder.record(2, "invoke", "read", {"key": "k3"})
    assert [e.index for e in kept] == [0, 1, 2]
    assert lost.index == after.index == -1  # not in the history
    assert recorder.stopped.is_set()
    assert isinstance(recorder.failure, OSError) and recorder.failure.errno == errno.ENOSPC
    assert [e.index for e in read_history(history)] == [0, 1, 2]
    assert recorder.counters.completions["ok"] == 0


def test_a_short_write_is_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with HistoryWriter(tmp_path / "history.jsonl") as writer:
        monkeypatch.setattr(writer._file, "write", lambda data: len(data) - 1)
        with pytest.raises(OSError) as raised:
            writer.append(time=1, process=0, type="invoke", f="read", value={})
    assert raised.value.errno == errno.ENOSPC
