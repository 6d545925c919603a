"""The lock service's own order of grants (``grant_seq``), and what it says about holders.

An acquire's ``ok`` may carry ``grant_seq``: the lock service's own order of the grants of that
lock (a commit sequence, a revision, a zxid, the reference lock server's grant counter). A holder
that waits for a lock is one long ``acquire``, so its grant overlaps every other grant in real
time and real time alone cannot order them; the service's sequence can. Rules, per lock, judged
among the grants that carry ``grant_seq``:

- **grant-regression** (in ``grant_seq`` order): a grant that the service's order places after
  another carries a lower or equal epoch, whatever the real-time overlap. Grants are kept sorted
  by ``grant_seq`` (binary search; they mostly arrive in order), and each new one is compared with
  its neighbours: while the order is consistent, the one before holds the highest lower epoch and
  the one after the lowest higher one. A re-entry (the holder's standing grant again) is not a
  new grant.
- **stale-holder-accepted**: a write accepted from a holder whose grant the service's order places
  before another holder's grant completed before the write was sent, with an epoch at or above
  that later grant's (any such grant, not only the latest): tokens ran against the lease order,
  so no fence could refuse it. A write with a lower epoch is the fence's to refuse, and
  ``stale-write`` judges it.
- **current-holder-refused**: a write refused as stale from the holder whose grant is the latest
  in the service's order among the grants completed before the refusal, sent with that grant's
  epoch: the fence saw a higher epoch that only an earlier grant can have carried.

Without ``grant_seq`` these rules have nothing to judge; the result's coverage says so, as it says
so for a sink without ``seq``.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, replace
from typing import Any

from checkers.findings import Findings
from harness.record import optional_natural
from harness.record.verdict import OpRef

__all__ = ["GRANT_SEQ_FIX", "SequencedGrant", "ServiceOrder", "grant_sequence"]

GRANT_SEQ_FIX = (
    "grant_seq is the lock service's own order of the grants of a lock: an integer >= 0 on an "
    "acquire's ok value"
)


def grant_sequence(value: dict[str, Any], line: int) -> int | None:
    """The optional ``grant_seq`` of an acquire's (or release's) ``ok`` value, checked."""
    return optional_natural(value, "grant_seq", line, GRANT_SEQ_FIX)


@dataclass(frozen=True, slots=True)
class SequencedGrant:
    """One grant with its place in the lock service's order."""

    seq: int
    epoch: int
    holder: str
    ref: OpRef


class _LockOrder:
    __slots__ = ("grants", "latest", "seqs")

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.grants: list[SequencedGrant] = []
        self.latest: SequencedGrant | None = None


class ServiceOrder:
    """Follows the grants that carry ``grant_seq`` and judges holders by that order."""

    def __init__(self, findings: Findings) -> None:
        self._findings = findings
        self._locks: dict[str, _LockOrder] = {}
        self._held: dict[tuple[str, str], SequencedGrant] = {}
        self.sequenced = 0
        """How many grants carried ``grant_seq``."""

    def granted(
        self, lock: str, holder: str, seq: int, epoch: int, ref: OpRef, *, reentry: bool
    ) -> None:
        """A grant with ``grant_seq`` ``seq`` completed; judge its place in the service's order."""
        self.sequenced += 1
        order = self._locks.get(lock)
        if order is None:
            order = self._locks[lock] = _LockOrder()
        grant = SequencedGrant(seq, epoch, holder, ref)
        self._held[holder, lock] = grant
        if order.latest is None or seq > order.latest.seq:
            order.latest = grant
        if reentry:
            return
        seqs = order.seqs
        at = bisect_left(seqs, seq)
        if at > 0 and order.grants[at - 1].epoch >= epoch:
            self._regressed(lock, order.grants[at - 1], grant)
        if at < len(seqs):
            after = order.grants[at]
            if after.seq == seq or after.epoch <= epoch:
                self._regressed(lock, grant, after)
        seqs.insert(at, seq)
        order.grants.insert(at, grant)

    def _regressed(self, lock: str, earlier: SequencedGrant, later: SequencedGrant) -> None:
        self._findings.report(
            "grant-regression",
            (replace(earlier.ref, role="earlier"), replace(later.ref, role="later")),
            lock=lock,
            details={"order": "grant_seq", "grant_seqs": [earlier.seq, later.seq]},
        )

    def superseding(
        self, holder: str, lock: str, epoch: int
    ) -> tuple[SequencedGrant, SequencedGrant] | None:
        """For a write sent now by ``holder`` with ``epoch``: the holder's grant and another
        holder's grant completed so far that the service's order places later with an epoch at
        or below the write's (no fence could refuse it); else ``None``.

        The grants after the holder's own are scanned from the latest back: a holder writes under
        a recent grant, so there are few (a holder superseded many times over costs one step per
        grant since)."""
        own = self._held.get((holder, lock))
        order = self._locks.get(lock)
        if own is None or order is None or order.latest is None or order.latest.seq <= own.seq:
            return None
        grants = order.grants
        for at in range(len(grants) - 1, -1, -1):
            later = grants[at]
            if later.seq <= own.seq:
                break
            if later.holder != holder and later.epoch <= epoch:
                return own, later
        return None

    def refused(self, holder: str, lock: str, epoch: int, refused: OpRef) -> None:
        """A write of ``holder`` with ``epoch`` was refused as stale: wrong if the holder's grant
        of that epoch is the latest in the service's order."""
        own = self._held.get((holder, lock))
        order = self._locks.get(lock)
        if own is None or order is None or order.latest is not own or own.epoch != epoch:
            return
        self._findings.report(
            "current-holder-refused",
            (refused, replace(own.ref, role="grant")),
            sink=refused.sink,
            key=refused.key,
            lock=lock,
            details={"grant_seq": own.seq},
        )

    def accepted(self, write: OpRef, superseded: tuple[SequencedGrant, SequencedGrant]) -> None:
        """A write :meth:`superseding` flagged when it was sent was accepted."""
        own, later = superseded
        self._findings.report(
            "stale-holder-accepted",
            (
                write.with_role("accepted"),
                replace(own.ref, role="superseded"),
                replace(later.ref, role="later"),
            ),
            sink=write.sink,
            key=write.key,
            lock=write.lock,
            details={"grant_seqs": [own.seq, later.seq]},
        )
