"""wrongful-refusal: a fence that refused an epoch no higher epoch had overtaken.

A fence refuses an operation as ``stale-epoch`` only once it has seen a higher epoch of the lock,
or the same epoch from another holder when the lock service granted that epoch to two (a store
that tells holders apart refuses the second: that is the lock's ``epoch-reuse``, reported at the
grants, not a broken fence). So a refusal is wrongful when no operation carrying a higher epoch of
that lock, or (for an epoch granted twice) its epoch from another node, was invoked before the
refusal completed and could have reached a fence:
none accepted (``ok``), none of unknown outcome (``info``, or still open at the end of the
history), whether write or fenced read. A ``fail`` definitely did not happen, so it raised
nothing. Operations on every sink count, not only
the refusing one: several sinks may share one fence (the reference store's ``store`` and
``store-batch`` do), and an excuse too many only makes the rule miss, never accuse.

A refusal that only operations still in flight could excuse is *pending*: it waits for them, is
excused by the first that ends ``ok`` or ``info``, and is reported once all of them have failed.
So the verdict does not depend on whether the excuse's ``fail`` came before or after the refusal.

State per lock: the highest epoch settled as having possibly reached a fence (with the nodes that
sent it), and the epochs of the operations still open (at most one per process); per open
operation, the pending refusals it alone could still excuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from checkers.findings import Findings
from harness.record import Process
from harness.record.verdict import OpRef

__all__ = ["FenceWatch"]


@dataclass(slots=True)
class _Pending:
    """A refusal waiting for the higher-epoch operations that were in flight when it came."""

    refused: OpRef
    lock: str
    highest: int
    waiting: int
    failed: list[int] = field(default_factory=list)
    excused: bool = False


class FenceWatch:
    """Follows every operation that carries an epoch to a sink, and judges each refusal."""

    def __init__(self, findings: Findings) -> None:
        self._findings = findings
        self._settled: dict[str, int] = {}
        self._settled_by: dict[str, set[str]] = {}  # the nodes that sent each lock's settled epoch
        self._open: dict[str, dict[Process, tuple[int, str]]] = {}
        self._sent: dict[Process, str] = {}
        self._granted: dict[tuple[str, int], set[str]] = {}  # (lock, epoch) -> nodes granted it
        self._pending: dict[Process, list[_Pending]] = {}

    def sent(self, process: Process, lock: str, epoch: int, node: str) -> None:
        """A write or fenced read carrying ``epoch`` of ``lock`` was invoked by ``node``."""
        self._sent[process] = lock
        opened = self._open.get(lock)
        if opened is None:
            opened = self._open[lock] = {}
        opened[process] = (epoch, node)

    def granted(self, lock: str, epoch: int, node: str) -> None:
        """``node`` was granted ``epoch`` of ``lock`` (a second node makes it reused)."""
        self._granted.setdefault((lock, epoch), set()).add(node)

    def done(self, process: Process, outcome: str, refused: OpRef | None) -> None:
        """The operation of ``process`` completed with ``outcome``; ``refused`` is its evidence
        when a fence refused it as stale."""
        lock = self._sent.pop(process, None)
        if lock is None:
            return
        epoch, node = self._open[lock].pop(process)
        if outcome != "fail":
            settled = self._settled.get(lock, -1)
            if epoch > settled:
                self._settled[lock] = epoch
                self._settled_by[lock] = {node}
            elif epoch == settled:
                self._settled_by[lock].add(node)
        for pending in self._pending.pop(process, ()):
            self._resolve(pending, outcome, epoch)
        if outcome == "fail" and refused is not None:
            self._judge(lock, epoch, node, refused)

    def _judge(self, lock: str, epoch: int, node: str, refused: OpRef) -> None:
        settled = self._settled.get(lock, -1)
        reused = len(self._granted.get((lock, epoch), ())) > 1
        if settled > epoch or (reused and settled == epoch and self._settled_by[lock] - {node}):
            return
        opened = self._open[lock]
        higher = [
            process
            for process, (sent, by) in opened.items()
            if sent > epoch or (reused and sent == epoch and by != node)
        ]
        lower = max((sent for sent, _ in opened.values() if sent <= epoch), default=-1)
        highest = max(settled, lower)
        if not higher:
            self._report(refused, lock, highest, [])
            return
        pending = _Pending(refused, lock, highest, len(higher))
        for process in higher:
            self._pending.setdefault(process, []).append(pending)

    def _resolve(self, pending: _Pending, outcome: str, epoch: int) -> None:
        """One operation a pending refusal waits for has ended."""
        if pending.excused:
            return
        if outcome != "fail":
            pending.excused = True
            return
        pending.failed.append(epoch)
        pending.waiting -= 1
        if not pending.waiting:
            self._report(pending.refused, pending.lock, pending.highest, sorted(pending.failed))

    def _report(self, refused: OpRef, lock: str, highest: int, failed: list[int]) -> None:
        self._findings.report(
            "wrongful-refusal",
            (refused,),
            sink=refused.sink,
            key=refused.key,
            lock=lock,
            details={"highest": highest if highest >= 0 else None, "failed": failed},
        )
