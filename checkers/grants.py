"""The lock side: grants must carry epochs that only go up (grant-regression, epoch-reuse).

Rules, per lock, judged in history order with constant state per lock and holder plus one compact
row per distinct epoch:

- **grant-regression**: an ``acquire`` that was invoked after another grant of the same lock had
  completed ``ok`` returns a lower or equal epoch; for an acquire whose ``ok`` says how long it
  ``waited`` (nanoseconds the service held it before the lease began), its lease began at the
  earliest at the invoke plus that, and every grant completed before then counts as earlier.
  Comparing with the highest epoch completed before then is enough: any earlier grant with a
  higher or equal epoch makes that one so.
- **epoch-reuse** (grants): an epoch granted by two different grants.
- With ``grant_seq`` on both grants, the order is the lock service's own and
  :mod:`checkers.service_order` judges it instead of real time.
- **grant-after-expiry**: a grant answered after the holder's own session saw its lease end,
  which the service's order places after that end (:mod:`checkers.expiry`).
- **re-entry** is one grant, not two: the same node acquiring again and receiving the same epoch
  (and the same ``grant_seq``, where both grants carry one) while its grant stands, i.e. no
  ``release`` of that lock by that node had completed ``ok`` when the re-acquire was invoked
  (Hazelcast's FencedLock keeps the token on re-entry). It is judged against higher epochs
  only: another holder's grant of the same epoch is an epoch-reuse already, whichever of the two
  completed first. The grant is judged as it stood at the invoke, because a release that
  completes while the re-acquire waits may have been applied after it. Lease expiry is not
  used: renewals happen inside the lock client and leave no trace in the history, so an expiry
  cannot be told from a renewal. An ``info`` release might not have happened and so does not
  end the grant.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, replace

from checkers.expiry import ExpiryWatch
from checkers.findings import Findings
from checkers.service_order import ServiceOrder, grant_sequence
from checkers.tables import EpochTable, Names
from harness.record import Event, HistoryError, Process, optional_natural
from harness.record.verdict import OpRef

__all__ = ["GrantChecker", "holder_of"]


def holder_of(event: Event) -> str:
    """A holder's identity: its node, or its process when the event names no node."""
    return event.node if event.node is not None else f"process {event.process}"


@dataclass(slots=True)
class _Grant:
    ref: OpRef
    epoch: int
    released: bool = False
    seq: int | None = None


class _Lock:
    __slots__ = ("best", "best_times", "bests", "holders", "table")

    def __init__(self, name: str) -> None:
        self.best: _Grant | None = None
        self.holders: dict[str, _Grant] = {}
        self.table = EpochTable(name, "acquire")
        # Each time the best grant rose: when it completed, and the grant (one per new best).
        self.best_times: list[int] = []
        self.bests: list[_Grant] = []

    def best_before(self, time: int) -> _Grant | None:
        """The best grant completed before ``time``."""
        at = bisect_left(self.best_times, time)
        return self.bests[at - 1] if at else None


class GrantChecker:
    """Judges ``acquire`` and ``release`` operations."""

    def __init__(
        self, findings: Findings, names: Names, order: ServiceOrder, expiry: ExpiryWatch
    ) -> None:
        self._findings = findings
        self._names = names
        self._order = order
        self._expiry = expiry
        self._locks: dict[str, _Lock] = {}
        # Per open acquire: the best grant completed before it and its holder's standing grant.
        self._waiting: dict[Process, tuple[_Grant | None, _Grant | None]] = {}
        self.grants = 0

    def invoke(self, event: Event) -> None:
        """An acquire began: remember the best grant completed so far, to compare with."""
        state = self._state(self.lock_of(event, event))
        own = state.holders.get(holder_of(event))
        self._waiting[event.process] = (state.best, own if own and not own.released else None)

    def complete(self, event: Event, invoke: Event) -> bool:
        """An acquire completed; returns True if it granted the lock."""
        before, standing = self._waiting.pop(event.process, (None, None))
        if event.type != "ok":
            return False
        self.grants += 1
        lock = self.lock_of(event, invoke)
        epoch = event.value.get("epoch")
        if type(epoch) is not int or epoch < 0:
            raise HistoryError(
                event.line,
                "an ok acquire must carry an integer epoch >= 0 in its value",
                'write it as "value": {"lock": ..., "epoch": N}',
            )
        state = self._state(lock)
        holder = holder_of(event)
        seq = grant_sequence(event.value, event.line)
        began = _lease_start(event, invoke)
        if began is not None:
            # The lease began later than the acquire: grants completed meanwhile came first.
            before = state.best_before(began) or before
        # Where the service orders its grants, a re-entry is the same grant there too: the same
        # epoch under another grant_seq is a new grant, and a reuse of the epoch.
        reentry = (
            standing is not None
            and standing.epoch == epoch
            and (seq is None or standing.seq is None or standing.seq == seq)
        )
        ref = OpRef.completed("later", event, invoke, lock=lock, epoch=epoch)
        self._expiry.granted(event, ref, seq)
        if seq is not None:
            self._order.granted(lock, holder, seq, epoch, ref, reentry=reentry)
        # Two grants in the service's order are judged there; real time judges the others.
        # A re-entry is its standing grant again, judged only against higher epochs: another
        # holder's grant of the same epoch is epoch-reuse, whichever of the two completed first.
        if (
            before is not None
            and epoch <= before.epoch
            and not (reentry and before.epoch == epoch)
            and (seq is None or before.seq is None)
        ):
            self._findings.report(
                "grant-regression",
                (replace(before.ref, role="earlier"), ref),
                lock=lock,
                details={"lease_began": began} if began is not None else None,
            )
        row = state.table.find(epoch)
        if row < 0:
            state.table.add(epoch, self._names.code(event.node), ref)
        elif not reentry:
            first = state.table.ref(row, "first", self._names)
            self._findings.report(
                "epoch-reuse",
                (first, replace(ref, role="second")),
                lock=lock,
                details={"via": "grant"},
            )
        grant = standing if reentry and standing is not None else _Grant(ref, epoch, seq=seq)
        grant.released = False  # a re-entry granted while a release was in flight holds again
        state.holders[holder] = grant
        if state.best is None or epoch > state.best.epoch:
            state.best = grant
            state.best_times.append(event.time)
            state.bests.append(grant)
        return True

    def released(self, event: Event, invoke: Event) -> None:
        """A release completed: an ``ok`` one ends the node's grant."""
        if event.type != "ok":
            return
        grant_sequence(event.value, event.line)  # its place in the service's order, if given
        state = self._locks.get(self.lock_of(event, invoke))
        grant = state.holders.get(holder_of(event)) if state is not None else None
        if grant is not None:
            grant.released = True

    def _state(self, lock: str) -> _Lock:
        state = self._locks.get(lock)
        if state is None:
            state = self._locks[lock] = _Lock(lock)
        return state

    @staticmethod
    def lock_of(event: Event, invoke: Event) -> str:
        """The lock an acquire or release is about (from the completion, else the invoke)."""
        lock = event.value.get("lock", invoke.value.get("lock"))
        if not isinstance(lock, str):
            raise HistoryError(
                event.line,
                f"{event.f} needs the lock's name in its value",
                'write it as "value": {"lock": "L", ...}',
            )
        return lock


_WAITED_FIX = (
    "waited is how long the lock service held the acquire before the lease began: integer "
    "nanoseconds >= 0 on the acquire's ok value"
)


def _lease_start(event: Event, invoke: Event) -> int | None:
    """When the lease of an ``ok`` acquire began at the earliest: its invoke plus the ``waited``
    the lock service reported (the service counts from when the request reached it, which is
    no earlier than the invoke), never after the reply. ``None`` without ``waited``."""
    waited = optional_natural(event.value, "waited", event.line, _WAITED_FIX)
    return None if waited is None else min(invoke.time + waited, event.time)
