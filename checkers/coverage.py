"""What a run exercised (docs/design.md §10): the danger it created, beside the verdict.

A ``valid`` verdict is only as strong as the situations the run produced. This module reads the
history once, in order, and counts them: holders stopped past their lease while holding it (per
fault kind), stale writes attempted per sink (sent with an epoch lower than one already granted for
the lock, or refused by a fence as stale, which proves the same, or accepted after a newer epoch
was granted while it was in flight), restarts per role, epochs granted, sinks and keys written,
power losses (and how many dropped unsynced data, by the lazy file system's own count on the
fault's event), holder nodes whose agent was unreachable for most of the run, which pairs of fault
kinds were in force together (how often and for how long), and clock windows (``clock-step``,
``clock-rate``): how many, and how many moved a lease across its expiry (a lease was held when the
window opened, by the faulted holder or from the faulted lock service, and the faulted clock moved
by at least a TTL against the real one in the window: a step of that size, or a rate whose gain or
loss over the window reached it). It is a pure function of the history, the inventory's sink names,
the lease TTL and (optionally) the node roles, linear in the history's length (times the few faults
in force at once), and keeps state per node, lock, sink and key only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from harness.record import NEMESIS, Event, Process
from harness.record.verdict import Coverage, SinkCoverage
from harness.record.vocabulary import ACQUIRE, RELEASE, STALE_EPOCH, UNREACHABLE, WRITE

__all__ = ["MOSTLY_UNREACHABLE", "Coverage", "CoverageTap", "SinkCoverage", "coverage_of"]

MOSTLY_UNREACHABLE: Final = 0.5
"""A holder node unreachable for more than this share of the run is named in the coverage."""

_START: Final = "start-"
_STOP: Final = "stop-"
# Faults after whose stop a restarted process serves again; the value's key names the node.
_RESTARTS: Final[Mapping[str, str | None]] = {
    "kill": None,
    "restart-while-paused": "restart",
    "power-loss": "restart",  # at the holder; at a store or lock node it names its targets
}
_POWER_LOSS: Final = "power-loss"
_DROPPED: Final = "lost"  # a power loss's totals of what it dropped (nemeses.disk)
_CLOCKS: Final = frozenset(("clock-step", "clock-rate"))
_WORKER: Final = "worker"
_STORE: Final = "store"  # a store keeps no lease: its clock moves none


@dataclass(slots=True)
class _Window:
    kind: str
    holding: bool  # a target held a lease when the fault began
    expiry: int | None  # by when that lease had certainly lapsed (unknown without a TTL)
    started: int = 0
    stopped: int | None = None
    shift_s: float = 0.0  # a clock window's step (signed seconds); 0 for a rate or no clock
    rate: float = 1.0  # a clock window's rate


class _Tally:
    """The single pass's state: per node, lock, sink and key, never per operation."""

    def __init__(self, ttl_ns: int | None, roles: Mapping[str, str]) -> None:
        self.ttl_ns = ttl_ns
        self.roles = roles
        self.leases: dict[str, set[str]] = {}  # node -> locks it holds
        self.granted: dict[str, int] = {}  # lock -> highest epoch granted so far
        self.epochs: set[tuple[str, int]] = set()
        self.windows: dict[Any, _Window] = {}
        self.restarts: dict[str, int] = {}
        self.power_losses: dict[str, int] = {}
        self.overlaps: dict[str, list[int]] = {}  # "kind+kind" -> [times, ns together]
        self.writes: dict[str, list[int]] = {}  # sink -> [writes, accepted, stale attempts]
        self.keys: dict[str, set[str]] = {}
        self.outage_since: dict[str, int] = {}
        self.outage_total: dict[str, int] = {}
        self.seen: set[str] = set()  # nodes with at least one completed operation
        self.stale_open: set[Process] = set()  # open writes already counted as stale attempts
        self.invoked: dict[Process, int] = {}  # when each open operation began
        self.first: int | None = None
        self.last = 0

    def event(self, event: Event) -> None:
        time = event.time
        if self.first is None:
            self.first = time
        if time > self.last:
            self.last = time
        if event.process == NEMESIS:
            self.nemesis(event)
        elif event.type == "invoke":
            self.invoke(event)
        else:
            self.complete(event)

    def nemesis(self, event: Event) -> None:
        value = event.value
        key = value.get("id")
        if isinstance(key, bool) or not isinstance(key, int | str):
            key = event.f.partition("-")[2]  # no usable window id: pair by kind
        lost = value.get(_DROPPED)
        if event.f.partition("-")[2] == _POWER_LOSS and isinstance(lost, dict):
            self.power_loss(lost)
        if event.f.startswith(_START):
            if value.get("applied") is False:
                return
            kind = event.f[len(_START) :]
            targets = _names(value.get("targets"))
            holding = any(self.leases.get(target) for target in targets)
            if kind in _CLOCKS:
                holding = self._clock_holds(targets)
            # The agent renews while it runs, so a lease held at the stop's start lapses at the
            # latest one TTL later: a stop that lasts longer certainly outlived it.
            expiry = event.time + self.ttl_ns if self.ttl_ns is not None else None
            window = _Window(kind, holding, expiry, event.time)
            window.shift_s = _number(value.get("by_s"), 0.0) if kind == "clock-step" else 0.0
            window.rate = _number(value.get("rate"), 1.0) if kind == "clock-rate" else 1.0
            self.windows[key] = window
        elif event.f.startswith(_STOP) and key in self.windows:
            window = self.windows[key]
            window.stopped = event.time
            self._overlapped(key, window)
            if value.get("applied") is not False and window.kind in _RESTARTS:
                field_name = _RESTARTS[window.kind]
                named = value.get(field_name) if field_name is not None else None
                nodes = _names(named if named is not None else value.get("targets"))
                for node in nodes:
                    role = self.roles.get(node, node)
                    self.restarts[role] = self.restarts.get(role, 0) + 1

    def power_loss(self, lost: Mapping[str, Any]) -> None:
        """One power loss, with what it dropped (``writes``, ``bytes``, ``entry_changes``)."""
        counts = self.power_losses
        for name in ("total", "dropped_data", "writes_dropped", "bytes_dropped"):
            counts.setdefault(name, 0)
        counts["total"] += 1
        writes, size, entries = (_count(lost.get(k)) for k in ("writes", "bytes", "entry_changes"))
        counts["dropped_data"] += 1 if writes or entries else 0
        counts["writes_dropped"] += writes
        counts["bytes_dropped"] += size

    def _clock_holds(self, targets: list[str]) -> bool:
        """Whether a clock fault on ``targets`` moves a live lease: a holder's own, or any from
        the lock service's (a node whose role is not known counts as the lock service's)."""
        for target in targets:
            role = self.roles.get(target)
            if role == _WORKER and self.leases.get(target):
                return True
            if role not in (_WORKER, _STORE) and any(self.leases.values()):
                return True
        return False

    def _overlapped(self, key: Any, window: _Window) -> None:
        """Count ``window`` (just stopped) together with each window still in force: the
        time they shared ends now (a pair is counted once, at the first of the two stops)."""
        for other_key, other in self.windows.items():
            if other_key == key or other.stopped is not None:
                continue
            pair = "+".join(sorted((window.kind, other.kind)))
            counts = self.overlaps.setdefault(pair, [0, 0])
            counts[0] += 1
            counts[1] += max(0, (window.stopped or 0) - max(window.started, other.started))

    def invoke(self, event: Event) -> None:
        value = event.value
        self.invoked[event.process] = event.time
        if event.f == RELEASE and event.node is not None:
            self.leases.get(event.node, set()).discard(str(value.get("lock")))
        elif event.f == WRITE:
            sink = str(value.get("sink"))
            counts = self.writes.setdefault(sink, [0, 0, 0])
            counts[0] += 1
            keys = self.keys.setdefault(sink, set())
            keys.add(str(value.get("key")))
            also = value.get("also")
            if isinstance(also, list):  # a write spanning keys: its other keys were written too
                keys.update(str(item.get("key")) for item in also if isinstance(item, dict))
            epoch = value.get("epoch")
            newest = self.granted.get(str(value.get("lock")))
            if isinstance(epoch, int) and newest is not None and epoch < newest:
                counts[2] += 1
                self.stale_open.add(event.process)

    def complete(self, event: Event) -> None:
        value = event.value
        node = event.node
        error = event.error
        began = self.invoked.pop(event.process, event.time)
        if node is not None:
            self.seen.add(node)
            if error == UNREACHABLE or node in self.outage_since:  # else outage() does nothing
                self.outage(node, event, began)
        if event.f == WRITE:
            if event.process in self.stale_open:
                self.stale_open.discard(event.process)
            elif error == STALE_EPOCH or self._overtaken(event):
                # Sent before the newer grant was seen here, but the fence proves it arrived
                # after, or a newer epoch was granted while it was in flight and it was accepted
                # anyway.
                self.writes.setdefault(str(value.get("sink")), [0, 0, 0])[2] += 1
        if event.type != "ok":
            if event.error == STALE_EPOCH and node is not None:
                self.leases.get(node, set()).discard(str(value.get("lock")))
            return
        if event.f == ACQUIRE and isinstance(value.get("epoch"), int):
            lock = str(value.get("lock"))
            epoch = int(value["epoch"])
            self.epochs.add((lock, epoch))
            self.granted[lock] = max(epoch, self.granted.get(lock, epoch))
            if node is not None:
                self.leases.setdefault(node, set()).add(lock)
        elif event.f == WRITE:
            self.writes.setdefault(str(value.get("sink")), [0, 0, 0])[1] += 1

    def _overtaken(self, event: Event) -> bool:
        """An accepted write whose epoch is below one granted for its lock by its completion."""
        epoch = event.value.get("epoch")
        if event.type != "ok" or isinstance(epoch, bool) or not isinstance(epoch, int):
            return False
        granted = self.granted.get(str(event.value.get("lock")))
        return granted is not None and epoch < granted

    def outage(self, node: str, event: Event, began: int) -> None:
        """Unreachable spans run from the first ``unreachable`` outcome to the start of the
        next operation that got through (not its end: an acquire may then wait a while)."""
        if event.error == UNREACHABLE:
            self.outage_since.setdefault(node, event.time)
        elif node in self.outage_since:
            start = self.outage_since.pop(node)
            self.outage_total[node] = self.outage_total.get(node, 0) + max(0, began - start)

    def coverage(self, lease_ttl: float | None) -> Coverage:
        for node, start in self.outage_since.items():
            self.outage_total[node] = self.outage_total.get(node, 0) + self.last - start
        span = self.last - (self.first or 0)
        for node, role in self.roles.items():
            # A worker that never completed an operation was out of the run from the start.
            if role == "worker" and node not in self.seen:
                self.outage_total[node] = span
        stops: dict[str, int] = {}
        clocks = across = 0
        for window in self.windows.values():
            stopped = window.stopped if window.stopped is not None else self.last
            if window.kind in _CLOCKS:
                # A clock fault stops nobody; it moves the clock a lease is measured by.
                clocks += 1
                moved = (
                    abs(window.shift_s) + abs(window.rate - 1) * (stopped - window.started) / 1e9
                )
                reach = self.ttl_ns is not None and moved * 1e9 >= self.ttl_ns
                across += window.holding and reach
            elif window.holding and window.expiry is not None and stopped > window.expiry:
                stops[window.kind] = stops.get(window.kind, 0) + 1
        return Coverage(
            stops_past_lease=stops,
            restarts=dict(self.restarts),
            epochs_granted=len(self.epochs),
            sinks={
                sink: SinkCoverage(counts[0], counts[1], len(self.keys.get(sink, ())), counts[2])
                for sink, counts in self.writes.items()
            },
            unreachable_nodes={
                node: total / span
                for node, total in self.outage_total.items()
                if span and total / span > MOSTLY_UNREACHABLE
            },
            lease_ttl=lease_ttl,
            power_losses=dict(self.power_losses),
            clock_windows=clocks,
            clock_across_expiry=across,
            overlaps={pair: (n, total / 1e9) for pair, (n, total) in self.overlaps.items()},
        )


class CoverageTap:
    """Coverage taken on the way through: :meth:`events` passes a history on (to the checker)
    while counting it, so one read of the history gives both the verdict and the coverage."""

    def __init__(
        self,
        *,
        sinks: Iterable[str] = (),
        lease_ttl: float | None = None,
        roles: Mapping[str, str] | None = None,
    ) -> None:
        self._sinks = tuple(sinks)
        self._lease_ttl = lease_ttl
        self._tally = _Tally(round(lease_ttl * 1e9) if lease_ttl is not None else None, roles or {})
        self.count: Callable[[Event], None] = self._tally.event
        """Count one event (the checker's single pass calls it for each event it reads)."""

    def events(self, events: Iterable[Event]) -> Iterator[Event]:
        """``events``, unchanged, each counted as it passes."""
        tally = self._tally
        for event in events:
            tally.event(event)
            yield event

    def coverage(self) -> Coverage:
        """The coverage of what passed so far (see :func:`coverage_of`)."""
        for sink in self._sinks:
            self._tally.writes.setdefault(sink, [0, 0, 0])
        return self._tally.coverage(self._lease_ttl)


def coverage_of(
    events: Iterable[Event],
    *,
    sinks: Iterable[str] = (),
    lease_ttl: float | None = None,
    roles: Mapping[str, str] | None = None,
) -> Coverage:
    """The coverage of a history, in one pass.

    ``sinks`` (the inventory's names) appear with zero counts when nothing was written to them;
    ``lease_ttl`` (seconds) is needed to tell a stop past the lease from a short one (without it
    none is counted); ``roles`` maps node names to roles, so restarts are counted per role and a
    worker that never answered counts as unreachable for the whole run.
    """
    tap = CoverageTap(sinks=sinks, lease_ttl=lease_ttl, roles=roles)
    for _ in tap.events(events):
        pass
    return tap.coverage()


def _count(raw: Any) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0


def _names(raw: Any) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list | tuple):
        return [str(name) for name in raw]
    return []


def _number(raw: Any, default: float) -> float:
    """A fault parameter that should be a number (``default`` when it is not one)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return default
    return float(raw)
