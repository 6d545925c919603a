"""The holder side of writes: records of unresolved writes, refusals and accepted epochs.

A write's record lives only while it is unresolved: from its invoke until a read shows it (or
for ever if it failed, so that it can be caught appearing later, and until the end if it is
``ok`` or ``info`` and never shown). Rules judged here:

- **retry-after-reject**: after a write by node N with epoch e on lock L failed with
  ``stale-epoch`` (refused by the fence), N invokes another write on L with epoch e or lower.
  Only ``stale-epoch`` counts: other errors (``lease-expired``, ``not-held``) mean the holder
  refused locally and never sent it. The one exemption is an epoch granted to N after the
  refusal: writing with what the lock service just granted is not a blind retry (a bad grant is
  the lock's anomaly). Per holder and lock, the refusals kept are those no later refusal of a
  higher or equal epoch outdoes: a short staircase, epochs falling as time goes on.
- **stale-write** in real time and ``seq`` order (with :mod:`checkers.staleness`): each write
  notes, when invoked, the highest epoch acknowledged on its sink and lock; its ``ok`` value
  may carry its ``seq``.
- **epoch-reuse** (writes): accepted writes with one (lock, epoch) from two different nodes. A
  write is accepted when it completed ``ok`` or a read shows it (an ``info`` write counts as
  accepted exactly when a read shows it). Reported once per (lock, epoch).
- **phantom-write** for a write shown by a read before it completed, then ``fail`` ed.
- **stale-holder-accepted** and **current-holder-refused** (with
  :mod:`checkers.service_order`): each write notes, when invoked, whether the lock service's
  order had already given the lock to another holder at an epoch no higher than its own; its
  acceptance or refusal is then judged.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkers.findings import Findings
from checkers.grants import holder_of
from checkers.service_order import SequencedGrant, ServiceOrder
from checkers.staleness import CrossKey
from checkers.tables import EpochTable, Names
from harness.record import Event, HistoryError, Process, optional_natural
from harness.record.verdict import OpRef
from harness.record.vocabulary import STALE_EPOCH

__all__ = ["WriteChecker", "WriteRecord", "sequence_number"]


_FIELDS_FIX = (
    "every write value needs lock, sink, key (strings), id (string) and epoch (integer >= 0)"
)
_ALSO_FIX = (
    'a write spanning keys lists its other keys as "also": [{"key": K, "id": I}, ...], each id '
    "unique in the run"
)
_SEQ_FIX = "seq is the sink's acceptance order across its keys: an integer >= 0"


def sequence_number(item: dict[str, Any], line: int) -> int | None:
    """The optional ``seq`` of a write's ``ok`` value or a read entry, checked."""
    return optional_natural(item, "seq", line, _SEQ_FIX)


def _record_id(value: dict[str, object]) -> str:
    """The id of one key's write (checked a string by the caller)."""
    return value["id"]  # type: ignore[return-value]


def _parts(event: Event, value: dict[str, object], also: object) -> list[dict[str, object]]:
    """The values of a write's other keys (its ``also`` items), checked: each is the write's
    value with its own ``key`` and ``id``."""
    if not isinstance(also, list):
        raise HistoryError(event.line, "a write's also must be a list", _ALSO_FIX)
    parts = []
    for item in also:
        if not isinstance(item, dict) or not all(
            type(item.get(name)) is str for name in ("key", "id")
        ):
            raise HistoryError(event.line, "an item of a write's also lacks key or id", _ALSO_FIX)
        parts.append({**value, "key": item["key"], "id": item["id"], "prev": None})
    return parts


def _part_seqs(event: Event) -> dict[str, dict[str, object]]:
    """The ``also`` items of a completion by id: where an ``ok`` carries each item's ``seq``."""
    also = event.value.get("also")
    if not isinstance(also, list):
        return {}
    return {str(item.get("id")): item for item in also if isinstance(item, dict)}


class WriteRecord:
    """What is known of one write while it is unresolved."""

    __slots__ = (
        "accepted",
        "epoch",
        "error",
        "floor",
        "holder",
        "id",
        "index",
        "invoke_index",
        "invoke_time",
        "key",
        "line",
        "lock",
        "node",
        "position",
        "prev",
        "process",
        "seq",
        "shown_by",
        "sink",
        "superseded",
        "time",
        "type",
    )

    def __init__(self, event: Event, value: dict[str, object]) -> None:
        self.id: str = value["id"]  # type: ignore[assignment]  # checked by the caller
        self.lock: str = value["lock"]  # type: ignore[assignment]
        self.sink: str = value["sink"]  # type: ignore[assignment]
        self.key: str = value["key"]  # type: ignore[assignment]
        self.epoch: int = value["epoch"]  # type: ignore[assignment]
        prev = value.get("prev")
        self.prev: str | None = prev if isinstance(prev, str) else None
        self.node = event.node
        self.holder = holder_of(event)
        self.process: Process = event.process
        self.invoke_index = event.index
        self.invoke_time = event.time
        self.line = event.line
        self.type = "invoke"
        self.index: int | None = None
        self.time: int | None = None
        self.error: str | None = None
        self.position: int | None = None
        self.accepted = False
        self.shown_by: OpRef | None = None
        self.floor: tuple[int, OpRef] | None = None
        self.seq: int | None = None
        self.superseded: tuple[SequencedGrant, SequencedGrant] | None = None

    def ref(self, role: str) -> OpRef:
        """This write as evidence."""
        return OpRef(
            role,
            "write",
            self.type,
            self.index,
            self.time,
            self.invoke_index,
            self.invoke_time,
            self.process,
            self.node,
            self.lock,
            self.epoch,
            self.id,
            self.sink,
            self.key,
            self.error,
            self.position,
        )


class WriteChecker:
    """Tracks writes from invoke to resolution."""

    def __init__(
        self, findings: Findings, names: Names, cross: CrossKey, order: ServiceOrder
    ) -> None:
        self._findings = findings
        self._names = names
        self._cross = cross
        self._order = order
        self.pending: dict[str, WriteRecord] = {}
        self._refusals: dict[tuple[str, str], list[WriteRecord]] = {}
        self._grants: dict[tuple[str, str], tuple[int, int]] = {}
        self._accepted: dict[str, EpochTable] = {}
        self._reused: set[tuple[str, int]] = set()
        # A write spanning keys: its first id -> the records of its other keys.
        self._spans: dict[str, list[WriteRecord]] = {}
        self.sinks: set[str] = set()
        self.accepted_by_sink: Counter[str] = Counter()
        self.refused = 0
        self.accepted = 0

    def invoke(self, event: Event) -> WriteRecord:
        """A write was sent: check its fields, then whether it repeats a refused epoch."""
        value = event.value
        try:
            wid, epoch = value["id"], value["epoch"]
            fields = (wid, value["lock"], value["sink"], value["key"])
        except KeyError as missing:
            raise HistoryError(
                event.line, f"write lacks {missing.args[0]!r} in its value", _FIELDS_FIX
            ) from None
        if type(epoch) is not int or not all(type(item) is str for item in fields):
            raise HistoryError(event.line, "write value has a field of the wrong type", _FIELDS_FIX)
        if epoch < 0:
            raise HistoryError(event.line, f"write epoch {epoch} is negative", _FIELDS_FIX)
        record = self._register(event, value)
        also = value.get("also")
        if also is not None:
            self._spans[wid] = [self._register(event, part) for part in _parts(event, value, also)]
        stairs = self._refusals.get((record.holder, record.lock))
        if stairs is not None:
            self._retry(record, stairs)
        return record

    def _register(self, event: Event, value: dict[str, object]) -> WriteRecord:
        """A record for one key's write of ``event``, its id unique in the run."""
        wid = _record_id(value)
        earlier = self.pending.get(wid)
        if earlier is not None:
            raise HistoryError(
                event.line,
                f"write id {wid!r} was already used at line {earlier.line}",
                "a write's id must be unique in the run",
            )
        record = self.pending[wid] = WriteRecord(event, value)
        self.sinks.add(record.sink)
        record.floor = self._cross.floor(record.sink, record.lock)
        record.superseded = self._order.superseding(record.holder, record.lock, record.epoch)
        return record

    def _retry(self, record: WriteRecord, stairs: list[WriteRecord]) -> None:
        # The latest refusal of this epoch or a higher one is the last such step.
        refusal = next((step for step in reversed(stairs) if step.epoch >= record.epoch), None)
        if refusal is None or refusal.index is None:
            return
        grant = self._grants.get((record.holder, record.lock))
        if grant is not None and grant[0] == record.epoch and grant[1] > refusal.index:
            return
        self._findings.report(
            "retry-after-reject",
            (refusal.ref("refused"), record.ref("retry")),
            sink=record.sink,
            lock=record.lock,
            details={"granted_since": grant[0] if grant is not None else None},
        )

    def complete(self, event: Event, invoke: Event) -> list[WriteRecord]:
        """A write completed; returns its records, the first key's first and, for a write
        spanning keys, one per other key (each already resolved if a read showed it)."""
        wid = invoke.value["id"]
        record = self._complete(self.pending[wid], event, event.value)
        if record.type == "fail" and record.error == STALE_EPOCH:
            self.refused += 1
            stairs = self._refusals.setdefault((record.holder, record.lock), [])
            stairs[:] = [step for step in stairs if step.epoch > record.epoch]
            stairs.append(record)
            self._order.refused(record.holder, record.lock, record.epoch, record.ref("refused"))
        parts = self._spans.pop(wid, [])
        if parts:
            seqs = _part_seqs(event)
            for part in parts:
                self._complete(part, event, seqs.get(part.id, {}))
        return [record, *parts]

    def _complete(
        self, record: WriteRecord, event: Event, seq_from: dict[str, object]
    ) -> WriteRecord:
        """Resolve one key's write of ``event``; ``seq_from`` holds its ``seq``, if any."""
        record.type = event.type
        record.index = event.index
        record.time = event.time
        error = event.error if event.error is not None else event.value.get("error")
        record.error = error if isinstance(error, str) else None
        if event.type == "ok":
            seq = sequence_number(seq_from, event.line)
            self._cross.acknowledged(record.sink, record.lock, record.epoch, record)
            if not record.accepted:
                self.accept(record)
            if seq is not None:
                self.sequenced(record, seq)
        elif event.type == "fail" and record.shown_by is not None:
            self._findings.report(
                "phantom-write",
                (record.ref("phantom"), record.shown_by),
                sink=record.sink,
                key=record.key,
                lock=record.lock,
                details={"reason": "failed", "position": record.position, "id": record.id},
            )
        if record.position is not None:
            del self.pending[record.id]
        return record

    def granted(self, holder: str, lock: str, epoch: int, index: int) -> None:
        """``holder`` was granted ``epoch`` of ``lock`` at ``index``: writing with it is not a
        retry of what was refused before."""
        self._grants[holder, lock] = (epoch, index)

    def sequenced(self, record: WriteRecord, seq: int) -> None:
        """``record``'s seq became known (from its ``ok`` value or a read): judge it once."""
        if record.seq is None:
            record.seq = seq
            self._cross.seq(record.sink, record.lock, seq, record.epoch, record)

    def accept(self, record: WriteRecord) -> None:
        """``record`` is accepted (acknowledged or shown): check its epoch's other holders."""
        record.accepted = True
        self.accepted += 1
        self.accepted_by_sink[record.sink] += 1
        floor = record.floor
        if floor is not None and record.epoch < floor[0]:
            self._cross.stale(record.ref("stale"), floor[1], "realtime")
        if record.superseded is not None:
            self._order.accepted(record.ref("accepted"), record.superseded)
        table = self._accepted.get(record.lock)
        if table is None:
            table = self._accepted[record.lock] = EpochTable(record.lock, "write")
        node = self._names.code(record.holder)
        row = table.find(record.epoch)
        if row < 0:
            table.add(record.epoch, node, record.ref("first"))
        elif table.node(row) != node and (record.lock, record.epoch) not in self._reused:
            self._reused.add((record.lock, record.epoch))
            self._findings.report(
                "epoch-reuse",
                (table.ref(row, "first", self._names), record.ref("second")),
                sink=record.sink,
                lock=record.lock,
                details={"via": "write"},
            )
