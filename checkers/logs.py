"""The sink side: each key's log as reads reveal it, and what its order says.

Per (sink, key) the checker keeps the longest read so far (the *reference*) as one string of ids
with NUL separators, so a new read is compared with it by one C-level prefix test, plus a compact
row per entry (epoch, lock, node, acknowledgement...). Only the suffix a read adds to the reference
is examined, so each write is judged once, when it first appears. Rules:

- **divergent-reads**: a read that is neither a prefix nor an extension of the reference.
- **duplicate-write**: an id twice in one read. **phantom-write**: an entry whose write failed,
  or that no holder sent to this sink and key.
- **stale-write**: an entry whose epoch is lower than an earlier entry's of the same lock (the
  running maximum per lock is enough). Equal epochs are fine here; two holders sharing an epoch
  is epoch-reuse.
- **realtime-order**: write A completed ``ok`` before write B was invoked, yet B precedes A. The
  latest invoke over the prefix, with its write, is enough. Concurrent writes may take either
  order, and a write with no ``ok`` has no completion to order by.
- **lost-update**: two accepted writes with the same non-null ``prev``.
- **lost-write**, judged at the end against each key's final (last successful) read: an ``ok``
  write acknowledged before that read began and missing from it. An ``ok`` write with no
  successful read of its key begun after its acknowledgement leaves the key *unknown*.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter
from typing import Any, NamedTuple

from checkers.cycles import order_cycle
from checkers.evidence import OpRef
from checkers.findings import Findings
from checkers.tables import Names
from checkers.writes import WriteChecker, WriteRecord
from harness.history import Event, HistoryError, Process

__all__ = ["KeyLog", "ReadChecker"]

_ENTRIES_FIX = (
    'a read\'s ok value is {"sink": ..., "key": ..., "entries": [{"id": ..., "epoch": N}]}'
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
    )

    def __init__(self, sink: str, key: str) -> None:
        self.sink = sink
        self.key = key
        self.ref = "\0"  # "\0id0\0id1\0...\0": every id enclosed by NULs
        self.end = 0  # offset of the NUL that will precede the next entry
        self.offsets = array("i")  # per entry: offset of the NUL before its id
        self.epochs = array("q")
        self.locks = array("i")
        self.nodes = array("i")
        self.processes = array("q")
        self.ack_index = array("q")  # the ok completion, -1 if none (yet)
        self.ack_time = array("q")
        self.prev_user = array("i")  # first accepted write based on this entry, -1 if none
        self.peaks: dict[str, tuple[int, WriteRecord]] = {}
        self.latest: WriteRecord | None = None
        self.orphans: dict[str, int] = {}
        self.reference: _Mark | None = None
        self.last: _Mark | None = None

    @property
    def length(self) -> int:
        """How many entries the reference holds."""
        return len(self.offsets)

    def id_at(self, position: int) -> str:
        """The id at ``position`` of the reference."""
        start = self.offsets[position] + 1
        end = self.offsets[position + 1] if position + 1 < self.length else len(self.ref) - 1
        return self.ref[start:end]

    def row_ref(self, position: int, role: str, names: Names) -> OpRef:
        """The entry at ``position`` as evidence, from its compact row."""
        ack = self.ack_index[position]
        process = self.processes[position]
        return OpRef(
            role,
            "write",
            "ok" if ack >= 0 else "info",
            ack if ack >= 0 else None,
            self.ack_time[position] if ack >= 0 else None,
            None,
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

    def append(self, epoch: int, lock: int, node: int, process: Process, ack: int, at: int) -> None:
        """Add the row of one entry (offsets are added by the caller)."""
        self.epochs.append(epoch)
        self.locks.append(lock)
        self.nodes.append(node)
        self.processes.append(process if type(process) is int else -1)
        self.ack_index.append(ack)
        self.ack_time.append(at)
        self.prev_user.append(-1)


class ReadChecker:
    """Judges successful reads against each key's reference, and every key at the end."""

    def __init__(self, findings: Findings, writes: WriteChecker, names: Names) -> None:
        self._findings = findings
        self._writes = writes
        self._names = names
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
        except (TypeError, KeyError):
            raise HistoryError(
                event.line, "read entries must be objects with a string id", _ENTRIES_FIX
            ) from None
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
                self._extend(log, entries, ids, text, mark)
        elif not log.ref.startswith(text):
            self._diverged(log, ids, mark)
            mark = mark._replace(ids=text)
        log.last = mark

    def acked(self, record: WriteRecord) -> None:
        """A write a read had already shown completed ``ok``: note its acknowledgement."""
        log = self.logs[record.sink, record.key]
        position = record.position
        if position is not None and record.index is not None and record.time is not None:
            log.ack_index[position] = record.index
            log.ack_time[position] = record.time

    def _extend(
        self, log: KeyLog, entries: list[Any], ids: list[str], text: str, mark: _Mark
    ) -> None:
        log.ref = text
        log.reference = mark
        pending = self._writes.pending
        names = self._names
        sink, key = log.sink, log.key
        place = (sink, key)
        offsets = log.offsets
        end = log.end
        for position in range(log.length, len(ids)):
            wid = ids[position]
            offsets.append(end)
            end += len(wid) + 1
            epoch = entries[position].get("epoch")
            record = pending.get(wid)
            if record is None or record.position is not None or (record.sink, record.key) != place:
                self._stray(log, position, ids, epoch, record, mark)
                continue
            if type(epoch) is not int:
                epoch = record.epoch
            record.position = position
            kind = record.type
            ok = kind == "ok"
            log.append(
                epoch,
                names.code(record.lock),
                names.code(record.node),
                record.process,
                record.index if ok else -1,  # type: ignore[arg-type]  # set when ok
                record.time if ok else -1,  # type: ignore[arg-type]
            )
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
            spec = self._findings.spec(log.sink)
            order = f"epoch {epoch} < {peak[0]}"
            self._findings.report(
                "stale-write",
                (newer.ref("newer"), record.ref("stale"), log.read_ref(mark, "read")),
                sink=log.sink,
                key=log.key,
                lock=record.lock,
                details={
                    "fenced": spec.fenced,
                    "mitigation": spec.mitigation,
                    "positions": [newer.position, record.position],
                    "cycle": self._cycle("stale-write", log.sink, newer, record, order),
                },
            )
        latest = log.latest
        if latest is None or record.invoke_time > latest.invoke_time:
            log.latest = record
        elif record.type == "ok" and record.time is not None and latest.invoke_time > record.time:
            self._findings.report(
                "realtime-order",
                (record.ref("first"), latest.ref("second"), log.read_ref(mark, "read")),
                sink=log.sink,
                key=log.key,
                lock=record.lock,
                details={
                    "positions": [record.position, latest.position],
                    "cycle": self._cycle("realtime-order", log.sink, latest, record, "real time"),
                },
            )

    def _cycle(
        self, name: str, sink: str, earlier: WriteRecord, later: WriteRecord, should: str
    ) -> list[list[str]]:
        """The cycle between the sink's order (``earlier`` first) and the order it should
        follow (``later`` first, because of ``should``), only for evidence that is kept."""
        if not self._findings.keeps(name, sink):
            return []
        return order_cycle(((earlier.id, later.id, "sink order"), (later.id, earlier.id, should)))

    def _based_on(self, log: KeyLog, record: WriteRecord, prev: str, position: int) -> None:
        found = log.ref.rfind(f"\0{prev}\0", 0, log.offsets[position] + 1)
        if found >= 0:
            based = bisect_left(log.offsets, found)
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
        ids: list[str],
        epoch: object,
        record: WriteRecord | None,
        mark: _Mark,
    ) -> None:
        wid = ids[position]
        try:
            first = ids.index(wid, 0, position)
        except ValueError:
            first = -1
        read = log.read_ref(mark, "read")
        if first >= 0:
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
        log.append(epoch if type(epoch) is int else -1, -1, node, -1, -1, -1)

    def _diverged(self, log: KeyLog, ids: list[str], mark: _Mark) -> None:
        theirs = log.ref.split("\0")[1:-1]
        position = next(
            (at for at, (a, b) in enumerate(zip(theirs, ids, strict=False)) if a != b),
            min(len(theirs), len(ids)),
        )
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
                "reference_id": theirs[position] if position < len(theirs) else None,
                "read_id": ids[position] if position < len(ids) else None,
                "reference_entries": len(theirs),
                "read_entries": len(ids),
            },
        )

    def finish(self) -> Counter[tuple[str, str]]:
        """Judge lost writes; returns, per key, how many ``ok`` writes no read could verify."""
        unverified: Counter[tuple[str, str]] = Counter()
        for record in self._writes.pending.values():
            if record.type != "ok" or record.position is not None or record.time is None:
                continue
            log = self.logs.get((record.sink, record.key))
            last = log.last if log is not None else None
            if log is None or last is None or last.invoke_time <= record.time:
                unverified[record.sink, record.key] += 1
            elif last.ids is None or f"\0{record.id}\0" not in last.ids:
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
                if 0 <= log.ack_time[at] < last.invoke_time:
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
