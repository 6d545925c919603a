"""The holder's own evidence of its lease: grants answered after its session saw the lease end.

An acquire's ``ok`` value may carry ``lease_ended``: while the acquire was open, the holder's
session was told that its lease had ended (a keepalive answered "expired", the session lost),
``after`` nanoseconds after the request went out, and, where the service said it, ``grant_seq``:
the lock service's count of that lock's grants when it ended the lease (``docs/design.md`` §4).

**grant-after-expiry**: the grant's own ``grant_seq`` is higher than the service's sequence at
the lease's end: the service granted the lock after it had itself ended the waiter's lease
(etcd-io/etcd#11456, Jepsen's etcd 3.4.3 analysis). A grant whose ``grant_seq`` is at or below
it came first in the service's order: the lease ended after the grant, and only the reply was
late (a held or delayed packet, a paused holder); it is not counted against the service. Real
time cannot tell the two apart, so evidence without a ``grant_seq`` on both sides is not judged
and the grants' coverage says so. A service whose answer carries its sequence as of the answer
rather than as of the lease's end (a revision in a reply header) only raises the bound: it can
hide a late grant, never invent one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from checkers.findings import Findings
from harness.record import Event, HistoryError, optional_natural
from harness.record.verdict import OpRef

__all__ = ["LEASE_ENDED_FIX", "ExpiryWatch", "LeaseEnded", "lease_ended"]

LEASE_ENDED_FIX: Final = (
    'lease_ended on an acquire\'s ok value is {"after": NS >= 0, "how": "expired"|"lost", '
    '"grant_seq": G >= 0 (optional)}: when the holder\'s session was told its lease had ended'
)
HOW: Final = ("expired", "lost")
"""How a session learns its lease ended: a keepalive answered "expired", or the session lost."""


@dataclass(frozen=True, slots=True)
class LeaseEnded:
    """What the holder's session saw while it waited (the ``lease_ended`` field)."""

    after: int
    how: str
    grant_seq: int | None


def lease_ended(value: dict[str, Any], line: int) -> LeaseEnded | None:
    """The optional ``lease_ended`` of an acquire's ``ok`` value, checked."""
    raw = value.get("lease_ended")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise HistoryError(line, "lease_ended must be an object", LEASE_ENDED_FIX)
    after = optional_natural(raw, "after", line, LEASE_ENDED_FIX)
    how = raw.get("how")
    if after is None or how not in HOW:
        raise HistoryError(
            line, "lease_ended needs an integer after >= 0 and a how", LEASE_ENDED_FIX
        )
    return LeaseEnded(after, str(how), optional_natural(raw, "grant_seq", line, LEASE_ENDED_FIX))


class ExpiryWatch:
    """Judges each grant that came with its holder's evidence of a lease that had ended."""

    def __init__(self, findings: Findings) -> None:
        self._findings = findings
        self.late_replies = 0
        """Grants the service made before the lease ended, answered after: not counted."""
        self.unjudged = 0
        """Grants with evidence of an ended lease that lacked a grant_seq on either side."""

    def granted(self, event: Event, ref: OpRef, seq: int | None) -> None:
        """An ``ok`` acquire completed as ``ref`` with the service's ``seq`` (if any)."""
        ended = lease_ended(event.value, event.line)
        if ended is None:
            return
        if seq is None or ended.grant_seq is None:
            self.unjudged += 1
        elif seq <= ended.grant_seq:
            self.late_replies += 1
        else:
            self._findings.report(
                "grant-after-expiry",
                (ref.with_role("granted"),),
                lock=ref.lock,
                details={
                    "grant_seq": seq,
                    "ended_grant_seq": ended.grant_seq,
                    "ended_at": (ref.invoke_time or 0) + ended.after,
                    "how": ended.how,
                },
            )

    def coverage(self) -> tuple[str, ...]:
        """What the evidence could not show: grants after an ended lease left unjudged."""
        if not self.unjudged:
            return ()
        return (
            f"{self.unjudged} grant(s) answered after the holder's session saw its lease end "
            "carried no grant_seq (on the grant or on the lease's end): a late grant cannot be "
            "told from a late reply, so grant-after-expiry was not judged for them",
        )
