"""One run in a few fields: what was tested and what the checker said.

The run browser, the JUnit writer, ``run-all``'s table and the report's header all need the same
reading of ``test.json`` and ``results.json``; this module is that reading. It never opens the
history, so summarising a store of many large runs stays fast. It tolerates missing and
malformed files: a run that crashed before it was checked is still listed, as ``unchecked``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from harness.record.io import last_time
from harness.run.results import StoredResults, outcome_of
from harness.run.store import RunDir

__all__ = [
    "VERDICTS",
    "RunSummary",
    "Verdict",
    "as_names",
    "flat_test",
    "summarize",
    "verdict_of",
]

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
    duration_s: float | None
    results: StoredResults | None = None
    """``results.json`` as read (``None``: never checked, or unreadable: see ``problem``)."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """Every field of ``test.json`` in one mapping (:func:`flat_test`; empty when unreadable)."""

    @property
    def title(self) -> str:
        """``test @ stamp``: names the run in lists and test reports."""
        return f"{self.test} @ {self.stamp}"


def verdict_of(results: Mapping[str, Any] | None) -> Verdict:
    """The verdict of a decoded ``results.json`` (``unchecked`` when there is none)."""
    return "unchecked" if results is None else outcome_of(results.get("valid"))


def as_names(raw: Any) -> tuple[str, ...]:
    """Names from a spec field that may be a string, a list, or a mapping of switches.

    ``{"epoch-in-memory": true, "check-lease": false}`` names only the switches that are on;
    a list of objects is named by each object's ``name`` or ``kind``.
    """
    if raw is None or raw is False:
        return ()
    if isinstance(raw, str):
        return (raw,) if raw else ()
    if isinstance(raw, Mapping):
        return tuple(str(key) for key, on in raw.items() if on)
    if isinstance(raw, Iterable):
        names: list[str] = []
        for item in raw:
            if isinstance(item, Mapping):
                label = item.get("name") or item.get("kind")
                if label:
                    names.append(str(label))
            elif item is not None:
                names.append(str(item))
        return tuple(names)
    return (str(raw),)


def flat_test(test: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ``test.json`` in one mapping.

    The runner nests the :class:`~harness.record.spec.TestSpec` under ``"spec"`` and puts what it
    learnt while running (``lease_ttl``, ``schedule``, ``inventory``, ``command``, ``error``...)
    beside it; where both have a key, the top level wins.
    """
    inner = test.get("spec")
    merged: dict[str, Any] = dict(inner) if isinstance(inner, Mapping) else {}
    merged.update((key, value) for key, value in test.items() if key != "spec")
    return merged


def _read_test(run: RunDir) -> tuple[dict[str, Any] | None, str | None]:
    try:
        data = run.read_test()
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as problem:
        return None, f"{run.test_json.name} cannot be read: {problem}"
    if not isinstance(data, dict):
        return None, f"{run.test_json.name} is not a JSON object"
    return data, None


def _started(stamp: str, spec: Mapping[str, Any]) -> datetime | None:
    for key in ("started", "start_time", "timestamp"):
        raw = spec.get(key)
        if isinstance(raw, str):
            try:
                parsed = datetime.fromisoformat(raw)
            except ValueError:
                continue
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    try:
        return datetime.strptime(stamp, _STAMP_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def _duration(spec: Mapping[str, Any], history: Path) -> float | None:
    """Seconds the run lasted: from the spec when it says, else the last history event's time."""
    for key in ("duration", "elapsed"):
        value = spec.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    last = last_time(history)
    return last / 1e9 if last is not None else None


def summarize(run: RunDir) -> RunSummary:
    """Read ``test.json`` and ``results.json`` of ``run`` into a :class:`RunSummary`."""
    test, spec_problem = _read_test(run)
    results_problem = None
    try:
        results = run.read_results()
    except (OSError, ValueError) as problem:
        results, results_problem = None, str(problem)
    spec = flat_test(test or {})
    verdict: Verdict = results.valid if results is not None else "unchecked"
    if results_problem is not None:
        verdict = "unknown"
    seed = spec.get("seed")
    return RunSummary(
        run=run,
        test=_string(spec.get("test_name")) or _string(spec.get("name")) or run.path.parent.name,
        stamp=run.path.name,
        started=_started(run.path.name, spec),
        system=_string(spec.get("system")) or "?",
        bugs=as_names(spec.get("bugs")),
        workload=_string(spec.get("workload")) or "",
        nemeses=as_names(spec.get("nemeses")),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        verdict=verdict,
        anomaly_types=results.anomaly_types if results else (),
        expected_types=results.expected_types if results else (),
        explanations=results.explanations if results else (),
        unknown_reasons=results.unknown_reasons if results else (),
        problem=spec_problem
        or results_problem
        or _string(spec.get("error"))
        or (results.run_error if results else None),
        operations=results.operations if results else None,
        duration_s=_duration(spec, run.history),
        results=results,
        fields=spec,
    )


def _string(raw: Any) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, Mapping):
        label = raw.get("name") or raw.get("kind")
        return str(label) if label else None
    return str(raw) if not isinstance(raw, str) else (raw or None)
