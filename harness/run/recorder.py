"""The run's single point of truth for time and history: every event goes through here.

Time is taken and the index assigned under one lock, so index order is time order even with many
worker threads and the nemesis thread recording at once. Live counters feed the progress display.

When the history cannot be written (a full disk), the recorder keeps the first error, records
nothing more (a line after a failed one could land mid-file) and sets :attr:`Recorder.stopped`,
which ends the workload; the threads that record carry on quietly until they see it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.record import NEMESIS, Event, EventType, HistoryWriter, NemesisEvent, Process

__all__ = ["Recorder", "RunCounters"]


@dataclass
class RunCounters:
    """What the progress display shows: completions by outcome and the faults in force."""

    completions: Counter[str] = field(default_factory=Counter)
    writes: Counter[str] = field(default_factory=Counter)
    faults_in_force: dict[str, list[str]] = field(default_factory=dict)
    """The kinds in force and the nodes each hit (a partition's groups flattened)."""
    faults_applied: int = 0
    faults_failed: int = 0


class Recorder:
    """Appends events to the history with the run's monotonic clock (ns since the run began)."""

    def __init__(self, writer: HistoryWriter) -> None:
        self._writer = writer
        self._lock = threading.Lock()
        self._t0 = time.monotonic_ns()
        self.counters = RunCounters()
        self.stopped = threading.Event()
        """Set when the run must end: the history can no longer be written."""
        self.failure: OSError | None = None
        """The error that stopped the history, if one did."""
        self._closed = False

    def close(self) -> None:
        """Close the history: a holder left behind (a second signal cut the wait for it short)
        that completes an operation later records nothing, rather than writing into a closed
        file from its thread."""
        with self._lock:
            self._closed = True
            self._writer.close()

    def begin(self) -> None:
        """Start the run clock now: the fault schedule counts from the workload's start, not
        from the minutes a cluster may take to come up."""
        self._t0 = time.monotonic_ns()

    def now(self) -> int:
        """Nanoseconds since the run began."""
        return time.monotonic_ns() - self._t0

    def seconds(self) -> float:
        """Seconds since the run began."""
        return self.now() / 1e9

    def record(
        self,
        process: Process,
        type: EventType,
        f: str,
        value: dict[str, Any],
        *,
        node: str | None = None,
        error: str | None = None,
    ) -> Event:
        """Append one event stamped with the current time (not written after a write failed, or
        once the history is closed)."""
        with self._lock:
            if self.failure is None and not self._closed:
                try:
                    event = self._writer.append(
                        time=self.now(),
                        process=process,
                        type=type,
                        f=f,
                        value=value,
                        node=node,
                        error=error,
                    )
                except OSError as problem:
                    self.failure = problem
                    self.stopped.set()
                else:
                    self._count(event)
                    return event
        return Event(-1, self.now(), process, type, f, value, node, error)

    def record_nemesis(self, f: str, value: dict[str, Any]) -> None:
        """Record a fault event (``process: "nemesis"``, ``type: "info"``)."""
        self.record(NEMESIS, "info", f, value)

    def _count(self, event: Event) -> None:
        counters = self.counters
        if event.process == NEMESIS:
            fault = NemesisEvent.of(event)
            if fault.action == "start":
                counters.faults_in_force[fault.kind] = list(fault.targets)
                if fault.applied:
                    counters.faults_applied += 1
                else:
                    counters.faults_failed += 1
            elif fault.action == "stop":
                counters.faults_in_force.pop(fault.kind, None)
            return
        if event.type == "invoke":
            return
        counters.completions[event.type] += 1
        if event.f == "write":
            outcome = "refused" if event.error == "stale-epoch" else event.type
            counters.writes[outcome] += 1
