"""One run in a few fields: what was tested and what the checker said.

The run browser, the JUnit writer, ``run-all``'s table and the report's header all need the same
reading of ``test.json`` and ``results.json``, through their typed readers
(:class:`~harness.record.run_record.RunRecord`, :class:`~harness.record.results.StoredResults`); a
caller that already read them passes them in. It never opens the history (the run's length is read
from its tail only when asked), so summarising a store of many large runs stays fast. It tolerates
missing and damaged files: a run that crashed before it was checked is still listed, as
``unchecked``, with the problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from harness.record.io import last_time
from harness.record.results import StoredResults
from harness.record.run_record import RunRecord
from harness.run.store import RunDir

__all__ = ["VERDICTS", "RunSummary", "Verdict", "flat_test", "summarize"]

Verdict = Literal["valid", "invalid", "unknown", "unchecked"]
VERDICTS: Final[tuple[Verdict, ...]] = ("valid", "invalid", "unknown", "unchecked")
_STAMP_FORMAT: Final = "%Y%m%dT%H%M%S.%fZ"


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What a person scanning a list of runs wants to know about one of them.

    ``anomaly_types`` are the anomalies that decided the verdict; ``expected_types`` are the
    ones found but expected (a stale write on an unfenced sink whose mitigation is ``none``).
    ``problem`` says why the run could not be read or checked, when that is the case.
    """

    run: RunDir
    test: str
    stamp: str
    started: datetime | None
    system: str
    bugs: tuple[str, ...]
    workload: str
    nemeses: tuple[str, ...]
    seed: int | None
    verdict: Verdict
    anomaly_types: tuple[str, ...]
    expected_types: tuple[str, ...]
    explanations: tuple[str, ...]
    unknown_reasons: tuple[str, ...]
    problem: str | None
    operations: int | None
    results: StoredResults | None = None
    """``results.json`` as read (``None``: never checked, or unreadable: see ``problem``)."""
    record: RunRecord | None = None
    """``test.json`` as read (``None``: missing, or unreadable: see ``problem``)."""

    @property
    def duration_s(self) -> float | None:
        """Seconds the run lasted: the last history event's time, read from the history's tail
        when asked (only JUnit asks: the report and the index never open the history here)."""
        last = last_time(self.run.history)
        return last / 1e9 if last is not None else None

    @property
    def title(self) -> str:
        """``test @ stamp``: names the run in lists and test reports."""
        return f"{self.test} @ {self.stamp}"


def flat_test(record: RunRecord) -> dict[str, Any]:
    """The fields of ``record`` (as its ``test.json`` holds them) in one mapping, for the
    report's spec table.

    The record nests the :class:`~harness.record.spec.TestSpec` under ``"spec"`` and puts what the
    run learnt (``lease_ttl``, ``schedule``, ``inventory``, ``command``, ``error``...) beside it;
    where both have a key, the top level wins.
    """
    data = _as_json(record.to_json())
    merged: dict[str, Any] = {
        key: value
        for key, value in data.pop("spec").items()
        if f"spec.{key}" not in record.defaulted
    }
    merged.update((key, value) for key, value in data.items() if key not in record.defaulted)
    return merged


def _as_json(value: Any) -> Any:
    """``value`` as ``json.loads`` gives it back: tuples become lists, so the spec table shows a
    field as the file holds it."""
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_json(item) for item in value]
    return value


def _read_record(run: RunDir) -> tuple[RunRecord | None, str | None]:
    try:
        return run.read_record(), None
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as problem:
        return None, f"{run.test_json.name} cannot be read: {problem}"


def _started(stamp: str, record: RunRecord | None) -> datetime | None:
    if record is not None and record.started:
        try:
            parsed = datetime.fromisoformat(record.started)
        except ValueError:
            pass
        else:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        return datetime.strptime(stamp, _STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


_UNREAD: Final = "read it"


def summarize(
    run: RunDir,
    record: RunRecord | None = None,
    results: StoredResults | Literal["read it"] | None = _UNREAD,
) -> RunSummary:
    """``run`` in a :class:`RunSummary`: ``record`` and ``results`` as already read (by the
    caller that just checked the run, so each file is read once), else read here from
    ``test.json`` and ``results.json``."""
    spec_problem = None
    if record is None:
        record, spec_problem = _read_record(run)
    results_problem = None
    if results == _UNREAD:
        try:
            results = run.read_results()
        except (OSError, ValueError) as problem:
            results, results_problem = None, str(problem)
    stored = results if isinstance(results, StoredResults) else None
    verdict: Verdict = stored.valid if stored is not None else "unchecked"
    if results_problem is not None:
        verdict = "unknown"
    spec = record.spec if record is not None else None
    return RunSummary(
        run=run,
        test=spec.test_name if spec is not None else run.path.parent.name,
        stamp=run.path.name,
        started=_started(run.path.name, record),
        system=spec.system if spec is not None else "?",
        bugs=spec.bugs if spec is not None else (),
        workload=spec.workload if spec is not None else "",
        nemeses=spec.nemeses if spec is not None else (),
        seed=spec.seed if spec is not None else None,
        verdict=verdict,
        anomaly_types=stored.anomaly_types if stored else (),
        expected_types=stored.expected_types if stored else (),
        explanations=stored.explanations if stored else (),
        unknown_reasons=stored.unknown_reasons if stored else (),
        problem=spec_problem
        or results_problem
        or (record.error if record is not None else None)
        or (stored.run_error if stored else None),
        operations=stored.operations if stored else None,
        results=stored,
        record=record,
    )
