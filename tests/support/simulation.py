"""A correct fenced system in miniature, producing histories: the checkers' oracle.

Property tests drive it step by step (and then plant one mistake in what it recorded); the
benchmark drives it at random for millions of events. It is a model, not the product: a lock
service with leases and an epoch counter, sinks that keep one log per key (fenced ones refuse an
epoch lower than the highest they have seen for the lock, on any key: the property is per sink
and lock), and holders that act like careful clients. Sinks named in ``sequenced`` number every
write they accept, across keys, and report it as ``seq`` on read entries and on a write's ``ok``
value, as etcd's ``mod_revision`` does. A holder writes only while its own clock says its lease
holds, reads with its epoch (a fenced read raises the sink's mark), re-reads after anything
uncertain, drops its grant when refused, and forgets what it knew of the data when it is granted
a new epoch. So the only stale writes are the ones a pause lets through, and only unfenced sinks
accept them.

Every event goes to ``emit`` as a history-format mapping (docs/design.md §4) as soon as it happens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from nemeses.registry import KINDS, fault_words

__all__ = ["MS", "FencedSystem", "Outcome"]

MS: Final = 1_000_000
Outcome = Literal["ok", "info-landed", "info-lost"]
_Place = tuple[str, str]


@dataclass(slots=True)
class _InFlight:
    """A write sent just before its holder was paused."""

    place: _Place
    value: dict[str, Any]


@dataclass(slots=True)
class _Holder:
    name: str
    process: int
    epoch: int | None = None
    granted_at: int = 0
    known: dict[_Place, str | None] = field(default_factory=dict)
    paused: _InFlight | None = None
    writes: int = 0


@dataclass(slots=True)
class _Lease:
    holder: str
    epoch: int
    expires: int


class FencedSystem:
    """Holders ``w1..wN`` sharing one lock ``lock``, writing to fenced and unfenced sinks.

    ``first_epoch`` is the first epoch granted; ``reset_after`` plants the lock-service mistake
    of a counter that restarts from zero after that many new grants. Time advances by ``step``
    per operation (half of it between invoke and completion).
    """

    def __init__(
        self,
        holders: int,
        emit: Callable[[dict[str, Any]], None],
        *,
        ttl: int = 1000 * MS,
        lock: str = "L",
        first_epoch: int = 1,
        reset_after: int | None = None,
        step: int = 2 * MS,
        fenced: Iterable[str] = ("store",),
        unfenced: Iterable[str] = (),
        sequenced: Iterable[str] = (),
    ) -> None:
        self._emit = emit
        self.ttl = ttl
        self.lock = lock
        self.step = step
        self.now = 0
        self._index = 0
        self._stride = holders
        self.holders = [_Holder(f"w{number + 1}", number) for number in range(holders)]
        self._counter = first_epoch - 1
        self._new_grants = 0
        self._reset_after = reset_after
        self._lease: _Lease | None = None
        self.fenced = frozenset(fenced)
        self.sinks = (*sorted(self.fenced), *sorted(set(unfenced) - self.fenced))
        self.sequenced = frozenset(sequenced)
        self.logs: dict[_Place, list[dict[str, Any]]] = {}
        self._highest: dict[tuple[str, str], int] = {}  # per sink and lock, across keys
        self._seq: dict[str, int] = {}

    @property
    def events(self) -> int:
        """How many events have been emitted."""
        return self._index

    def holds(self, number: int) -> bool:
        """True if holder ``number`` believes it holds the lock."""
        return self.holders[number].epoch is not None

    def paused(self, number: int) -> bool:
        """True if holder ``number`` is paused with a write in flight."""
        return self.holders[number].paused is not None

    # -- the operations a holder can perform --------------------------------------------------

    def acquire(self, number: int) -> None:
        """Holder ``number`` asks for the lock (re-entry renews its lease, same epoch)."""
        holder = self.holders[number]
        if holder.paused is not None:
            return
        invoke_time = self._invoke(holder, "acquire", {"lock": self.lock})
        now = self.now
        lease = self._lease
        if lease is not None and lease.expires > now and lease.holder != holder.name:
            self._complete(holder, "fail", "acquire", {"lock": self.lock}, error="held")
            return
        if lease is not None and lease.expires > now:
            lease.expires = now + self.ttl
        else:
            lease = self._lease = _Lease(holder.name, self._next_epoch(), now + self.ttl)
        if holder.epoch != lease.epoch:
            holder.known.clear()  # someone else may have written since this holder last knew
        holder.epoch, holder.granted_at = lease.epoch, invoke_time
        self._complete(holder, "ok", "acquire", {"lock": self.lock, "epoch": lease.epoch})

    def release(self, number: int) -> None:
        """Holder ``number`` gives the lock back, if it believes it has it."""
        holder = self.holders[number]
        if holder.paused is not None or holder.epoch is None:
            return
        self._invoke(holder, "release", {"lock": self.lock})
        if self._lease is not None and self._lease.holder == holder.name:
            self._lease = None
        holder.epoch = None
        self._complete(holder, "ok", "release", {"lock": self.lock})

    def read(self, number: int, sink: str, key: str) -> None:
        """Holder ``number`` reads one key of one sink."""
        holder = self.holders[number]
        if holder.paused is not None:
            return
        self._read(holder, (sink, key))

    def write(
        self,
        number: int,
        sink: str,
        key: str,
        *,
        rmw: bool = False,
        outcome: Outcome = "ok",
    ) -> None:
        """Holder ``number`` writes a fresh id, if it believes it holds the lock.

        With ``rmw`` the write names the last entry the holder read (reading first if it does
        not know); ``outcome`` makes the reply go missing (``info``) with the write applied or not.
        """
        holder = self.holders[number]
        value = self._prepare(holder, (sink, key), rmw)
        if value is None:
            return
        self._invoke(holder, "write", value)
        landed = self._apply((sink, key), value) if outcome != "info-lost" else None
        self._written(holder, (sink, key), value, landed, outcome != "ok")

    def start_pause(self, number: int, sink: str, key: str, *, rmw: bool = False) -> bool:
        """Holder ``number`` sends a write and is paused before it lands; False if it can't."""
        holder = self.holders[number]
        value = self._prepare(holder, (sink, key), rmw)
        if value is None:
            return False
        self._invoke(holder, "write", value)
        self._nemesis("start-pause", holder.name)
        holder.paused = _InFlight((sink, key), value)
        return True

    def stop_pause(self, number: int) -> None:
        """Holder ``number`` resumes; its write lands (and is judged by the sink) now."""
        holder = self.holders[number]
        flight = holder.paused
        if flight is None:
            return
        self._nemesis("stop-pause", holder.name)
        holder.paused = None
        self._written(holder, flight.place, flight.value, self._apply(flight.place, flight.value))

    def wait(self, duration: int) -> None:
        """Let ``duration`` ns pass (leases expire)."""
        self.now += duration

    def retire(self, sink: str, key: str, number: int = 0) -> None:
        """Final read of one key, then forget the key (so memory stays bounded).

        Holders paused with a write to the key resume first; the reader is an unpaused holder
        (``number`` is resumed if every holder is paused).
        """
        place = (sink, key)
        for waiting, holder in enumerate(self.holders):
            if holder.paused is not None and holder.paused.place == place:
                self.stop_pause(waiting)  # a final read comes after every write to the key
        reader = next((h for h in self.holders if h.paused is None), None)
        if reader is None:
            self.stop_pause(number)
            reader = self.holders[number]
        self._read(reader, place)
        self.logs.pop(place, None)
        for holder in self.holders:
            holder.known.pop(place, None)

    def finish(self) -> None:
        """Resume every paused holder, then read every key once more."""
        for number in range(len(self.holders)):
            self.stop_pause(number)
        for sink, key in list(self.logs):
            self.retire(sink, key)

    # -- the model's insides ------------------------------------------------------------------

    def _next_epoch(self) -> int:
        self._new_grants += 1
        if self._reset_after is not None and self._new_grants == self._reset_after + 1:
            self._counter = 0
        self._counter += 1
        return self._counter

    def _prepare(self, holder: _Holder, place: _Place, rmw: bool) -> dict[str, Any] | None:
        if holder.paused is not None or holder.epoch is None:
            return None
        if rmw and place not in holder.known:
            self._read(holder, place)
        holder.writes += 1
        sink, key = place
        value: dict[str, Any] = {
            "lock": self.lock,
            "sink": sink,
            "key": key,
            "id": f"{holder.name}-{holder.writes}",
            "epoch": holder.epoch,
        }
        if rmw and holder.known.get(place) is not None:
            value["prev"] = holder.known[place]
        if self.now + self.step >= holder.granted_at + self.ttl:
            # The holder's own lease check: refused locally, never sent.
            self._invoke(holder, "write", value)
            self._complete(holder, "fail", "write", value, error="lease-expired")
            holder.epoch = None
            return None
        self.logs.setdefault(place, [])
        return value

    def _apply(self, place: _Place, value: dict[str, Any]) -> dict[str, Any] | None:
        """The entry the sink appends, or ``None`` when its fence refuses the write."""
        epoch = value["epoch"]
        sink = place[0]
        mark = (sink, value["lock"])
        if sink in self.fenced:
            if epoch < self._highest.get(mark, epoch):
                return None
            self._highest[mark] = epoch
        entry: dict[str, Any] = {"id": value["id"], "epoch": epoch}
        if sink in self.sequenced:
            entry["seq"] = self._seq[sink] = self._seq.get(sink, 0) + 1
        self.logs.setdefault(place, []).append(entry)
        return entry

    def _written(
        self,
        holder: _Holder,
        place: _Place,
        value: dict[str, Any],
        landed: dict[str, Any] | None,
        lost_reply: bool = False,
    ) -> None:
        if lost_reply:
            self._complete(holder, "info", "write", value, error="timeout")
            holder.process += self._stride
            holder.known.pop(place, None)
        elif landed is not None:
            seq = {"seq": landed["seq"]} if "seq" in landed else {}
            self._complete(holder, "ok", "write", {**value, **seq})
            holder.known[place] = value["id"]
        else:
            self._complete(holder, "fail", "write", value, error="stale-epoch")
            holder.known.pop(place, None)
            holder.epoch = None

    def _read(self, holder: _Holder, place: _Place) -> None:
        sink, key = place
        value: dict[str, Any] = {"sink": sink, "key": key}
        if holder.epoch is not None and sink in self.fenced:
            # A fenced read raises the lock's mark, so a delayed write from an older holder
            # cannot land after a read that a newer holder will base its update on.
            value.update(lock=self.lock, epoch=holder.epoch)
            mark = (sink, self.lock)
            self._highest[mark] = max(self._highest.get(mark, holder.epoch), holder.epoch)
        self._invoke(holder, "read", value)
        entries = list(self.logs.get(place, ()))
        holder.known[place] = entries[-1]["id"] if entries else None
        self._complete(holder, "ok", "read", {**value, "entries": entries})

    def _invoke(self, holder: _Holder, f: str, value: dict[str, Any]) -> int:
        time = self.now
        self._event(holder.process, holder.name, "invoke", f, value)
        self.now += self.step // 2
        return time

    def _complete(
        self,
        holder: _Holder,
        kind: str,
        f: str,
        value: dict[str, Any],
        error: str | None = None,
    ) -> None:
        self._event(holder.process, holder.name, kind, f, value, error)
        self.now += self.step - self.step // 2

    def _nemesis(self, f: str, target: str) -> None:
        self._event("nemesis", None, "info", f, {"targets": [target], **recorded_words(f)})

    def _event(
        self,
        process: int | str,
        node: str | None,
        kind: str,
        f: str,
        value: dict[str, Any],
        error: str | None = None,
    ) -> None:
        event: dict[str, Any] = {"index": self._index, "time": self.now, "process": process}
        if node is not None:
            event["node"] = node
        event["type"] = kind
        event["f"] = f
        event["value"] = value
        if error is not None:
            event["error"] = error
        self._index += 1
        self._emit(event)


def recorded_words(f: str) -> dict[str, Any]:
    """The words the nemesis player records with a fault's start (see ``fault_words``)."""
    action, _, kind = f.partition("-")
    return fault_words(kind) if action == "start" and kind in KINDS else {}
