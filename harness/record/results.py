"""What ``results.json`` holds, typed: its one writer and its one reader.

The checker's one :class:`~harness.record.verdict.Verdict` (with the coverage counted in the
same pass) and how the run ended (interrupted, broken off, parts lost) are written together,
once per run, by :func:`results_json`. Everything that reads a verdict back (the run browser,
JUnit, ``run-all``, the matrix's expectations, the pytest plugin, ``analyze``, the report) reads it
through :meth:`StoredResults.from_json`, which checks the fields it types and names the one at
fault, and refuses a ``format`` newer than this fencecheck writes (:func:`check_format`). The
report too draws only typed fields (the evidence, the sinks, the coverage); the whole mapping
(:attr:`StoredResults.data`) is kept for tools that rewrite the file (tests, benches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from harness.record.verdict import FORMAT, FaultWindow, OpRef, Verdict

__all__ = [
    "Interruption",
    "Outcome",
    "StoredCoverage",
    "StoredEvidence",
    "StoredOverlap",
    "StoredResults",
    "StoredSink",
    "StoredSinkCoverage",
    "check_format",
    "control_note",
    "outcome_of",
    "results_json",
]

Outcome = Literal["valid", "invalid", "unknown"]
_STALE: Final = "stale-write"


@dataclass(frozen=True, slots=True)
class Interruption:
    """Which signal stopped a run, when (ISO 8601), and during which phase."""

    signal: str
    at: str
    phase: str

    def to_json(self) -> dict[str, str]:
        """The interruption as JSON data."""
        return {"signal": self.signal, "at": self.at, "phase": self.phase}

    def describe(self) -> str:
        """``"interrupted by SIGINT at … during the workload"``."""
        return f"interrupted by {self.signal} at {self.at} during {self.phase}"


def check_format(name: str, data: Mapping[str, Any], newest: int) -> None:
    """Refuse run file ``name`` when its ``format`` is newer than ``newest`` (this fencecheck
    would misread it), naming both and the fix; a file without one is of format 1."""
    found = data.get("format", 1)
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise ValueError(f"{name}: format must be a whole number >= 1, got {found!r}")
    if found > newest:
        raise ValueError(
            f"{name} has format {found}, newer than this fencecheck reads ({newest}): "
            "upgrade fencecheck to read it"
        )


def outcome_of(valid: object) -> Outcome:
    """The outcome a ``valid`` field stands for: ``true`` valid, ``false`` invalid, anything else
    (``"unknown"``, missing) unknown."""
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


def control_note(why: str) -> str:
    """What a control run's verdict says beside it (``why``: its planted bug could not show):
    the run did not test that bug, whatever its verdict."""
    return (
        f"A control run (--control): {why}; it could not have exposed that bug, so its verdict "
        "does not say whether the system has it"
    )


def results_json(
    verdict: Verdict,
    *,
    notes: Sequence[str] = (),
    finished: bool = True,
    interrupted: Interruption | None = None,
    run_error: str | None = None,
    lost: Sequence[str] = (),
    control: str | None = None,
) -> dict[str, Any]:
    """``results.json``'s content: ``verdict`` (its coverage inside), what reading the history
    found (``notes``: a torn last line), how the run ended (``finished`` false for a run whose
    process died before its check, the signal that ``interrupted`` it, the error it broke off
    with, the parts ``lost`` in its final reads) and, for a control run, why its planted bug
    could not show (``control``, said as :func:`control_note`)."""
    data = verdict.to_json()
    if control is not None:
        data["control"] = control_note(control)
    if notes:
        data["notes"] = list(notes)
    if not finished:
        data["never_finished"] = True
    if interrupted is not None:
        data["interrupted"] = interrupted.to_json()
    if run_error:
        data["run_error"] = run_error
    if lost:
        data["lost"] = list(lost)
    return data


@dataclass(frozen=True, slots=True)
class StoredSink:
    """One sink's verdict as stored: whether it is fenced, and what it showed."""

    name: str
    fenced: bool
    verdict: Outcome
    anomalies: Mapping[str, int]
    expected: Mapping[str, int]
    mitigation: str | None = None
    """What protects it when it is not fenced (the checker's reading of the inventory)."""
    accepted_writes: int | None = None
    seq_observable: bool = False
    """The sink reports the order it applied writes in (``seq``)."""
    reasons: tuple[str, ...] = ()
    """Why its verdict is unknown, when it is."""
    declared: bool = True
    """False for a sink the checker saw that the inventory does not declare."""

    @property
    def stale_accepted(self) -> bool:
        """A stale write was accepted here, counted against the run or expected."""
        return bool(self.anomalies.get(_STALE, 0) or self.expected.get(_STALE, 0))


@dataclass(frozen=True, slots=True)
class StoredEvidence:
    """One kept piece of evidence of an anomaly: its words, the operations and the faults behind
    it (read back into the checker's own types) and the sink it is about."""

    name: str
    expected: bool
    """Found on a sink that cannot check epochs: not counted against the verdict."""
    explanation: str
    ops: tuple[OpRef, ...]
    faults: tuple[FaultWindow, ...]
    sink: str | None


@dataclass(frozen=True, slots=True)
class StoredOverlap:
    """A pair of fault kinds in force together: how often and for how long in all."""

    count: int | None
    seconds: float | None


@dataclass(frozen=True, slots=True)
class StoredSinkCoverage:
    """What one sink saw: writes sent, accepted, keys written, stale writes attempted."""

    writes: int | None
    accepted: int | None
    keys: int | None
    stale_attempts: int | None


@dataclass(frozen=True, slots=True)
class StoredCoverage:
    """The ``coverage`` section: its numbers by name and the gaps that weaken a valid verdict.

    The typed fields are the ones the report shows; :attr:`numbers` keeps every number for
    ``--json`` and :meth:`count` (the matrix's ``min_coverage``).
    """

    numbers: Mapping[str, Any]
    gaps: tuple[str, ...]
    stale_attempts: int = 0
    epochs_granted: int = 0
    keys_written: int = 0
    clock_windows: int = 0
    clock_across_expiry: int = 0
    stops_past_lease: Mapping[str, object] = field(default_factory=dict)
    """Per fault kind: holders stopped past their lease."""
    restarts: Mapping[str, object] = field(default_factory=dict)
    power_losses: Mapping[str, object] = field(default_factory=dict)
    unreachable_nodes: Mapping[str, object] = field(default_factory=dict)
    overlaps: Mapping[str, StoredOverlap] = field(default_factory=dict)
    """Per pair of kinds (``kill+pause``): how often and how long they were in force together."""
    sinks: Mapping[str, StoredSinkCoverage] = field(default_factory=dict)

    def count(self, name: str) -> int | None:
        """The headline number ``name`` (a per-kind or per-role count summed); ``None`` when the
        section has no such number."""
        raw = self.numbers.get(name)
        if isinstance(raw, Mapping):
            raw = sum(value for value in raw.values() if _is_int(value))
        return raw if _is_int(raw) else None


@dataclass(frozen=True, slots=True)
class StoredResults:
    """``results.json`` read back (see the module documentation)."""

    valid: Outcome
    anomaly_types: tuple[str, ...]
    expected_types: tuple[str, ...]
    explanations: tuple[str, ...]
    unknown_reasons: tuple[str, ...]
    operations: int | None
    sinks: tuple[StoredSink, ...]
    coverage: StoredCoverage | None
    interrupted: Interruption | None
    run_error: str | None
    lost: tuple[str, ...]
    data: Mapping[str, Any]
    """The file's whole mapping: no product module reads it (each field above is typed)."""
    notes: tuple[str, ...] = ()
    """What reading the history found beside its events (a torn last line)."""
    never_finished: bool = False
    """The run's record was never finished: its process died before its check."""
    evidence: tuple[StoredEvidence, ...] = ()
    """Every kept piece of evidence, the counted anomalies' first, then the expected ones."""
    anomaly_counts: Mapping[str, int] = field(default_factory=dict)
    """How many of each anomaly were found (more than the evidence kept, sometimes)."""
    expected_counts: Mapping[str, int] = field(default_factory=dict)
    control: str | None = None
    """A control run's note (:func:`control_note`): it could not have exposed its planted bug."""

    @property
    def gaps(self) -> tuple[str, ...]:
        """What weakens a valid verdict (none when the run has no coverage section)."""
        return self.coverage.gaps if self.coverage is not None else ()

    @classmethod
    def from_json(cls, data: object) -> StoredResults:
        """Read ``results.json``'s content; raises ``ValueError`` naming the field at fault.

        Results written before a field existed still load: what they lack takes its default.
        """
        if not isinstance(data, Mapping):
            raise ValueError("results.json is not a JSON object")
        check_format("results.json", data, FORMAT)
        reader = _Reader(data)
        valid = data.get("valid")
        outcome = outcome_of(valid)
        expected = set(reader.names("expected_types"))
        expected.update(name for name, items in reader.mapping("expected").items() if items)
        stopped = reader.mapping("interrupted")
        anomalies, expected_evidence = reader.mapping("anomalies"), reader.mapping("expected")
        return cls(
            valid=outcome,
            anomaly_types=reader.names("anomaly_types"),
            expected_types=tuple(sorted(expected)),
            explanations=_explanations(anomalies),
            unknown_reasons=reader.names("unknown_reasons"),
            operations=_operations(reader.mapping("counts")),
            sinks=tuple(_sink(str(name), row) for name, row in reader.mapping("sinks").items()),
            coverage=_coverage(data["coverage"])
            if isinstance(data.get("coverage"), Mapping)
            else None,
            interrupted=(
                Interruption(
                    str(stopped.get("signal", "")),
                    str(stopped.get("at", "")),
                    str(stopped.get("phase", "")),
                )
                if stopped
                else None
            ),
            run_error=reader.text("run_error"),
            lost=reader.names("lost"),
            data=data,
            notes=reader.names("notes"),
            never_finished=data.get("never_finished") is True,
            evidence=_evidence(anomalies, False) + _evidence(expected_evidence, True),
            anomaly_counts=_counts(reader.mapping("anomaly_counts")),
            expected_counts=_counts(reader.mapping("expected_counts")),
            control=reader.text("control"),
        )


class _Reader:
    """Typed fields of one JSON object; a field of the wrong type is a ``ValueError``."""

    def __init__(self, data: Mapping[str, Any], where: str = "results.json") -> None:
        self.data = data
        self.where = where

    def names(self, key: str) -> tuple[str, ...]:
        raw = self.data.get(key)
        if raw is None:
            return ()
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise ValueError(f"{self.where}: {key} must be a list of strings")
        return tuple(raw)

    def mapping(self, key: str) -> Mapping[str, Any]:
        raw = self.data.get(key)
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            raise ValueError(f"{self.where}: {key} must be an object")
        return raw

    def text(self, key: str) -> str | None:
        raw = self.data.get(key)
        return str(raw) if raw else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _explanations(anomalies: Mapping[str, Any]) -> tuple[str, ...]:
    lines: list[str] = []
    for name, evidence in anomalies.items():
        for item in evidence if isinstance(evidence, list) else ():
            text = item.get("explanation") if isinstance(item, Mapping) else None
            lines.append(f"{name}: {text}" if text else str(name))
    return tuple(lines)


def _operations(counts: Mapping[str, Any]) -> int | None:
    ops = counts.get("ops")
    if not isinstance(ops, Mapping):
        return None
    total = 0
    for per_type in ops.values():
        invoked = per_type.get("invoke") if isinstance(per_type, Mapping) else None
        total += invoked if isinstance(invoked, int) and not isinstance(invoked, bool) else 0
    return total


def _counts(raw: object) -> Mapping[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(name): count for name, count in raw.items() if _is_int(count)}


def _natural(raw: Mapping[str, Any], key: str, where: str) -> int | None:
    """A whole number field (``None`` when absent); anything else is named."""
    value = raw.get(key)
    if value is None:
        return None
    if not _is_int(value):
        raise ValueError(f"{where}.{key} must be a whole number, got {value!r}")
    return int(value)


def _number(raw: Mapping[str, Any], key: str, where: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"{where}.{key} must be a number, got {value!r}")
    return value  # as written: 3 stays 3 in the report, not 3.0


def _sink(name: str, row: object) -> StoredSink:
    where = f"results.json: sinks.{name}"
    if not isinstance(row, Mapping):
        raise ValueError(f"{where} must be an object")
    valid = row.get("valid")
    mitigation = row.get("mitigation")
    return StoredSink(
        name=name,
        fenced=bool(row.get("fenced")),
        verdict=outcome_of(valid),
        anomalies=_counts(row.get("anomalies")),
        expected=_counts(row.get("expected")),
        mitigation=str(mitigation) if mitigation else None,
        accepted_writes=_natural(row, "accepted_writes", where),
        seq_observable=row.get("seq_observable") is True,
        reasons=_Reader(row, where).names("reasons"),
        declared=row.get("declared") is not False,
    )


def _evidence(by_name: Mapping[str, Any], expected: bool) -> tuple[StoredEvidence, ...]:
    found: list[StoredEvidence] = []
    section = "expected" if expected else "anomalies"
    for name, items in by_name.items():
        for number, item in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(item, Mapping):
                continue
            where = f"results.json: {section}.{name}[{number}]"
            sink = item.get("sink")
            found.append(
                StoredEvidence(
                    name=str(name),
                    expected=expected,
                    explanation=str(item.get("explanation") or name),
                    ops=tuple(
                        _op_ref(op, f"{where}.ops[{n}]")
                        for n, op in enumerate(_objects(item.get("ops")))
                    ),
                    faults=tuple(
                        _fault_window(fault, f"{where}.faults[{n}]")
                        for n, fault in enumerate(_objects(item.get("faults")))
                    ),
                    sink=str(sink) if sink is not None else None,
                )
            )
    return tuple(found)


def _objects(raw: object) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(item for item in raw if isinstance(item, Mapping))


def _optional_text(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    return str(value) if value is not None else None


def _op_ref(raw: Mapping[str, Any], where: str) -> OpRef:
    """An evidence operation (:meth:`OpRef.to_json`'s form) read back; a field of the wrong type
    is named. Evidence written before a field existed still loads: it takes ``None``."""
    process = raw.get("process")
    if process is not None and not isinstance(process, int | str):
        raise ValueError(f"{where}.process must be a number or a name, got {process!r}")
    return OpRef(
        role=str(raw.get("role") or ""),
        f=str(raw.get("f") or ""),
        type=str(raw.get("type") or ""),
        index=_natural(raw, "index", where),
        time=_natural(raw, "time", where),
        invoke_index=_natural(raw, "invoke_index", where),
        invoke_time=_natural(raw, "invoke_time", where),
        process=process,
        node=_optional_text(raw, "node"),
        lock=_optional_text(raw, "lock"),
        epoch=_natural(raw, "epoch", where),
        id=_optional_text(raw, "id"),
        sink=_optional_text(raw, "sink"),
        key=_optional_text(raw, "key"),
        error=_optional_text(raw, "error"),
        position=_natural(raw, "position", where),
    )


def _fault_window(raw: Mapping[str, Any], where: str) -> FaultWindow:
    """An evidence fault (:meth:`FaultWindow.to_json`'s form) read back, its parts too."""
    start = _natural(raw, "start", where)
    if start is None:
        raise ValueError(f"{where} lacks its start")
    return FaultWindow(
        kind=str(raw.get("kind") or "fault"),
        targets=_Reader(raw, where).names("targets"),
        start=start,
        end=_natural(raw, "end", where),
        start_index=_natural(raw, "start_index", where) or 0,
        end_index=_natural(raw, "end_index", where),
        applied=raw.get("applied") is not False,
        error=_optional_text(raw, "error"),
        parts=tuple(
            _fault_window(part, f"{where}.parts[{n}]")
            for n, part in enumerate(_objects(raw.get("parts")))
        ),
        verb=_optional_text(raw, "verb"),
    )


def _coverage(raw: Mapping[str, Any]) -> StoredCoverage:
    where = "results.json: coverage"
    reader = _Reader(raw, where)
    overlaps = {
        str(pair): StoredOverlap(
            _natural(row, "count", f"{where}.overlaps.{pair}"),
            _number(row, "seconds", f"{where}.overlaps.{pair}"),
        )
        for pair, row in reader.mapping("overlaps").items()
        if isinstance(row, Mapping)
    }
    sinks = {
        str(name): StoredSinkCoverage(
            *(
                _natural(row, key, f"{where}.sinks.{name}")
                for key in ("writes", "accepted", "keys", "stale_attempts")
            )
        )
        for name, row in reader.mapping("sinks").items()
        if isinstance(row, Mapping)
    }
    return StoredCoverage(
        numbers=raw,
        gaps=reader.names("gaps"),
        stale_attempts=_natural(raw, "stale_attempts", where) or 0,
        epochs_granted=_natural(raw, "epochs_granted", where) or 0,
        keys_written=_natural(raw, "keys_written", where) or 0,
        clock_windows=_natural(raw, "clock_windows", where) or 0,
        clock_across_expiry=_natural(raw, "clock_across_expiry", where) or 0,
        stops_past_lease=reader.mapping("stops_past_lease"),
        restarts=reader.mapping("restarts"),
        power_losses=reader.mapping("power_losses"),
        unreachable_nodes=reader.mapping("unreachable_nodes"),
        overlaps=overlaps,
        sinks=sinks,
    )
