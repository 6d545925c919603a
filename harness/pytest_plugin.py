"""fencecheck's pytest plugin: fencing runs as ordinary pytest tests.

Installed with the package (a ``pytest11`` entry point), so a team whose lock-service tests live
in pytest gets, with no import:

- the ``fencecheck`` fixture: ``fencecheck(system="reference", bugs=("no-store-check",), ...)``
  carries out one spec (any :class:`~harness.record.spec.TestSpec` field, or a whole spec) on a real
  cluster and returns a :class:`FencedRun`, the typed outcome (verdict, anomalies, coverage gaps,
  report). A test fails with ``assert run.valid, run.why``; the run's report path is attached to
  the failure and to ``--junitxml`` as the property ``fencecheck_report``.
- :func:`matrix_rows`: a matrix file as ``pytest.param`` rows (one test per row, named like
  ``run-all``'s JUnit cases), for ``@pytest.mark.parametrize("row", matrix_rows(path))``, and
  ``fencecheck.expect(row)``, which runs the row and fails with what was unexpected. pytest's own
  ``-k``, ``-x``, ``--collect-only``, ``--junitxml`` and sharding plugins then apply to rows.
- a skip, with the reason ``fencecheck doctor`` gives, when no Docker engine answers.

Runs are kept in a store under pytest's temporary folder unless ``--fencecheck-store`` names one.
The module imports the harness only when a fixture is used, so loading it costs a pytest session
that never asks for a run nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from harness.record.spec import TestSpec
    from harness.run.judge import RunOutcome
    from harness.run.matrix import MatrixEntry
    from harness.run.summary import RunSummary

__all__ = ["FencedRun", "RunSpec", "matrix_rows"]

_REPORTS: Final = pytest.StashKey[list[Path]]()
"""The reports of the runs a test carried out, for its failure's report section."""


@dataclass(frozen=True)
class FencedRun:
    """One carried-out run, typed: what the checker decided and where everything is."""

    outcome: RunOutcome
    summary: RunSummary
    gaps: tuple[str, ...]
    """What weakens a valid verdict (the coverage's sentences; empty when nothing does)."""

    @property
    def verdict(self) -> str:
        """``valid``, ``invalid``, ``unknown`` or ``unchecked``."""
        return self.summary.verdict

    @property
    def valid(self) -> bool:
        """True only for a valid verdict of a run that was neither interrupted nor broken off."""
        return self.verdict == "valid" and not self.outcome.interrupted and not self.error

    @property
    def error(self) -> str | None:
        """Why the run broke off, if it did."""
        return self.outcome.error

    @property
    def anomaly_types(self) -> tuple[str, ...]:
        """The anomalies that decided the verdict."""
        return self.summary.anomaly_types

    @property
    def weak(self) -> bool:
        """Valid, but the run tested less than it claims (see :attr:`gaps`)."""
        return self.valid and bool(self.gaps)

    @property
    def report(self) -> Path:
        """The run's ``report.html``."""
        return self.outcome.run_dir.report

    @property
    def run_dir(self) -> Path:
        """The run's folder in the store."""
        return self.outcome.run_dir.path

    @property
    def why(self) -> str:
        """One paragraph for an assertion message: the verdict, the anomalies or the reasons,
        and the report."""
        parts = [f"{self.summary.test}: {self.verdict}"]
        if self.anomaly_types:
            parts.append("anomalies: " + ", ".join(self.anomaly_types))
        parts += list(self.summary.explanations[:3])
        parts += [f"unknown: {reason}" for reason in self.summary.unknown_reasons]
        if self.error:
            parts.append(f"broke off: {self.error}")
        if self.gaps:
            parts.append("weak: " + "; ".join(self.gaps))
        parts.append(f"report: {self.report}")
        return "\n".join(parts)


class RunSpec:
    """The ``fencecheck`` fixture's value: call it to carry out a spec (see the module
    docstring)."""

    def __init__(self, store: Path, remember: Callable[[Path], None]) -> None:
        self._store = store
        self._remember = remember

    def __call__(self, spec: TestSpec | None = None, /, **values: Any) -> FencedRun:
        """Carry out ``spec`` (default: the defaults) with ``values`` replacing its fields;
        the store is the plugin's unless a ``store`` is given."""
        from harness.record.spec import TestSpec

        known = {f.name for f in fields(TestSpec)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(
                f"unknown spec field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        base = spec if spec is not None else TestSpec(store=self._store)
        if spec is not None and "store" not in values and base.store == Path("store"):
            values["store"] = self._store
        coerced: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in values.items()
        }
        return self._carry_out(replace(base, **coerced), None)

    def expect(self, row: MatrixEntry) -> FencedRun:
        """Carry out one matrix row (its exact windows, if it has them) and fail the test with
        what was unexpected, as ``run-all`` judges it."""
        spec = row.spec
        if spec.store == Path("store"):
            spec = replace(spec, store=self._store)
        run = self._carry_out(spec, row)
        mismatch = row.expect.mismatch(run.summary)
        if mismatch is not None:
            pytest.fail(f"{row.case_name}: {mismatch}\n{run.why}", pytrace=False)
        return run

    def _carry_out(self, spec: TestSpec, row: MatrixEntry | None) -> FencedRun:
        from rich.console import Console

        from harness.report import publish
        from harness.run.plan import RunError
        from harness.run.runner import run_test
        from harness.run.summary import summarize

        try:
            outcome = run_test(
                spec,
                console=Console(stderr=True, force_terminal=False),
                progress=False,
                schedule=row.schedule if row is not None else None,
            )
        except RunError as problem:
            pytest.fail(f"fencecheck could not run {spec.test_name}: {problem}", pytrace=False)
        summary = publish(outcome.run_dir, summarize(outcome.run_dir, outcome.record))
        self._remember(outcome.run_dir.report)
        return FencedRun(outcome, summary, summary.results.gaps if summary.results else ())


def matrix_rows(path: str | Path, **overrides: Any) -> list[Any]:
    """A matrix file's rows as ``pytest.param`` values named by their row (``row 03: ...``),
    for ``@pytest.mark.parametrize("row", matrix_rows("matrices/detection.json"))``.
    ``overrides`` (spec fields such as ``time_limit=10``) win over every row's own values."""
    from harness.run.matrix import load_matrix

    return [pytest.param(entry, id=entry.case_name) for entry in load_matrix(path, overrides)]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--fencecheck-store``: keep the runs there instead of under pytest's temporary folder."""
    group = parser.getgroup("fencecheck")
    group.addoption(
        "--fencecheck-store",
        default=None,
        help="Folder of stored fencecheck runs (default: a folder under pytest's basetemp).",
    )


@pytest.fixture
def fencecheck(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RunSpec:
    """Carries out fencecheck specs on a real cluster; skips the test, with the doctor's reason,
    when no Docker engine answers."""
    from harness.node.docker.engine import engine_problem

    problem = engine_problem()
    if problem is not None:
        pytest.skip(f"fencecheck: no Docker engine: {problem}")
    chosen = request.config.getoption("--fencecheck-store")
    store = Path(chosen) if chosen else tmp_path_factory.getbasetemp() / "fencecheck-store"
    reports = request.node.stash.setdefault(_REPORTS, [])

    def remember(report: Path) -> None:
        reports.append(report)
        request.node.user_properties.append(("fencecheck_report", str(report)))

    return RunSpec(store, remember)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that carried out runs shows their reports in its failure section."""
    report = yield
    reports = item.stash.get(_REPORTS, [])
    if report.failed and reports:
        report.sections.append(("fencecheck", "\n".join(f"report: {r}" for r in reports)))
    return report
