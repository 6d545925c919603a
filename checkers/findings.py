"""Where the checkers report anomalies: counted or expected, per sink, evidence capped.

Every occurrence is counted; the evidence of the first ``max_evidence`` of each name is kept (a
broken run can produce hundreds of thousands of the same anomaly). Whether an occurrence counts
against the run depends on its sink's entry in the inventory (:class:`harness.record.Sink`).
Fault windows are attached at the end, when all nemesis events are known.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from checkers.faults import FaultIndex
from checkers.registry import REGISTRY, sentence
from harness.record.inventory import Sink
from harness.record.verdict import Anomaly, FaultWindow, OpRef

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

    def expects(self, name: str, sink: str | None) -> bool:
        """True if ``name`` on ``sink`` is a known weakness of an unguarded sink (the registry
        says which anomalies are), not a violation."""
        kind = REGISTRY.get(name)
        return (
            sink is not None
            and kind is not None
            and kind.expected_when_unguarded
            and self.spec(sink).unguarded
        )

    def keeps(self, name: str, sink: str | None = None) -> bool:
        """True if the next report of ``name`` on ``sink`` would keep its evidence (so costly
        details are worth computing)."""
        bucket = self.expected if self.expects(name, sink) else self.counted
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
        bucket = self.expected if self.expects(name, sink) else self.counted
        bucket.counts[name] += 1
        if sink is not None:
            bucket.by_sink.setdefault(sink, Counter())[name] += 1
        drafts = bucket.drafts.setdefault(name, [])
        if len(drafts) < self._max:
            drafts.append(_Draft(name, tuple(ops), sink, key, lock, details or {}))

    def anomalies(
        self,
        bucket: _Bucket,
        windows: tuple[FaultWindow, ...],
        lease_ttl: int | None,
        holders: Collection[str],
    ) -> dict[str, list[Anomaly]]:
        """The kept evidence of ``bucket`` as :class:`Anomaly` objects with the faults that
        could have caused them (``holders``: the nodes that ran client operations)."""
        index = FaultIndex(windows)
        out: dict[str, list[Anomaly]] = {}
        for name in sorted(bucket.drafts):
            out[name] = [
                _anomaly(draft, index, lease_ttl, holders) for draft in bucket.drafts[name]
            ]
        return out


def _anomaly(
    draft: _Draft, index: FaultIndex, lease_ttl: int | None, holders: Collection[str]
) -> Anomaly:
    # Faults on the holder of the operation that broke the property, or on the servers, in
    # force before that operation completed: nothing later can have caused it.
    kind = REGISTRY.get(draft.name)
    subject = next((op for op in draft.ops if kind is not None and op.role == kind.subject), None)
    starts = [op.start for op in draft.ops if op.start is not None]
    ends = [op.end for op in draft.ops if op.end is not None]
    faults: tuple[FaultWindow, ...] = ()
    until = (
        subject.end if subject is not None and subject.end is not None else max(ends, default=None)
    )
    if starts and until is not None:
        involved = [op.node for op in (subject,) if op is not None and op.node is not None]
        if not involved:
            involved = [op.node for op in draft.ops if op.node is not None]
        faults = index.around(min(starts), until, involved, holders)
    anomaly = Anomaly(
        draft.name,
        draft.ops,
        faults,
        draft.sink,
        draft.key,
        draft.lock,
        draft.details,
        lease_ttl,
    )
    # The sentence is rendered once, here, for the kept evidence only (capped per name).
    return replace(anomaly, explanation=sentence(anomaly))
