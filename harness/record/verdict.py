"""One whole verdict on a history, and its evidence: the types ``results.json`` is made of.

The checkers (:func:`checkers.check`) build a :class:`Verdict` in one pass over the history: the
verdict (``valid``: true, false or "unknown"), the anomalies with their evidence (:class:`Anomaly`,
made of the operations :class:`OpRef` and fault windows :class:`FaultWindow` involved), per-sink
verdicts (:class:`SinkVerdict`), :class:`Counts` and the run's :class:`Coverage` (what it
exercised). They live here, in the record layer, because they are the schema of ``results.json``
(written and read back by :mod:`harness.record.results`); this module imports nothing of ours but
the history's event type.

``Verdict.to_json()`` is the checker's part of ``results.json``; its shape is stable:
``valid``, ``anomaly_types`` (sorted names that count against the run), ``anomalies`` (name ->
evidence objects), ``anomaly_counts`` (name -> every occurrence; evidence is capped at
``max_evidence`` per name), the same three for ``expected`` anomalies (known weaknesses of
unguarded sinks), ``unknown_reasons``, ``sinks`` (name -> per-sink verdict), ``counts``,
``faults`` (every fault window), ``lease_ttl`` (seconds or null), ``grants``
(``grant_seq_observable``: every grant carried the lock service's own order; ``coverage``: what
the grants could not show), ``max_evidence`` and ``coverage`` (:meth:`Coverage.to_json`). Each
evidence object has ``anomaly``, ``explanation``, ``sink``, ``key``, ``lock``, ``ops``,
``faults`` and ``details`` (:meth:`Anomaly.to_json`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from harness.record.events import Event

__all__ = [
    "FORMAT",
    "UNJUDGED_ACROSS_KEYS",
    "Anomaly",
    "Counts",
    "Coverage",
    "FaultWindow",
    "OpRef",
    "SinkCoverage",
    "SinkVerdict",
    "Validity",
    "Verdict",
    "seq_warning",
]

FORMAT: Final = 1
"""The format of ``results.json`` this fencecheck writes; results without one are of format 1."""

Validity = bool | Literal["unknown"]
"""A verdict's ``valid``: ``True``, ``False`` or ``"unknown"``."""


@dataclass(frozen=True, slots=True)
class OpRef:
    """One operation as evidence: where it is in the history and what it carried.

    ``index``/``time`` are those of the completion (``ok``, ``fail``, ``info``); for an operation
    still open when the history ended they are ``None`` and ``type`` is ``"invoke"``. ``role``
    says what part the operation plays in its anomaly (``"stale"``, ``"newer"``, ``"read"``...).
    ``position`` is the write's place in its sink's order, when a read showed it.
    """

    role: str
    f: str
    type: str
    index: int | None
    time: int | None
    invoke_index: int | None = None
    invoke_time: int | None = None
    process: int | str | None = None
    node: str | None = None
    lock: str | None = None
    epoch: int | None = None
    id: str | None = None
    sink: str | None = None
    key: str | None = None
    error: str | None = None
    position: int | None = None

    @property
    def holder(self) -> str:
        """Who did it, for sentences: the node, or the process when no node was recorded."""
        if self.node is not None:
            return self.node
        return f"process {self.process}" if self.process is not None else "an unknown holder"

    @classmethod
    def completed(
        cls,
        role: str,
        event: Event,
        invoke: Event,
        *,
        lock: str | None,
        epoch: int | None,
        sink: str | None = None,
        key: str | None = None,
        error: str | None = None,
    ) -> OpRef:
        """The operation ``invoke`` began and ``event`` completed, as evidence."""
        return cls(
            role,
            event.f,
            event.type,
            event.index,
            event.time,
            invoke.index,
            invoke.time,
            event.process,
            event.node,
            lock,
            epoch,
            sink=sink,
            key=key,
            error=error,
        )

    def with_role(self, role: str) -> OpRef:
        """The same operation playing ``role``."""
        return self if role == self.role else replace(self, role=role)

    @property
    def start(self) -> int | None:
        """The earliest time known for the operation (its invoke, else its completion)."""
        return self.invoke_time if self.invoke_time is not None else self.time

    @property
    def end(self) -> int | None:
        """The latest time known for the operation (its completion, else its invoke)."""
        return self.time if self.time is not None else self.invoke_time

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every field present (``null`` when not applicable)."""
        return {
            "role": self.role,
            "f": self.f,
            "type": self.type,
            "index": self.index,
            "time": self.time,
            "invoke_index": self.invoke_index,
            "invoke_time": self.invoke_time,
            "process": self.process,
            "node": self.node,
            "lock": self.lock,
            "epoch": self.epoch,
            "id": self.id,
            "sink": self.sink,
            "key": self.key,
            "error": self.error,
            "position": self.position,
        }


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """A fault in force from ``start`` to ``end`` (ns); ``end`` is ``None`` if never stopped.

    Paired from ``start-X``/``stop-X`` nemesis events (``kind`` is ``X``); any other nemesis
    event is an instant (``start == end``). ``applied`` is false when the nemesis said the fault
    could not be applied (``"applied": false`` or an ``error`` in its value). ``parts`` are the
    faults a compound window is made of (``restart-while-paused``: the pause, then the restart).
    ``verb`` is what the history says the fault did to its targets (``"paused"``), and
    ``part_verbs`` the same for each part: histories carry them, so the checker needs no table
    of fault kinds and explains kinds it has never heard of. ``opened`` and ``closed`` are what
    the history says happened at the start and at the stop, when it says it in a sentence
    (``"l1's clock jumped 3 s forward"``), for faults a verb cannot tell.
    """

    kind: str
    targets: tuple[str, ...]
    start: int
    end: int | None
    start_index: int
    end_index: int | None
    applied: bool = True
    error: str | None = None
    parts: tuple[FaultWindow, ...] = ()
    verb: str | None = None
    part_verbs: tuple[str, ...] = ()
    opened: str | None = None
    closed: str | None = None

    def overlaps(self, start: int, end: int) -> bool:
        """True if the window was in force at some moment of ``[start, end]``."""
        return self.start <= end and (self.end is None or self.end >= start)

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every field present."""
        return {
            "kind": self.kind,
            "targets": list(self.targets),
            "start": self.start,
            "end": self.end,
            "start_index": self.start_index,
            "end_index": self.end_index,
            "applied": self.applied,
            "error": self.error,
            "parts": [part.to_json() for part in self.parts],
            "verb": self.verb,
        }


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One occurrence of a named anomaly with its evidence.

    ``details`` holds what is particular to the anomaly (positions in the sink's order, the
    ``prev`` both writes were based on, an order cycle...). ``lease_ttl`` (ns) is the run's lease
    TTL when known, quoted by explanations.
    """

    name: str
    ops: tuple[OpRef, ...]
    faults: tuple[FaultWindow, ...] = ()
    sink: str | None = None
    key: str | None = None
    lock: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    lease_ttl: int | None = None
    explanation: str = ""
    """One sentence, rendered from the evidence in Elle's manner by the checker that found it
    (``checkers.registry.sentence``); read back as stored."""

    def op(self, role: str) -> OpRef | None:
        """The operation playing ``role``, if any."""
        for op in self.ops:
            if op.role == role:
                return op
        return None

    def to_json(self) -> dict[str, Any]:
        """The evidence object of the JSON result (stable shape, see README)."""
        return {
            "anomaly": self.name,
            "explanation": self.explanation,
            "sink": self.sink,
            "key": self.key,
            "lock": self.lock,
            "ops": [op.to_json() for op in self.ops],
            "faults": [window.to_json() for window in self.faults],
            "details": dict(self.details),
        }


@dataclass(frozen=True, slots=True)
class SinkCoverage:
    """What one sink received: writes sent and accepted, distinct keys, stale attempts."""

    writes: int = 0
    accepted: int = 0
    keys: int = 0
    stale_attempts: int = 0

    def to_json(self) -> dict[str, int]:
        """The counts as JSON data."""
        return {
            "writes": self.writes,
            "accepted": self.accepted,
            "keys": self.keys,
            "stale_attempts": self.stale_attempts,
        }


@dataclass(frozen=True, slots=True)
class Coverage:
    """The situations a run created; see the module docstring for each count's meaning."""

    stops_past_lease: dict[str, int] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    epochs_granted: int = 0
    sinks: dict[str, SinkCoverage] = field(default_factory=dict)
    unreachable_nodes: dict[str, float] = field(default_factory=dict)
    lease_ttl: float | None = None
    power_losses: dict[str, int] = field(default_factory=dict)
    """``total``, ``dropped_data`` (those that dropped unsynced writes or directory entries),
    ``writes_dropped`` and ``bytes_dropped``; empty for a run without power losses."""
    clock_windows: int = 0
    clock_across_expiry: int = 0
    overlaps: dict[str, tuple[int, float]] = field(default_factory=dict)
    """By pair of kinds (``"kill+pause"``, names sorted; ``"pause+pause"`` for two pauses): how
    many times two faults were in force together, and for how many seconds in all."""

    @property
    def stale_attempts(self) -> int:
        """Stale writes attempted on every sink together."""
        return sum(sink.stale_attempts for sink in self.sinks.values())

    @property
    def keys_written(self) -> int:
        """Distinct (sink, key) pairs a write was sent to."""
        return sum(sink.keys for sink in self.sinks.values())

    def gaps(self) -> list[str]:
        """What weakens a ``valid`` verdict, one sentence each (empty when nothing does)."""
        found: list[str] = []
        if not self.stale_attempts:
            found.append("no stale write was even attempted, so no fence was tested")
        if self.lease_ttl is not None and not self.stops_past_lease:
            found.append("no holder was stopped past its lease while holding it")
        for node, share in sorted(self.unreachable_nodes.items()):
            found.append(f"{node} was unreachable for {share:.0%} of the run")
        if self.power_losses.get("total") and not self.power_losses.get("dropped_data"):
            found.append(
                f"none of the {self.power_losses['total']} power losses dropped anything: all "
                "was synced when the power went, so they tested no more than a kill"
            )
        if self.lease_ttl is not None and self.clock_windows and not self.clock_across_expiry:
            found.append(
                f"no clock fault moved a lease across its expiry ({self.clock_windows} clock "
                "windows, none shifting a held lease's clock by a TTL)"
            )
        return found

    def to_json(self) -> dict[str, Any]:
        """The coverage as the ``coverage`` section of ``results.json``."""
        return {
            "stops_past_lease": dict(sorted(self.stops_past_lease.items())),
            "stale_attempts": self.stale_attempts,
            "stale_attempts_per_sink": {
                name: sink.stale_attempts for name, sink in sorted(self.sinks.items())
            },
            "restarts": dict(sorted(self.restarts.items())),
            "epochs_granted": self.epochs_granted,
            "keys_written": self.keys_written,
            "sinks": {name: sink.to_json() for name, sink in sorted(self.sinks.items())},
            "unreachable_nodes": {
                node: round(share, 3) for node, share in sorted(self.unreachable_nodes.items())
            },
            "power_losses": dict(self.power_losses),
            "clock_windows": self.clock_windows,
            "clock_across_expiry": self.clock_across_expiry,
            "overlaps": {
                pair: {"count": count, "seconds": round(seconds, 3)}
                for pair, (count, seconds) in sorted(self.overlaps.items())
            },
            "gaps": self.gaps(),
        }


UNJUDGED_ACROSS_KEYS: Final = "stale writes across keys of this sink cannot be judged"
"""The loud warning for a fenced sink without ``seq`` (adapter check, the verdict, the report)."""


def seq_warning(fenced: bool, seq_observable: bool, accepted_writes: int) -> str | None:
    """The warning a sink's verdict carries (``None`` for none): a fenced sink that accepted
    writes without reporting ``seq`` was judged on each key alone, not across its keys."""
    if fenced and not seq_observable and accepted_writes:
        return f"{UNJUDGED_ACROSS_KEYS} (it reports no seq)"
    return None


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
    valid: Validity
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
class Verdict:
    """The verdict on one history.

    ``valid`` is ``True`` only when there was evidence and none of it counts against the run;
    ``"unknown"`` when there was too little to judge (``unknown_reasons`` says why); ``False``
    when an anomaly that counts was found (whatever else is unknown).
    """

    valid: Validity
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
    coverage: Coverage = field(default_factory=Coverage)
    """What the run exercised, counted in the same pass as the verdict (design §10)."""

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
            "coverage": self.coverage.to_json(),
        }


def _evidence(anomalies: dict[str, list[Anomaly]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [item.to_json() for item in items] for name, items in sorted(anomalies.items())}
