"""The outcome of a check: the verdict, the anomalies, per-sink verdicts, and its JSON form.

The JSON (``results.json``) is what the report renders; its shape is stable:

``valid`` (true/false/"unknown"), ``anomaly_types`` (sorted names that count against the run),
``anomalies`` (name -> evidence objects), ``anomaly_counts`` (name -> every occurrence, evidence
is capped at ``max_evidence`` per name), the same three for ``expected`` anomalies (known
weaknesses of unguarded sinks), ``unknown_reasons``, ``sinks`` (name -> per-sink verdict),
``counts``, ``faults`` (every fault window), ``lease_ttl`` (seconds or null) and ``grants``
(``grant_seq_observable``: every grant carried the lock service's own order; ``coverage``: what
the grants could not show). Each evidence
object has ``anomaly``, ``explanation``, ``sink``, ``key``, ``lock``, ``ops``, ``faults`` and
``details``; see :meth:`checkers.evidence.Anomaly.to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from checkers.evidence import Anomaly, FaultWindow

__all__ = [
    "FORMAT",
    "UNJUDGED_ACROSS_KEYS",
    "CheckResult",
    "Counts",
    "SinkVerdict",
    "Verdict",
    "seq_warning",
]

UNJUDGED_ACROSS_KEYS: Final = "stale writes across keys of this sink cannot be judged"
"""The loud warning for a fenced sink without ``seq`` (adapter check, the verdict, the report)."""


def seq_warning(fenced: bool, seq_observable: bool, accepted_writes: int) -> str | None:
    """The warning a sink's verdict carries (``None`` for none): a fenced sink that accepted
    writes without reporting ``seq`` was judged on each key alone, not across its keys."""
    if fenced and not seq_observable and accepted_writes:
        return f"{UNJUDGED_ACROSS_KEYS} (it reports no seq)"
    return None


Verdict = bool | Literal["unknown"]
FORMAT: Final = 1


@dataclass(frozen=True, slots=True)
class SinkVerdict:
    """What the check concluded about one sink.

    ``seq_observable`` is true when the sink reported ``seq`` (its acceptance order across keys),
    so stale writes were judged across keys in that order; ``coverage`` says, in words, what could
    not be observed on this sink (it does not change the verdict).
    """

    name: str
    fenced: bool
    mitigation: str
    declared: bool
    valid: Verdict
    keys: int
    accepted_writes: int
    anomalies: dict[str, int]
    expected: dict[str, int]
    unknown_keys: tuple[str, ...]
    reasons: tuple[str, ...]
    seq_observable: bool = False
    coverage: tuple[str, ...] = ()

    @property
    def warning(self) -> str | None:
        """What this sink's verdict could not judge, loudly (see :func:`seq_warning`)."""
        return seq_warning(self.fenced, self.seq_observable, self.accepted_writes)

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every field present."""
        return {
            "name": self.name,
            "fenced": self.fenced,
            "mitigation": self.mitigation,
            "declared": self.declared,
            "valid": self.valid,
            "keys": self.keys,
            "accepted_writes": self.accepted_writes,
            "anomalies": dict(sorted(self.anomalies.items())),
            "expected": dict(sorted(self.expected.items())),
            "unknown_keys": list(self.unknown_keys),
            "reasons": list(self.reasons),
            "seq_observable": self.seq_observable,
            "coverage": list(self.coverage),
        }


@dataclass(frozen=True, slots=True)
class Counts:
    """How much the history held. ``ops`` is f -> type -> count, with ``open`` for the
    operations the history ended before completing (they count as ``info``)."""

    events: int
    nemesis: int
    ops: dict[str, dict[str, int]]
    grants: int
    successful_reads: int
    accepted_writes: int
    refused_writes: int
    keys: int

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every field present."""
        return {
            "events": self.events,
            "nemesis": self.nemesis,
            "ops": self.ops,
            "grants": self.grants,
            "successful_reads": self.successful_reads,
            "accepted_writes": self.accepted_writes,
            "refused_writes": self.refused_writes,
            "keys": self.keys,
        }


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on one history.

    ``valid`` is ``True`` only when there was evidence and none of it counts against the run;
    ``"unknown"`` when there was too little to judge (``unknown_reasons`` says why); ``False``
    when an anomaly that counts was found (whatever else is unknown).
    """

    valid: Verdict
    anomalies: dict[str, list[Anomaly]]
    anomaly_counts: dict[str, int]
    expected: dict[str, list[Anomaly]]
    expected_counts: dict[str, int]
    unknown_reasons: tuple[str, ...]
    sinks: dict[str, SinkVerdict]
    counts: Counts
    faults: tuple[FaultWindow, ...]
    lease_ttl: float | None
    max_evidence: int
    grant_seq_observable: bool = False
    grant_coverage: tuple[str, ...] = ()

    @property
    def anomaly_types(self) -> list[str]:
        """The sorted names of the anomalies that count against the run."""
        return sorted(name for name, count in self.anomaly_counts.items() if count)

    @property
    def expected_types(self) -> list[str]:
        """The sorted names of the anomalies found only where the inventory expects them."""
        return sorted(name for name, count in self.expected_counts.items() if count)

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready mapping written to ``results.json`` (see the module docstring)."""
        return {
            "format": FORMAT,
            "valid": self.valid,
            "anomaly_types": self.anomaly_types,
            "anomalies": _evidence(self.anomalies),
            "anomaly_counts": dict(sorted(self.anomaly_counts.items())),
            "expected_types": self.expected_types,
            "expected": _evidence(self.expected),
            "expected_counts": dict(sorted(self.expected_counts.items())),
            "unknown_reasons": list(self.unknown_reasons),
            "sinks": {name: verdict.to_json() for name, verdict in sorted(self.sinks.items())},
            "counts": self.counts.to_json(),
            "faults": [window.to_json() for window in self.faults],
            "lease_ttl": self.lease_ttl,
            "grants": {
                "grant_seq_observable": self.grant_seq_observable,
                "coverage": list(self.grant_coverage),
            },
            "max_evidence": self.max_evidence,
        }


def _evidence(anomalies: dict[str, list[Anomaly]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [item.to_json() for item in items] for name, items in sorted(anomalies.items())}
