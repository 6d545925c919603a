"""Fault windows from nemesis events, and which of them were in force around an anomaly.

``start-X`` opens a window of kind ``X``; ``stop-X`` closes the open windows of that kind whose
targets it names (all of them when it names none); a window never stopped lasts to the end of the
history. Any other nemesis event is an instant. Nemesis events are few, so all are kept.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from typing import Any

from checkers.evidence import FaultWindow
from harness.history import Event

__all__ = ["FaultIndex", "FaultTimeline"]

_TARGET_FIELDS = ("targets", "nodes", "target", "node")


class FaultTimeline:
    """Collects nemesis events into :class:`FaultWindow` s and notes faults that failed."""

    def __init__(self) -> None:
        self._open: list[FaultWindow] = []
        self._closed: list[FaultWindow] = []
        self.failures: list[str] = []
        self.events = 0

    def add(self, event: Event) -> None:
        """Take one nemesis event (in history order)."""
        self.events += 1
        value = event.value
        error = value.get("error")
        applied = value.get("applied") is not False and not error
        if not applied:
            because = f": {error}" if error else ""
            self.failures.append(
                f"nemesis {event.f} at line {event.line} (index {event.index}) failed to "
                f"apply{because}"
            )
        targets = _targets(value)
        verb, _, kind = event.f.partition("-")
        if verb == "start" and kind:
            self._open.append(
                FaultWindow(
                    kind,
                    targets,
                    event.time,
                    None,
                    event.index,
                    None,
                    applied,
                    str(error) if error else None,
                )
            )
        elif verb == "stop" and kind:
            self._close(kind, targets, event)
        else:
            self._closed.append(
                FaultWindow(
                    event.f,
                    targets,
                    event.time,
                    event.time,
                    event.index,
                    event.index,
                    applied,
                    str(error) if error else None,
                )
            )

    def _close(self, kind: str, targets: tuple[str, ...], event: Event) -> None:
        still_open = []
        for window in self._open:
            if window.kind == kind and (not targets or set(targets) & set(window.targets)):
                self._closed.append(
                    FaultWindow(
                        window.kind,
                        window.targets,
                        window.start,
                        event.time,
                        window.start_index,
                        event.index,
                        window.applied,
                        window.error,
                    )
                )
            else:
                still_open.append(window)
        self._open = still_open

    def windows(self) -> tuple[FaultWindow, ...]:
        """Every window so far, open ones with ``end=None``, in order of their start."""
        return tuple(sorted((*self._closed, *self._open), key=lambda w: w.start_index))


class FaultIndex:
    """Fault windows indexed by start, to find those around a moment in O(log n + k)."""

    def __init__(self, windows: Iterable[FaultWindow]) -> None:
        closed = sorted((w for w in windows if w.end is not None), key=lambda w: w.start)
        self._closed = closed
        self._starts = [window.start for window in closed]
        self._longest = max((w.end - w.start for w in closed if w.end is not None), default=0)
        self._open = [window for window in windows if window.end is None]

    def around(self, start: int, end: int, nodes: Iterable[str]) -> tuple[FaultWindow, ...]:
        """Windows in force at some moment of ``[start, end]``, those aimed at ``nodes`` first."""
        found = [window for window in self._open if window.start <= end]
        earliest = start - self._longest  # no closed window starting before this reaches start
        at = bisect_right(self._starts, end) - 1
        while at >= 0 and self._starts[at] >= earliest:
            window = self._closed[at]
            if window.overlaps(start, end):
                found.append(window)
            at -= 1
        involved = set(nodes)
        found.sort(key=lambda window: (not involved.intersection(window.targets), window.start))
        return tuple(found)


def _targets(value: Mapping[str, Any]) -> tuple[str, ...]:
    for name in _TARGET_FIELDS:
        raw = value.get(name)
        if raw is not None:
            return tuple(_flatten(raw))
    return ()


def _flatten(raw: object) -> Iterable[str]:
    # Partitions name groups ("halves": [["w1"], ["w2", "l1"]]); every node in them is a target.
    if isinstance(raw, str):
        yield raw
    elif isinstance(raw, list | tuple):
        for item in raw:
            yield from _flatten(item)
