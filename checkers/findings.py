"""Where the checkers report anomalies: counted or expected, per sink, evidence capped.

Every occurrence is counted; the evidence of the first ``max_evidence`` of each name is kept (a
broken run can produce hundreds of thousands of the same anomaly). Whether an occurrence counts
against the run depends on its sink's entry in the inventory (:class:`harness.history.Sink`).
Fault windows are attached at the end, when all nemesis events are known.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from checkers.evidence import Anomaly, FaultWindow, OpRef
from checkers.faults import FaultIndex
from harness.history.inventory import Sink

__all__ = ["DEFAULT_MAX_EVIDENCE", "FENCED", "Findings"]

DEFAULT_MAX_EVIDENCE = 100
FENCED = Sink("", fenced=True)


@dataclass(frozen=True, slots=True)
class _Draft:
    name: str
    ops: tuple[OpRef, ...]
    sink: str | None
    key: str | None
    lock: str | None
    details: Mapping[str, Any]


@dataclass
class _Bucket:
    counts: Counter[str] = field(default_factory=Counter)
    by_sink: dict[str, Counter[str]] = field(default_factory=dict)
    drafts: dict[str, list[_Draft]] = field(default_factory=dict)


class Findings:
    """Collects anomaly reports from every checker."""

    def __init__(self, inventory: Mapping[str, Sink], max_evidence: int) -> None:
        self._inventory = inventory
        self._max = max_evidence
        self.counted = _Bucket()
        self.expected = _Bucket()

    def spec(self, sink: str) -> Sink:
        """The sink's inventory entry; a sink missing from it counts as fenced."""
        return self._inventory.get(sink, FENCED)

    def keeps(self, name: str, sink: str | None = None) -> bool:
        """True if the next report of ``name`` on ``sink`` would keep its evidence (so costly
        details are worth computing)."""
        bucket = (
            self.expected if sink is not None and self.spec(sink).expects(name) else self.counted
        )
        return len(bucket.drafts.get(name, ())) < self._max

    def report(
        self,
        name: str,
        ops: Iterable[OpRef],
        *,
        sink: str | None = None,
        key: str | None = None,
        lock: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Record one occurrence of anomaly ``name``."""
        expected = sink is not None and self.spec(sink).expects(name)
        bucket = self.expected if expected else self.counted
        bucket.counts[name] += 1
        if sink is not None:
            bucket.by_sink.setdefault(sink, Counter())[name] += 1
        drafts = bucket.drafts.setdefault(name, [])
        if len(drafts) < self._max:
            drafts.append(_Draft(name, tuple(ops), sink, key, lock, details or {}))

    def anomalies(
        self, bucket: _Bucket, windows: tuple[FaultWindow, ...], lease_ttl: int | None
    ) -> dict[str, list[Anomaly]]:
        """The kept evidence of ``bucket`` as :class:`Anomaly` objects with their faults."""
        index = FaultIndex(windows)
        out: dict[str, list[Anomaly]] = {}
        for name in sorted(bucket.drafts):
            out[name] = [_anomaly(draft, index, lease_ttl) for draft in bucket.drafts[name]]
        return out


def _anomaly(draft: _Draft, index: FaultIndex, lease_ttl: int | None) -> Anomaly:
    starts = [op.start for op in draft.ops if op.start is not None]
    ends = [op.end for op in draft.ops if op.end is not None]
    faults: tuple[FaultWindow, ...] = ()
    if starts and ends:
        nodes = [op.node for op in draft.ops if op.node is not None]
        faults = index.around(min(starts), max(ends), nodes)
    return Anomaly(
        draft.name,
        draft.ops,
        faults,
        draft.sink,
        draft.key,
        draft.lock,
        draft.details,
        lease_ttl,
    )
