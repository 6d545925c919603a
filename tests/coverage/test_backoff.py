"""A holder whose agent is gone waits, seeded and bounded, before it tries again (item 3)."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

from harness.record import HistoryWriter, read_history
from harness.run.agent_link import AgentLink
from harness.run.holder_ops import BACKOFF_CAP, HolderBoard, HolderOps, backoff_delay
from harness.run.recorder import Recorder


class CountingStop(threading.Event):
    """A real stop event that remembers how long each wait asked for and stops after a few."""

    def __init__(self, waits: int) -> None:
        super().__init__()
        self.asked: list[float] = []
        self._waits = waits

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout or 0.0)
        if len(self.asked) >= self._waits:
            self.set()
        return self.is_set()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_delays_grow_are_capped_at_a_fraction_of_the_ttl_and_are_seeded() -> None:
    delays = [backoff_delay(n, 2.0, random.Random(5)) for n in range(1, 40)]
    assert all(0 < d <= BACKOFF_CAP * 2.0 for d in delays)
    assert delays[0] < delays[5]
    assert delays == [backoff_delay(n, 2.0, random.Random(5)) for n in range(1, 40)]


def test_a_dead_agent_costs_one_operation_per_backoff(tmp_path: Path) -> None:
    stop = CountingStop(waits=6)
    with HistoryWriter(tmp_path / "history.jsonl") as writer:
        ops = HolderOps(
            node="w1",
            process=0,
            process_stride=1,
            link=AgentLink("127.0.0.1", _closed_port(), connect_timeout=0.5),
            recorder=Recorder(writer),
            seed=3,
            stop=stop,
            op_timeout=1.0,
            acquire_wait=1.0,
            work_ms=0,
            board=HolderBoard(),
            lease_ttl=1.0,
        )
        while not ops.stopping():
            assert ops.acquire("L0").error is not None
    events = list(read_history(tmp_path / "history.jsonl"))
    assert [e.error for e in events if e.type == "fail"] == ["unreachable"] * 6
    assert len(stop.asked) == 6
    assert all(0 < wait <= BACKOFF_CAP for wait in stop.asked)
    assert stop.asked[0] < stop.asked[-1]
