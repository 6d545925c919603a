"""What ``results.json`` holds, typed: its one writer and its one reader.

The checker's verdict (:class:`checkers.CheckResult`), the coverage counted in the same pass, and
how the run ended (interrupted, broken off, parts lost) are written together, once, by
:func:`results_json`. Everything that reads a verdict back (the run browser, JUnit, ``run-all``,
the matrix's expectations, the pytest plugin, ``analyze``) reads it through
:meth:`StoredResults.from_json`, which checks the fields it types and names the one at fault. The
report also keeps the whole mapping (:attr:`StoredResults.data`) for the evidence it draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from checkers import CheckResult
from checkers.result import FORMAT
from harness.record.run_record import Interruption, RunRecord, check_format

__all__ = [
    "Outcome",
    "StoredCoverage",
    "StoredResults",
    "StoredSink",
    "outcome_of",
    "results_json",
]

Outcome = Literal["valid", "invalid", "unknown"]
_STALE: Final = "stale-write"


def outcome_of(valid: object) -> Outcome:
    """The outcome a ``valid`` field stands for: ``true`` valid, ``false`` invalid, anything else
    (``"unknown"``, missing) unknown."""
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


def results_json(
    result: CheckResult,
    coverage: Mapping[str, Any],
    record: RunRecord,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """``results.json``'s content: ``result``, its ``coverage``, what reading the history found
    (``notes``: a torn last line) and how ``record``'s run ended."""
    data = result.to_json()
    data["coverage"] = dict(coverage)
    if notes:
        data["notes"] = list(notes)
    if not record.finished:
        data["never_finished"] = True
    if record.interrupted is not None:
        data["interrupted"] = record.interrupted.to_json()
    if record.error:
        data["run_error"] = record.error
    if record.lost:
        data["lost"] = list(record.lost)
    return data


@dataclass(frozen=True, slots=True)
class StoredSink:
    """One sink's verdict as stored: whether it is fenced, and what it showed."""

    name: str
    fenced: bool
    verdict: Outcome
    anomalies: Mapping[str, int]
    expected: Mapping[str, int]

    @property
    def stale_accepted(self) -> bool:
        """A stale write was accepted here, counted against the run or expected."""
        return bool(self.anomalies.get(_STALE, 0) or self.expected.get(_STALE, 0))


@dataclass(frozen=True, slots=True)
class StoredCoverage:
    """The ``coverage`` section: its numbers by name and the gaps that weaken a valid verdict."""

    numbers: Mapping[str, Any]
    gaps: tuple[str, ...]

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
    notes: tuple[str, ...] = ()
    """What reading the history found beside its events (a torn last line)."""
    never_finished: bool = False
    """The run's record was never finished: its process died before its check."""

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
        return cls(
            valid=outcome,
            anomaly_types=reader.names("anomaly_types"),
            expected_types=tuple(sorted(expected)),
            explanations=_explanations(reader.mapping("anomalies")),
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


def _sink(name: str, row: object) -> StoredSink:
    if not isinstance(row, Mapping):
        raise ValueError(f"results.json: sinks.{name} must be an object")
    valid = row.get("valid")
    return StoredSink(
        name=name,
        fenced=bool(row.get("fenced")),
        verdict=outcome_of(valid),
        anomalies=_counts(row.get("anomalies")),
        expected=_counts(row.get("expected")),
    )


def _coverage(raw: Mapping[str, Any]) -> StoredCoverage:
    return StoredCoverage(numbers=raw, gaps=_Reader(raw, "results.json coverage").names("gaps"))
