"""Fault windows from nemesis events, and which of them could have caused an anomaly.

``start-X`` opens a window of kind ``X``; ``stop-X`` closes the open windows of that kind whose
targets it names (all of them when it names none); a window never stopped lasts to the end of the
history. Any other nemesis event is an instant. Nemesis events are few, so all are kept.

``restart-while-paused`` is recorded as one window (``targets`` paused; the node named ``restart``
is killed and started again at ``step_scheduled`` inside the pause, else at the stop's
``scheduled``, and the targets continue at the stop) and is read into those two parts, so that a
sentence can say each.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from checkers.explain import RESTARTED
from harness.record import SAID, Event, HistoryError
from harness.record.verdict import FaultWindow

__all__ = ["FaultIndex", "FaultTimeline"]

_TARGET_FIELDS = ("targets", "nodes", "target", "node")
_TARGETS_FIX = (
    'targets are node names: "w1", ["w1", "w2"], or groups of a partition [["w1"], ["w2", "l1"]]'
)
_RESTART_WHILE_PAUSED = "restart-while-paused"


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
        targets = _targets(value, event.line)
        action, _, kind = event.f.partition("-")
        if action == "start" and kind:
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
                    verb=_words(value.get("verb"))[0] if _words(value.get("verb")) else None,
                    part_verbs=_words(value.get("part_verbs")),
                    opened=_said(value),
                )
            )
        elif action == "stop" and kind:
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
                closed = replace(
                    window, end=event.time, end_index=event.index, closed=_said(event.value)
                )
                if kind == _RESTART_WHILE_PAUSED:
                    closed = _with_parts(closed, event)
                self._closed.append(closed)
            else:
                still_open.append(window)
        self._open = still_open

    def windows(self) -> tuple[FaultWindow, ...]:
        """Every window so far, open ones with ``end=None``, in order of their start."""
        return tuple(sorted((*self._closed, *self._open), key=lambda w: w.start_index))


def _said(value: Mapping[str, Any]) -> str | None:
    """The sentence a fault event says about what happened (``said``), if it says one."""
    said = value.get(SAID)
    return said if isinstance(said, str) and said else None


class FaultIndex:
    """Fault windows indexed by start, to find those around a moment in O(log n + k)."""

    def __init__(self, windows: Iterable[FaultWindow]) -> None:
        closed = sorted((w for w in windows if w.end is not None), key=lambda w: w.start)
        self._closed = closed
        self._starts = [window.start for window in closed]
        self._longest = max((w.end - w.start for w in closed if w.end is not None), default=0)
        self._open = [window for window in windows if window.end is None]

    def around(
        self, start: int, end: int, nodes: Collection[str], holders: Collection[str]
    ) -> tuple[FaultWindow, ...]:
        """Windows that could have caused what happened in ``[start, end]``: in force at some
        moment of it (so begun before ``end``), and aimed at one of ``nodes`` or at the servers
        (no target among ``holders``, the nodes that ran client operations)."""
        found = [window for window in self._open if window.start <= end]
        earliest = start - self._longest  # no closed window starting before this reaches start
        at = bisect_right(self._starts, end) - 1
        while at >= 0 and self._starts[at] >= earliest:
            window = self._closed[at]
            if window.overlaps(start, end):
                found.append(window)
            at -= 1
        involved = set(nodes)
        relevant = [
            window
            for window in found
            if involved.intersection(window.targets) or not _aims_at(window, holders)
        ]
        relevant.sort(key=lambda window: (window.start, window.start_index))
        return tuple(relevant)


def _aims_at(window: FaultWindow, holders: Collection[str]) -> bool:
    return any(target in holders for target in window.targets)


def _with_parts(window: FaultWindow, stop: Event) -> FaultWindow:
    restarted = stop.value.get("restart")
    if not isinstance(restarted, str) or window.end is None:
        return window
    killed = stop.value.get("step_scheduled", stop.value.get("scheduled"))
    if not (type(killed) is int and window.start <= killed <= window.end):
        killed = window.end
    serving = stop.value.get("step_confirmed")  # an inside restart serves before the pause ends
    if not (type(serving) is int and killed <= serving <= window.end):
        serving = window.end
    verbs = (*window.part_verbs, None)
    pause = replace(window, kind="pause", verb=verbs[0], part_verbs=())
    restart = replace(
        window, kind=RESTARTED, targets=(restarted,), start=killed, end=serving, part_verbs=()
    )
    return replace(window, parts=(pause, restart))


def _words(raw: object) -> tuple[str, ...]:
    """A string or a list of strings from an event's value; anything else is no words."""
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return tuple(raw)
    return ()


def _targets(value: Mapping[str, Any], line: int) -> tuple[str, ...]:
    for name in _TARGET_FIELDS:
        raw = value.get(name)
        if raw is not None:
            return _flatten(raw, line)
    return ()


def _flatten(raw: object, line: int) -> tuple[str, ...]:
    # Partitions name groups ("halves": [["w1"], ["w2", "l1"]]); every node in them is a target.
    # Two levels at most: anything deeper is not a target list, and must not recurse.
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list):
        out: list[str] = []
        for item in raw:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, list) and all(isinstance(node, str) for node in item):
                out.extend(item)
            else:
                raise HistoryError(line, "a nemesis event's targets are malformed", _TARGETS_FIX)
        return tuple(out)
    raise HistoryError(line, "a nemesis event's targets are malformed", _TARGETS_FIX)
