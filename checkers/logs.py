"""The sink side: each key's log as reads reveal it, and what its order says.

Per (sink, key) the checker keeps the longest read so far (the *reference*) as one string of ids
with NUL separators, so a new read is compared with it by one C-level prefix test, plus a compact
row per entry (epoch, lock, node, acknowledgement...). Only the suffix a read adds to the reference
is examined, so each write is judged once, when it first appears. Rules:

- **divergent-reads**: a read that is neither a prefix nor an extension of the reference. It is
  still examined on its own from where it diverges (each read is the sink's order at that
  moment): stale-write, realtime-order and duplicate-write inside it are reported too, unless
  the reference already showed the same pair in the same order; an entry the reference lacks is
  judged as a shown write (phantom-write, accepted with its real-time floor and ``seq``,
  lost-update against the reference's and the read's other users of its ``prev``).
- **duplicate-write**: an id twice in one read. **phantom-write**: an entry whose write failed,
  or that no holder sent to this sink and key.
- **stale-write**: an entry whose epoch is lower than an earlier entry's of the same lock (the
  running maximum per lock is enough). Equal epochs are fine here; two holders sharing an epoch
  is epoch-reuse. An entry's ``seq`` is handed to :mod:`checkers.staleness`, which judges the
  order across keys.
- **realtime-order**: write A completed ``ok`` before write B was invoked, yet B precedes A. The
  latest invoke over the prefix, with its write, is enough. Concurrent writes may take either
  order, and a write with no ``ok`` has no completion to order by. Real-time order is index
  order (times never go back, and on equal times the index decides).
- **lost-update**: two accepted writes with the same non-null ``prev``, wherever the ``prev``
  sits in the log (a write placed before the entry it was based on is still its first user).
- **lost-write**, judged at the end against each key's final read (the successful read begun
  last): an ``ok`` write acknowledged before that read began and missing from it. An ``ok``
  write with no successful read of its key begun after its acknowledgement leaves the key
  *unknown*.

Every path is linear in what the reads return: duplicates inside a read and ``prev`` lookups use
dictionaries built only when needed (a read's own ids; a key's ids, once a lookup misses).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter
from typing import Any, NamedTuple

from checkers.cycles import order_cycle
from checkers.findings import Findings
from checkers.staleness import CrossKey
from checkers.tables import Ints, Names, widen
from checkers.writes import WriteChecker, WriteRecord, sequence_number
from harness.record import Event, HistoryError, Process
from harness.record.verdict import OpRef

__all__ = ["KeyLog", "ReadChecker"]

_ENTRIES_FIX = (
    'a read\'s ok value is {"sink": ..., "key": ..., "entries": [{"id": ..., "epoch": N}]} '
    "with N an integer >= 0 (and an optional integer seq)"
)


class _Mark(NamedTuple):
    """A successful read, without its entries (only ``ids`` when it diverged)."""

    done_index: int
    done_time: int
    invoke_index: int
    invoke_time: int
    process: Process
    node: str | None
    length: int
    ids: str | None = None


class KeyLog:
    """One key's log as the reads have shown it."""

    __slots__ = (
        "ack_index",
        "ack_time",
        "end",
        "epochs",
        "invoke_index",
        "key",
        "last",
        "latest",
        "locks",
        "nodes",
        "offsets",
        "orphans",
        "peaks",
        "prev_user",
        "processes",
        "ref",
        "reference",
        "sink",
        "where",
    )

    def __init__(self, sink: str, key: str) -> None:
        self.sink = sink
        self.key = key
        self.ref = "\0"  # "\0id0\0id1\0...\0": every id enclosed by NULs
        self.end = 0  # offset of the NUL that will precede the next entry
        self.offsets = array("q")  # per entry: offset of the NUL before its id
        self.epochs: Ints = array("q")
        self.locks = array("i")
        self.nodes = array("i")
        self.processes: Ints = array("q")
        self.invoke_index: Ints = array("q")  # -1 for an entry no holder sent here
        self.ack_index: Ints = array("q")  # the ok completion, -1 if none (yet)
        self.ack_time: Ints = array("q")
        self.prev_user = array("i")  # first accepted write based on this entry, -1 if none
        self.peaks: dict[str, tuple[int, WriteRecord]] = {}
        self.latest: WriteRecord | None = None
        self.orphans: dict[str, int] = {}
        self.reference: _Mark | None = None
        self.last: _Mark | None = None
        self.where: dict[str, int] | None = None  # id -> last position, once a lookup needs it

    @property
    def length(self) -> int:
        """How many entries the reference holds."""
        return len(self.offsets)

    def id_at(self, position: int) -> str:
        """The id at ``position`` of the reference."""
        start = self.offsets[position] + 1
        end = self.offsets[position + 1] if position + 1 < self.length else len(self.ref) - 1
        return self.ref[start:end]

    def position(self, wid: str) -> int:
        """The first position of ``wid`` in the reference (a later one is a duplicate, whose row
        says nothing of the write), or ``-1``; builds the id index the first time, so that
        every later lookup is O(1)."""
        where = self.where
        if where is None:
            where = self.where = {}
            for at in range(self.length):
                where.setdefault(self.id_at(at), at)
        return where.get(wid, -1)

    def holds(self, wid: str, entries: int) -> bool:
        """Whether ``wid`` is among the reference's first ``entries`` entries."""
        end = self.offsets[entries] + 1 if entries < self.length else len(self.ref)
        return self.ref.find(f"\0{wid}\0", 0, end) >= 0

    def row_ref(self, position: int, role: str, names: Names) -> OpRef:
        """The entry at ``position`` as evidence, from its compact row."""
        ack = self.ack_index[position]
        process = self.processes[position]
        invoke = self.invoke_index[position]
        return OpRef(
            role,
            "write",
            "ok" if ack >= 0 else "info",
            ack if ack >= 0 else None,
            self.ack_time[position] if ack >= 0 else None,
            invoke if invoke >= 0 else None,
            None,
            process if process >= 0 else None,
            names.name(self.nodes[position]),
            names.name(self.locks[position]),
            self.epochs[position],
            self.id_at(position),
            self.sink,
            self.key,
            None,
            position,
        )

    def read_ref(self, mark: _Mark, role: str) -> OpRef:
        """A read of this key as evidence."""
        return OpRef(
            role,
            "read",
            "ok",
            mark.done_index,
            mark.done_time,
            mark.invoke_index,
            mark.invoke_time,
            mark.process,
            mark.node,
            sink=self.sink,
            key=self.key,
        )

    def append(self, wid: str, row: tuple[int, int, int, int, int, int, int]) -> None:
        """Add the row of one entry: epoch, lock, node, process, invoke, ack index and time
        (offsets are added by the caller)."""
        epoch, lock, node, process, invoke, ack, at = row
        try:
            self.epochs.append(epoch)
            self.processes.append(process)
            self.invoke_index.append(invoke)
            self.ack_index.append(ack)
            self.ack_time.append(at)
        except OverflowError:
            self._widen()
            self.append(wid, row)
            return
        self.locks.append(lock)
        self.nodes.append(node)
        self.prev_user.append(-1)
        if self.where is not None:
            self.where.setdefault(wid, len(self.prev_user) - 1)

    def _widen(self) -> None:
        columns = ("epochs", "processes", "invoke_index", "ack_index", "ack_time")
        widen(self, columns, len(self.prev_user))


class ReadChecker:
    """Judges successful reads against each key's reference, and every key at the end."""

    def __init__(
        self, findings: Findings, writes: WriteChecker, names: Names, cross: CrossKey
    ) -> None:
        self._findings = findings
        self._writes = writes
        self._names = names
        self._cross = cross
        self.logs: dict[tuple[str, str], KeyLog] = {}
        self.reads = 0

    def read_ok(self, event: Event, invoke: Event) -> None:
        """A read returned entries: compare with the reference, judge any new suffix."""
        self.reads += 1
        value = event.value
        sink = value.get("sink", invoke.value.get("sink"))
        key = value.get("key", invoke.value.get("key"))
        entries = value.get("entries")
        if not (isinstance(sink, str) and isinstance(key, str) and isinstance(entries, list)):
            raise HistoryError(
                event.line, "a successful read needs sink, key and entries", _ENTRIES_FIX
            )
        try:
            ids = [entry["id"] for entry in entries]
            text = "\0" + "\0".join(ids) + "\0" if ids else "\0"
            epochs = [entry["epoch"] for entry in entries]
        except (TypeError, KeyError):
            raise HistoryError(
                event.line,
                "read entries must be objects with a string id and an epoch",
                _ENTRIES_FIX,
            ) from None
        if not all(type(epoch) is int and epoch >= 0 for epoch in epochs):
            raise HistoryError(
                event.line, "a read entry's epoch is not an integer >= 0", _ENTRIES_FIX
            )
        if text.count("\0") != len(ids) + 1:
            raise HistoryError(event.line, "a read entry's id contains a NUL character")
        log = self.logs.get((sink, key))
        if log is None:
            log = self.logs[sink, key] = KeyLog(sink, key)
        mark = _Mark(
            event.index, event.time, invoke.index, invoke.time, event.process, event.node, len(ids)
        )
        if text.startswith(log.ref):
            if len(ids) > log.length:
                self._extend(log, entries, ids, text, mark, event.line)
        elif not log.ref.startswith(text):
            self._diverged(log, entries, ids, mark)
            mark = mark._replace(ids=text)
        last = log.last
        if last is None or mark.invoke_index > last.invoke_index:
            # The final read is the one begun last: every write acknowledged before it began
            # must be in it, whichever of two overlapping reads happened to answer last.
            log.last = mark

    def acked(self, record: WriteRecord) -> None:
        """A write a read had already shown completed ``ok``: note its acknowledgement."""
        log = self.logs[record.sink, record.key]
        position = record.position
        if position is not None and record.index is not None and record.time is not None:
            log.ack_index[position] = record.index
            log.ack_time[position] = record.time

    def _extend(
        self,
        log: KeyLog,
        entries: list[Any],
        ids: list[str],
        text: str,
        mark: _Mark,
        line: int,
    ) -> None:
        log.ref = text
        log.reference = mark
        pending = self._writes.pending
        names = self._names
        sink, key = log.sink, log.key
        place = (sink, key)
        offsets = log.offsets
        end = log.end
        seen: dict[str, int] | None = None
        for position in range(log.length, len(ids)):
            wid = ids[position]
            offsets.append(end)
            end += len(wid) + 1
            entry = entries[position]
            epoch: int = entry["epoch"]
            record = pending.get(wid)
            if record is None or record.position is not None or (record.sink, record.key) != place:
                if seen is None:
                    seen = _first_positions(ids)
                self._stray(log, position, seen[wid], wid, epoch, record, mark)
                continue
            record.position = position
            kind = record.type
            ok = kind == "ok"
            log.append(
                wid,
                (
                    epoch,
                    names.code(record.lock),
                    names.code(record.node),
                    record.process if type(record.process) is int else -1,
                    record.invoke_index,
                    record.index if ok and record.index is not None else -1,
                    record.time if ok and record.time is not None else -1,
                ),
            )
            if log.orphans:
                # A write based on this entry came before it in the log: it is this entry's
                # first user, so a second write based on it is a lost update.
                user = log.orphans.pop(wid, -1)
                if user >= 0:
                    log.prev_user[position] = user
            if kind == "fail":
                self._findings.report(
                    "phantom-write",
                    (record.ref("phantom"), log.read_ref(mark, "read")),
                    sink=sink,
                    key=key,
                    lock=record.lock,
                    details={"reason": "failed", "position": position, "id": wid},
                )
            elif kind == "invoke":
                record.shown_by = log.read_ref(mark, "read")
            if not record.accepted:
                self._writes.accept(record)
            self._order(log, record, epoch, mark)
            seq = sequence_number(entry, line) if "seq" in entry else None
            if seq is not None:
                self._writes.sequenced(record, seq)
            if record.prev is not None:
                self._based_on(log, record, record.prev, position)
            if kind != "invoke":
                del pending[wid]
        log.end = end

    def _order(self, log: KeyLog, record: WriteRecord, epoch: int, mark: _Mark) -> None:
        peak = log.peaks.get(record.lock)
        if peak is None or epoch > peak[0]:
            log.peaks[record.lock] = (epoch, record)
        elif epoch < peak[0]:
            newer = peak[1]
            self._cross.stale(
                record.ref("stale"),
                newer.ref("newer"),
                "key order",
                also=(log.read_ref(mark, "read"),),
                positions=[newer.position, record.position],
            )
        latest = log.latest
        if latest is None or record.invoke_index > latest.invoke_index:
            log.latest = record
        elif (
            record.type == "ok" and record.index is not None and latest.invoke_index > record.index
        ):
            self._realtime(log, record.ref("first"), latest.ref("second"), mark)

    def _realtime(self, log: KeyLog, first: OpRef, second: OpRef, mark: _Mark) -> None:
        keep = self._findings.keeps("realtime-order", log.sink)
        self._findings.report(
            "realtime-order",
            (first, second, log.read_ref(mark, "read")),
            sink=log.sink,
            key=log.key,
            lock=first.lock,
            details={
                "positions": [first.position, second.position],
                "cycle": order_cycle(
                    (
                        (second.id or "", first.id or "", "sink order"),
                        (first.id or "", second.id or "", "real time"),
                    )
                )
                if keep
                else [],
            },
        )

    def _based_on(self, log: KeyLog, record: WriteRecord, prev: str, position: int) -> None:
        # Most writes are based on an entry near the end, which a backward search finds at once;
        # a prev that is missing would make that search scan the whole key every time, so the
        # search is bounded and the key's id index answers the rest.
        start = max(0, log.offsets[position] - _NEAR)
        found = log.ref.rfind(f"\0{prev}\0", start, log.offsets[position] + 1)
        based = _position_at(log, found) if found >= 0 else log.position(prev)
        if based == position:
            based = -1
        if based >= 0:
            first = log.prev_user[based]
            if first < 0:
                log.prev_user[based] = position
                return
        else:
            first = log.orphans.setdefault(prev, position)
            if first == position:
                return
        self._findings.report(
            "lost-update",
            (log.row_ref(first, "first", self._names), record.ref("second")),
            sink=log.sink,
            key=log.key,
            lock=record.lock,
            details={"prev": prev, "positions": [first, position]},
        )

    def _stray(
        self,
        log: KeyLog,
        position: int,
        first: int,
        wid: str,
        epoch: int,
        record: WriteRecord | None,
        mark: _Mark,
    ) -> None:
        read = log.read_ref(mark, "read")
        if first < position:
            self._findings.report(
                "duplicate-write",
                (log.row_ref(first, "write", self._names), read),
                sink=log.sink,
                key=log.key,
                details={"id": wid, "positions": [first, position]},
            )
        else:
            details = {"reason": "unknown", "position": position, "id": wid}
            ops = [read]
            if record is not None:
                details["reason"] = "misplaced"
                ops.insert(0, record.ref("phantom"))
            self._findings.report("phantom-write", ops, sink=log.sink, key=log.key, details=details)
        node = self._names.code(record.node) if record is not None else -1
        log.append(wid, (epoch, -1, node, -1, -1, -1, -1))

    def _diverged(self, log: KeyLog, entries: list[Any], ids: list[str], mark: _Mark) -> None:
        shared = min(log.length, len(ids))
        position = next((at for at in range(shared) if log.id_at(at) != ids[at]), shared)
        reference = log.reference
        ops = [log.read_ref(mark, "read")]
        if reference is not None:
            ops.insert(0, log.read_ref(reference, "reference"))
        self._findings.report(
            "divergent-reads",
            ops,
            sink=log.sink,
            key=log.key,
            details={
                "position": position,
                "reference_id": log.id_at(position) if position < log.length else None,
                "read_id": ids[position] if position < len(ids) else None,
                "reference_entries": log.length,
                "read_entries": len(ids),
            },
        )
        _Examined(self, log, mark).run(entries, ids, position)

    def finish(self) -> Counter[tuple[str, str]]:
        """Judge lost writes; returns, per key, how many ``ok`` writes no read could verify."""
        unverified: Counter[tuple[str, str]] = Counter()
        for record in self._writes.pending.values():
            if record.type != "ok" or record.position is not None or record.index is None:
                continue
            log = self.logs.get((record.sink, record.key))
            last = log.last if log is not None else None
            if log is None or last is None or last.invoke_index < record.index:
                unverified[record.sink, record.key] += 1
            elif not (
                log.holds(record.id, last.length)
                if last.ids is None
                else f"\0{record.id}\0" in last.ids
            ):
                # Shown before it was sent (a phantom then), it may still be in the final read.
                self._lost(log, record.ref("lost"), last, shown_before=False)
        for log in self.logs.values():
            last = log.last
            if last is None:
                continue
            if last.ids is None:
                missing: range | list[int] = range(last.length, log.length)
            else:
                present = set(last.ids.split("\0"))
                missing = [at for at in range(log.length) if log.id_at(at) not in present]
            for at in missing:
                if 0 <= log.ack_index[at] < last.invoke_index:
                    self._lost(log, log.row_ref(at, "lost", self._names), last, shown_before=True)
        return unverified

    def _lost(self, log: KeyLog, lost: OpRef, last: _Mark, *, shown_before: bool) -> None:
        self._findings.report(
            "lost-write",
            (lost, log.read_ref(last, "read")),
            sink=log.sink,
            key=log.key,
            lock=lost.lock,
            details={"final_entries": last.length, "shown_before": shown_before},
        )


_NEAR = 4096  # characters of a key's log searched backwards for a prev before the id index


def _first_positions(ids: list[str]) -> dict[str, int]:
    first: dict[str, int] = {}
    for at, wid in enumerate(ids):
        first.setdefault(wid, at)
    return first


def _position_at(log: KeyLog, offset: int) -> int:
    return bisect_left(log.offsets, offset)


class _Examined:
    """A divergent read judged on its own, from where it leaves the reference.

    Running peaks and the latest invoke are taken over the whole read, so what comes before the
    divergence point still counts; a pair the reference holds in the same order was judged there
    already and is skipped.
    """

    def __init__(self, checker: ReadChecker, log: KeyLog, mark: _Mark) -> None:
        self._checker = checker
        self._log = log
        self._mark = mark

    def run(self, entries: list[Any], ids: list[str], start: int) -> None:
        """Examine every entry at or after ``start``."""
        checker, log = self._checker, self._log
        pending = checker._writes.pending
        peaks: dict[str, tuple[int, int, OpRef]] = {}
        latest: tuple[int, int, OpRef] | None = None
        first = _first_positions(ids)
        read = log.read_ref(self._mark, "read")
        prevs: dict[str, WriteRecord] = {}
        for at, wid in enumerate(ids):
            if at >= start and first[wid] < at:
                checker._findings.report(
                    "duplicate-write",
                    (read,),
                    sink=log.sink,
                    key=log.key,
                    details={"id": wid, "positions": [first[wid], at]},
                )
                continue
            known = self._known(wid, pending)
            if known is None:
                if at >= start and log.position(wid) < 0:
                    self._stray(wid, at, pending.get(wid), read)
                continue
            where, ref = known
            if where < 0 and at >= start:
                self._shown(pending[wid], entries[at], at, read, prevs)
            epoch: int = entries[at]["epoch"]
            lock = ref.lock or ""
            peak = peaks.get(lock)
            if peak is None or epoch > peak[0]:
                peaks[lock] = (epoch, where, ref)
            elif epoch < peak[0] and at >= start and not 0 <= peak[1] < where:
                checker._cross.stale(
                    ref.with_role("stale"),
                    peak[2],
                    "key order",
                    also=(read,),
                    positions=[first[peak[2].id or ""], at],
                )
            invoked = ref.invoke_index if ref.invoke_index is not None else -1
            if latest is None or invoked > latest[0]:
                latest = (invoked, where, ref)
            elif (
                at >= start
                and ref.type == "ok"
                and ref.index is not None
                and latest[0] > ref.index
                and not 0 <= latest[1] < where
            ):
                checker._realtime(
                    log, ref.with_role("first"), latest[2].with_role("second"), self._mark
                )

    def _stray(self, wid: str, at: int, record: WriteRecord | None, read: OpRef) -> None:
        """An entry of this read only, whose write was not sent to this sink and key."""
        log = self._log
        details: dict[str, object] = {"reason": "unknown", "position": at, "id": wid}
        ops = [read]
        if record is not None:
            details["reason"] = "misplaced"
            ops.insert(0, record.ref("phantom"))
        self._checker._findings.report(
            "phantom-write", ops, sink=log.sink, key=log.key, details=details
        )

    def _shown(
        self,
        record: WriteRecord,
        entry: dict[str, Any],
        at: int,
        read: OpRef,
        prevs: dict[str, WriteRecord],
    ) -> None:
        """A write of this key that only this read shows: it is judged as any shown write is
        (phantom if it failed, accepted, its seq and its prev), without a place in the
        reference."""
        checker, log = self._checker, self._log
        findings = checker._findings
        if record.type == "fail":
            findings.report(
                "phantom-write",
                (record.ref("phantom"), read),
                sink=log.sink,
                key=log.key,
                lock=record.lock,
                details={"reason": "failed", "position": at, "id": record.id},
            )
        elif record.type == "invoke" and record.shown_by is None:
            record.shown_by = read
        if not record.accepted:
            checker._writes.accept(record)
        if "seq" in entry:
            seq = sequence_number(entry, record.line)
            if seq is not None:
                checker._writes.sequenced(record, seq)
        prev = record.prev
        if prev is None:
            return
        earlier = prevs.get(prev)
        first: OpRef | None = earlier.ref("first") if earlier is not None else None
        if first is None:
            based = log.position(prev)
            user = log.prev_user[based] if based >= 0 else log.orphans.get(prev, -1)
            if user >= 0:
                first = log.row_ref(user, "first", checker._names)
        prevs.setdefault(prev, record)
        if first is not None and first.id != record.id:
            findings.report(
                "lost-update",
                (first, record.ref("second")),
                sink=log.sink,
                key=log.key,
                lock=record.lock,
                details={"prev": prev, "positions": [first.position, at]},
            )

    def _known(self, wid: str, pending: dict[str, WriteRecord]) -> tuple[int, OpRef] | None:
        """Where the reference holds ``wid`` (``-1`` if not) and what is known of its write."""
        log = self._log
        at = log.position(wid)
        if at >= 0 and log.locks[at] >= 0:
            return at, log.row_ref(at, "newer", self._checker._names)
        record = pending.get(wid)
        if record is not None and (record.sink, record.key) == (log.sink, log.key):
            return -1, record.ref("newer")
        return None
