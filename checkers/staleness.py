"""stale-write across keys: real time and the sink's own ``seq`` order, per sink and lock.

The property is "no accepted write carries an epoch lower than an earlier accepted one", per sink
and lock, whatever the key. Three orders can show "earlier"; each stale write is reported once,
by the first that shows it:

- **key order** (judged in :mod:`checkers.logs`): before it in one key's read.
- **real time**: a write to the same sink and lock, acknowledged before this one was invoked. The
  highest acknowledged epoch per sink and lock is kept, and each write notes it when invoked.
- **seq order**: before it in the sink's acceptance order across keys (history format v1's
  optional ``seq`` on read entries and on a write's ``ok`` value). Per sink and lock, each epoch's
  span of seqs is kept; in a valid history the spans follow epoch order without overlapping, so a
  new seq is compared with the neighbouring epochs' spans only: memory per epoch, time
  O(log epochs) per write.

Real time alone cannot see a stale write invoked before its holder's pause: it overlaps the newer
holder's writes. Only ``seq`` settles those across keys; a sink without it leaves them unobservable
(its verdict says so).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from typing import Any, Protocol

from checkers.cycles import order_cycle
from checkers.findings import Findings
from harness.record.verdict import OpRef

__all__ = ["CrossKey", "Referable", "Stamped"]

_STALE = "stale-write"


class Referable(Protocol):
    """Anything that can be evidence: a write's record."""

    def ref(self, role: str) -> OpRef:
        """This operation as evidence, playing ``role``."""
        ...


class Stamped:
    """A write as the seq rule keeps it: the ends of each epoch's span of seqs."""

    __slots__ = ("seq", "write")

    def __init__(self, seq: int, write: Referable) -> None:
        self.seq = seq
        self.write = write


class _Spans:
    """Per sink and lock: epoch -> [lowest, highest] seq accepted with it."""

    __slots__ = ("epochs", "spans")

    def __init__(self) -> None:
        self.epochs: list[int] = []
        self.spans: dict[int, list[Stamped]] = {}


class CrossKey:
    """Judges stale writes in real time and seq order; reports every stale write once."""

    def __init__(self, findings: Findings) -> None:
        self._findings = findings
        self._acked: dict[tuple[str, str], tuple[int, OpRef]] = {}
        self._spans: dict[tuple[str, str], _Spans] = {}
        self._reported: set[str] = set()
        self.sequenced: set[str] = set()

    def floor(self, sink: str, lock: str) -> tuple[int, OpRef] | None:
        """The highest epoch acknowledged so far on ``sink`` for ``lock``, with its write: a
        write invoked now must not be accepted with a lower one."""
        return self._acked.get((sink, lock))

    def acknowledged(self, sink: str, lock: str, epoch: int, write: Referable) -> None:
        """A write completed ``ok``: raise the sink's acknowledged epoch for ``lock``."""
        place = (sink, lock)
        peak = self._acked.get(place)
        if peak is None or epoch > peak[0]:
            self._acked[place] = (epoch, write.ref("newer"))

    def seq(self, sink: str, lock: str, seq: int, epoch: int, write: Referable) -> None:
        """A write's place in ``sink``'s order across keys is known: judge it against the
        neighbouring epochs' spans."""
        self.sequenced.add(sink)
        spans = self._spans.get((sink, lock))
        if spans is None:
            spans = self._spans[sink, lock] = _Spans()
        epochs = spans.epochs
        at = len(epochs) - 1 if epochs and epochs[-1] == epoch else bisect_left(epochs, epoch)
        known = at < len(epochs) and epochs[at] == epoch
        above = at + 1 if known else at
        if above < len(epochs):
            newer = spans.spans[epochs[above]][0]
            if newer.seq < seq:
                self.stale(
                    write.ref("stale"), newer.write.ref("newer"), "seq", seqs=[newer.seq, seq]
                )
                return  # kept out of the spans, so they stay ordered for what follows
        if at > 0:
            older = spans.spans[epochs[at - 1]][1]
            if older.seq > seq:
                self.stale(
                    older.write.ref("stale"), write.ref("newer"), "seq", seqs=[seq, older.seq]
                )
        stamp = Stamped(seq, write)
        if not known:
            insort(epochs, epoch)
            spans.spans[epoch] = [stamp, stamp]
            return
        span = spans.spans[epoch]
        if seq < span[0].seq:
            span[0] = stamp
        elif seq > span[1].seq:
            span[1] = stamp

    def stale(
        self,
        stale: OpRef,
        newer: OpRef,
        rule: str,
        *,
        also: Iterable[OpRef] = (),
        **details: Any,
    ) -> None:
        """Report ``stale`` (accepted after ``newer`` by ``rule``), once per write."""
        if stale.id is None or stale.id in self._reported:
            return
        self._reported.add(stale.id)
        sink = stale.sink
        spec = self._findings.spec(sink or "")
        facts: dict[str, Any] = {
            "fenced": spec.fenced,
            "mitigation": spec.mitigation,
            "rule": rule,
            **details,
        }
        if rule != "realtime" and self._findings.keeps(_STALE, sink):
            order = "sink order" if rule == "key order" else "seq order"
            facts["cycle"] = _cycle(newer, stale, order)
        self._findings.report(
            _STALE,
            (newer.with_role("newer"), stale.with_role("stale"), *also),
            sink=sink,
            key=stale.key,
            lock=stale.lock,
            details=facts,
        )


def _cycle(newer: OpRef, stale: OpRef, order: str) -> list[list[str]]:
    epochs = f"epoch {stale.epoch} < {newer.epoch}"
    first, second = newer.id or "", stale.id or ""
    return order_cycle(((first, second, order), (second, first, epochs)))
