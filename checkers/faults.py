"""Fault windows from nemesis events, and which of them could have caused an anomaly.

``start-X`` opens a window of kind ``X``; ``stop-X`` closes the open windows of that kind whose
targets it names (all of them when it names none); a window never stopped lasts to the end of the
history. Any other nemesis event is an instant. Nemesis events are few, so all are kept.

A compound that stops a holder and restarts a daemon (its recorded facts: ``parts``,
``stops_holder``, ``restarts``; ``restart-while-paused`` is one) is recorded as one window
(``targets`` stopped; the stop's ``restarted`` node is killed and started again at
``step_scheduled`` inside the window, else at the stop's ``scheduled``, and the targets continue
at the stop) and is read into those two parts, so that a sentence can say each. Events are read
through :class:`harness.record.NemesisEvent`, the nemesis event's one reader.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable
from dataclasses import replace

from checkers.explain import RESTARTED
from harness.record import Event, NemesisEvent
from harness.record.verdict import FaultWindow

__all__ = ["FaultIndex", "FaultTimeline"]


class FaultTimeline:
    """Collects nemesis events into :class:`FaultWindow` s and notes faults that failed."""

    def __init__(self) -> None:
        self._open: list[FaultWindow] = []
        self._closed: list[FaultWindow] = []
        self.failures: list[str] = []
        self.events = 0

    def add(self, event: Event) -> NemesisEvent:
        """Take one nemesis event (in history order); its typed form, for a reader that also
        wants the event's own fields (the report's timing), so it is read once."""
        self.events += 1
        fault = NemesisEvent.of(event)
        error = fault.error
        if not fault.applied:
            because = f": {error}" if error else ""
            self.failures.append(
                f"nemesis {event.f} at line {event.line} (index {event.index}) failed to "
                f"apply{because}"
            )
        if fault.action == "start":
            self._open.append(
                FaultWindow(
                    fault.kind,
                    fault.targets,
                    event.time,
                    None,
                    event.index,
                    None,
                    fault.applied,
                    error,
                    verb=fault.verb,
                    part_verbs=fault.part_verbs,
                    opened=fault.said,
                )
            )
        elif fault.action == "stop":
            self._close(fault, event)
        else:
            self._closed.append(
                FaultWindow(
                    event.f,
                    fault.targets,
                    event.time,
                    event.time,
                    event.index,
                    event.index,
                    fault.applied,
                    error,
                )
            )
        return fault

    def _close(self, stop: NemesisEvent, event: Event) -> None:
        still_open = []
        targets = stop.targets
        for window in self._open:
            if window.kind == stop.kind and (not targets or set(targets) & set(window.targets)):
                closed = replace(window, end=event.time, end_index=event.index, closed=stop.said)
                self._closed.append(_with_parts(closed, stop))
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


def _with_parts(window: FaultWindow, stop: NemesisEvent) -> FaultWindow:
    """A compound that stops a holder and restarts another node (its facts say so: its first
    part stops, its stop names the node it restarted) read into those two parts."""
    facts = stop.facts
    if not (facts.parts and facts.stops_holder and facts.restarts) or window.end is None:
        return window
    restarted = stop.restarted
    if not restarted:
        return window
    killed = stop.step_scheduled if stop.step_scheduled is not None else stop.scheduled
    if not (killed is not None and window.start <= killed <= window.end):
        killed = window.end
    serving = stop.step_confirmed  # an inside restart serves before the pause ends
    if not (serving is not None and killed <= serving <= window.end):
        serving = window.end
    verbs = (*window.part_verbs, None)
    stopped = replace(window, kind=facts.parts[0], verb=verbs[0], part_verbs=())
    restart = replace(
        window, kind=RESTARTED, targets=restarted, start=killed, end=serving, part_verbs=()
    )
    return replace(window, parts=(stopped, restart))
