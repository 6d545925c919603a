"""wrongful-refusal: a fence that refused an epoch no higher epoch had overtaken.

A fence refuses an operation as ``stale-epoch`` only once it has seen a higher epoch of the lock.
So a refusal is wrongful when no operation carrying a higher epoch of that lock was invoked before
the refusal completed and could have reached a fence: none accepted (``ok``), none of unknown
outcome (``info``, or still open when the refusal came), whether write or fenced read. A ``fail``
definitely did not happen, so it raised nothing. Operations on every sink count, not only the
refusing one: several sinks may share one fence (the reference store's ``store`` and
``store-batch`` do), and an excuse too many only makes the rule miss, never accuse.

State per lock: the highest epoch settled as having possibly reached a fence, and the epochs of
the operations still open (at most one per process).
"""

from __future__ import annotations

from collections import Counter

from checkers.evidence import OpRef
from checkers.findings import Findings
from harness.history import Process

__all__ = ["FenceWatch"]


class FenceWatch:
    """Follows every operation that carries an epoch to a sink, and judges each refusal."""

    def __init__(self, findings: Findings) -> None:
        self._findings = findings
        self._settled: dict[str, int] = {}
        self._open: dict[str, Counter[int]] = {}
        self._sent: dict[Process, tuple[str, int]] = {}

    def sent(self, process: Process, lock: str, epoch: int) -> None:
        """A write or fenced read carrying ``epoch`` of ``lock`` was invoked."""
        self._sent[process] = (lock, epoch)
        opened = self._open.get(lock)
        if opened is None:
            opened = self._open[lock] = Counter()
        opened[epoch] += 1

    def done(self, process: Process, outcome: str, refused: OpRef | None) -> None:
        """The operation of ``process`` completed with ``outcome``; ``refused`` is its evidence
        when a fence refused it as stale."""
        sent = self._sent.pop(process, None)
        if sent is None:
            return
        lock, epoch = sent
        opened = self._open[lock]
        opened[epoch] -= 1
        if not opened[epoch]:
            del opened[epoch]
        if outcome != "fail":
            if epoch > self._settled.get(lock, -1):
                self._settled[lock] = epoch
        elif refused is not None:
            self._judge(lock, epoch, refused)

    def _judge(self, lock: str, epoch: int, refused: OpRef) -> None:
        highest = max((*self._open[lock], self._settled.get(lock, -1)))
        if highest > epoch:
            return
        self._findings.report(
            "wrongful-refusal",
            (refused,),
            sink=refused.sink,
            key=refused.key,
            lock=lock,
            details={"highest": highest if highest >= 0 else None},
        )
