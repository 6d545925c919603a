"""``fencecheck run-all``: a matrix of runs, one summary table at the end (like Jepsen's test-all).

Each run gets its own store directory (and the store's index is kept up to date by the runner).
What fails is what was unexpected (see :mod:`harness.run.matrix`): the exit code is 0 when every run
came out as expected, else the worst surprise: 3 a run crashed, 2 a run was unknown, 1 any other.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.bundled import bundled_matrices, bundled_matrix
from harness.cli import cli
from harness.cli.run import store_option
from harness.cli.units import Duration
from harness.record.spec import TestSpec
from harness.report import publish
from harness.report.junit import error_case, junit_case, write_cases
from harness.run.judge import RunOutcome
from harness.run.matrix import (
    EXPECTABLE,
    MatrixEntry,
    MatrixError,
    MatrixResult,
    entries_from,
    load_matrix,
    parse_shard,
    tally,
)
from harness.run.matrix import shard as shard_of
from harness.run.plan import RunError, spec_problem
from harness.run.runner import run_test
from harness.run.store import RunDir, StoreError, check_output_file, check_store
from harness.run.summary import RunSummary, summarize
from nemeses import DEFAULT_NEMESES, Schedule

__all__ = ["Publisher", "Runner", "run_all", "run_matrix"]

Runner = Callable[[TestSpec, Schedule | None], RunOutcome]
"""Carries out one spec, with a row's exact schedule if it has one (else the seed draws it);
:func:`harness.run.runner.run_test` in real use, a fake in tests."""
Publisher = Callable[[RunDir, RunSummary], object]
"""Writes a checked run's report and index from its summary (:func:`harness.report.publish`)."""

_LOG_WIDTH = 200
_VERDICT_STYLE = {
    "valid": "green",
    "invalid": "red",
    "unknown": "yellow",
    "unchecked": "magenta",
    "error": "magenta",
}


def run_matrix(
    entries: Sequence[MatrixEntry],
    runner: Runner,
    console: Console,
    *,
    fail_fast: bool = False,
    parallel: int = 1,
    publisher: Publisher | None = None,
) -> list[MatrixResult]:
    """Carry out every entry, ``parallel`` at a time; a crash is recorded and the matrix goes on.

    Results come in matrix order. Stops starting runs after an interrupted run (Ctrl-C, SIGTERM),
    or after the first unexpected result with ``fail_fast``. With ``parallel`` above 1 the runs
    go in threads, each on its own cluster and network; only the main thread handles signals,
    so Ctrl-C there starts no further run and waits for the running ones to end (each heals and
    removes its cluster at its time limit). Each run's files are read once, into the summary
    its row and ``publisher`` (the report and the index) take.
    """
    if parallel <= 1:
        results: list[MatrixResult] = []
        for position, entry in enumerate(entries, 1):
            result, stop = _run_entry(
                entry, f"{position}/{len(entries)}", runner, console, fail_fast, publisher
            )
            results.append(result)
            if stop:
                break
        return results
    stopping = threading.Event()

    def job(position: str, entry: MatrixEntry) -> MatrixResult | None:
        if stopping.is_set():
            return None
        result, stop = _run_entry(entry, position, runner, console, fail_fast, publisher)
        if stop:
            stopping.set()
        return result

    with ThreadPoolExecutor(parallel, thread_name_prefix="matrix") as pool:
        futures = [
            pool.submit(job, f"{position}/{len(entries)}", entry)
            for position, entry in enumerate(entries, 1)
        ]
        try:
            done = [future.result() for future in futures]
        except KeyboardInterrupt:
            stopping.set()
            console.print("[yellow]interrupted: waiting for the running runs to end[/]")
            done = [future.result() for future in futures]
    return [result for result in done if result is not None]


def _run_entry(
    entry: MatrixEntry,
    position: str,
    runner: Runner,
    console: Console,
    fail_fast: bool,
    publisher: Publisher | None = None,
) -> tuple[MatrixResult, bool]:
    """Carry out one entry (``position`` is ``"3/8"``); also whether the matrix should start
    no further run."""
    console.rule(f"[bold]{position}[/] {escape(entry.label)}  expect {entry.expect}")
    try:
        outcome = runner(entry.spec, entry.schedule)
    except RunError as problem:
        result = MatrixResult(entry, None, str(problem))
    except Exception as problem:  # one crashed run must not lose the others' results
        result = MatrixResult(entry, None, f"{type(problem).__name__}: {problem}")
    else:
        summary = summarize(outcome.run_dir, outcome.record)
        if publisher is not None:
            publisher(outcome.run_dir, summary)
        result = MatrixResult(entry, summary)
        if outcome.interrupted:
            console.print("[yellow]interrupted: the remaining runs are skipped[/]")
            return result, True
    if fail_fast and result.mismatch is not None:
        console.print("[yellow]--fail-fast: stopping at the first unexpected result[/]")
        return result, True
    return result, False


def _table(results: Sequence[MatrixResult]) -> Table:
    table = Table(title="fencecheck run-all", show_lines=False)
    columns = (
        "#",
        "system",
        "bug switches",
        "workload",
        "nemeses",
        "seed",
        "verdict",
        "expected",
        "",
    )
    for column in columns:
        table.add_column(column)
    table.add_column("problem", overflow="fold")
    for position, result in enumerate(results, 1):
        number = result.entry.number or position
        spec = result.entry.spec
        verdict = result.verdict
        mismatch = result.mismatch
        mark = "[green]as expected[/]" if mismatch is None else "[bold red]UNEXPECTED[/]"
        table.add_row(
            str(number),
            spec.system,
            ", ".join(spec.bugs) or "-",
            f"{spec.workload}\n({spec.workload_shape})" if spec.workload_shape else spec.workload,
            ", ".join(spec.nemeses) or "-",
            str(spec.seed),
            f"[{_VERDICT_STYLE.get(verdict, 'white')}]{verdict}[/]",
            str(result.entry.expect),
            mark,
            escape(mismatch or ""),
        )
    return table


def _report_lines(results: Sequence[MatrixResult]) -> list[str]:
    """One line per run with its report, printed below the table: a path folded inside a table
    cell cannot be copied from a log."""
    return [
        f"{result.entry.number or position}. {_near(result.summary.run.report)}"
        for position, result in enumerate(results, 1)
        if result.summary is not None
    ]


def _near(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (shorter in a table)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _row_json(entry: MatrixEntry) -> dict[str, Any]:
    """A row as ``--json`` names it (docs/json/run-all.schema.json): number, name, spec and
    expectation."""
    return {
        "number": entry.number,
        "name": entry.case_name,
        "spec": entry.spec.to_json(),
        "expect": {
            "verdict": entry.expect.verdict,
            "anomalies": list(entry.expect.anomalies),
            "strict": entry.expect.strict,
        },
    }


def _json(result: MatrixResult) -> dict[str, Any]:
    summary = result.summary
    return {
        **_row_json(result.entry),
        "verdict": result.verdict,
        "as_expected": result.mismatch is None,
        "mismatch": result.mismatch,
        "anomaly_types": list(summary.anomaly_types) if summary else [],
        "expected_anomaly_types": list(summary.expected_types) if summary else [],
        "unknown_reasons": list(summary.unknown_reasons) if summary else [],
        "run_dir": str(summary.run.path) if summary else None,
        "report": str(summary.run.report) if summary else None,
        "error": result.error,
    }


def _junit(results: Sequence[MatrixResult], path: Path) -> Path:
    cases = []
    for result in results:
        mismatch = result.mismatch
        name = result.entry.case_name
        if result.summary is None:
            cases.append(error_case(name, mismatch or "crashed"))
        elif mismatch is None:
            cases.append(junit_case(result.summary, "pass", name=name))
        elif result.exit_code == 1:
            cases.append(junit_case(result.summary, "failure", mismatch, name=name))
        else:
            cases.append(junit_case(result.summary, "error", mismatch, name=name))
    return write_cases(cases, path)


def _matrix_file(value: str) -> Path:
    """The matrix file ``value`` names: a file, else a shipped matrix of that name."""
    path = Path(value)
    if path.is_file():
        return path
    shipped = bundled_matrix(value) if "/" not in value else None
    if shipped is not None:
        return shipped
    raise click.BadParameter(
        f"no matrix file {value}; give a path, or one of the shipped matrices: "
        + ", ".join(bundled_matrices()),
        param_hint="--matrix",
    )


def _entries(
    matrix: Path | None,
    systems: tuple[str, ...],
    bug_sets: tuple[str, ...],
    nemesis_sets: tuple[str, ...],
    expect: str,
    overrides: dict[str, Any],
) -> list[MatrixEntry]:
    if matrix is not None:
        if systems or bug_sets or nemesis_sets:
            raise MatrixError(
                "--matrix names the runs; drop --system/--bugs/--nemesis or drop --matrix"
            )
        return load_matrix(matrix, overrides)
    cross = {
        "system": list(systems) or ["reference"],
        "bugs": list(bug_sets) or ["none"],
        "nemeses": list(nemesis_sets) or [",".join(DEFAULT_NEMESES)],
        "expect": expect,
    }
    return entries_from({"cross": cross}, "flags", overrides)


def _dry_run(entries: Sequence[MatrixEntry], as_json: bool) -> None:
    """Print each row with what it expects, and why it cannot run when it cannot (an unknown
    system, an unwritable store...): a :class:`click.ClickException` (exit 3) names such rows."""
    problems = {entry.number: spec_problem(entry.spec) for entry in entries}
    if as_json:
        rows = [{**_row_json(entry), "problem": problems[entry.number]} for entry in entries]
        click.echo(json.dumps({"dry_run": True, "rows": rows}, indent=2, default=str))
    else:
        for entry in entries:
            seed = entry.spec.seed
            click.echo(f"{entry.number}. {entry.label}  seed {seed}  expect {entry.expect}")
            if problems[entry.number] is not None:
                click.echo(f"   cannot run: {problems[entry.number]}")
    bad = [str(number) for number, problem in problems.items() if problem is not None]
    if bad:
        which = "row" if len(bad) == 1 else "rows"
        raise click.ClickException(
            f"{len(bad)} of {len(entries)} rows cannot run ({which} {', '.join(bad)}, said "
            "above); fix them before the matrix runs"
        )


@cli.command("run-all")
@click.option(
    "--matrix",
    callback=lambda ctx, param, value: None if value is None else _matrix_file(value),
    help="A matrix file (JSON, or TOML by its .toml suffix): runs and what each should find; "
    "or the name of a shipped one (fencecheck matrices lists them).",
)
@click.option("--system", "systems", multiple=True, help="A system (repeat for more).")
@click.option(
    "--bug",
    "--bugs",
    "bug_sets",
    multiple=True,
    help="A set of bug switches, comma-separated, 'none' for none (repeat for more sets; "
    "--bugs is the old spelling).",
)
@click.option(
    "--nemesis",
    "nemesis_sets",
    multiple=True,
    help="A set of fault kinds, comma-separated, 'none' for none (repeat for more sets).",
)
@click.option(
    "--expect",
    type=click.Choice(EXPECTABLE),
    default="valid",
    show_default=True,
    help="What every run built from flags should come out as.",
)
@click.option("--workload", help="Override every run's workload.")
@click.option("--ttl", type=Duration(), help="Override every run's lease TTL (1, 1s, 500ms).")
@click.option("--time-limit", type=Duration(), help="Override every run's time limit (30, 2m).")
@click.option("--workers", type=click.IntRange(1, 16), help="Override every run's workers.")
@click.option("--seed", type=int, help="Override every run's seed.")
@store_option
@click.option(
    "--junit-xml",
    type=click.Path(path_type=Path),
    help="Write a JUnit XML report (checked writable before the runs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("--no-progress", is_flag=True, help="No live display (CI logs).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first unexpected result.")
@click.option(
    "--strict",
    is_flag=True,
    help="A valid run that tested less than it claims (VALID, but weak) is a surprise, exit 2.",
)
@click.option("--dry-run", is_flag=True, help="Print the runs and expectations; run nothing.")
@click.option(
    "--shard",
    default=None,
    metavar="I/N",
    help="Run only shard I of N (rows dealt round-robin by row number), e.g. one per CI job.",
)
@click.option(
    "--parallel",
    type=click.IntRange(1, 16),
    default=1,
    show_default=True,
    help="Runs side by side, each on its own cluster and network (no live display then).",
)
def run_all(
    matrix: Path | None,
    systems: tuple[str, ...],
    bug_sets: tuple[str, ...],
    nemesis_sets: tuple[str, ...],
    expect: str,
    workload: str | None,
    ttl: float | None,
    time_limit: float | None,
    workers: int | None,
    seed: int | None,
    store: Path,
    junit_xml: Path | None,
    as_json: bool,
    no_progress: bool,
    fail_fast: bool,
    strict: bool,
    dry_run: bool,
    shard: str | None,
    parallel: int,
) -> None:
    """Run a matrix of tests (from --matrix, or the product of --system, --bugs, --nemesis).

    Prints one table at the end. Exit 0 when every run came out as expected; otherwise the worst
    surprise: 3 a run crashed, 2 a run was unknown, 1 any other unexpected verdict or anomaly.
    """
    candidates = {
        "workload": workload,
        "ttl": ttl,
        "time_limit": time_limit,
        "workers": workers,
        "seed": seed,
    }
    overrides = {k: v for k, v in candidates.items() if v is not None}
    overrides["store"] = str(store)
    if strict:
        overrides["strict"] = True
    try:
        entries = _entries(matrix, systems, bug_sets, nemesis_sets, expect, overrides)
        if shard is not None:
            entries = shard_of(entries, *parse_shard(shard))
        if dry_run:
            _dry_run(entries, as_json)
            return
        if junit_xml is not None:
            check_output_file(junit_xml, "--junit-xml")
        for entry in entries:
            check_store(entry.spec.store, entry.spec.test_name)
    except (MatrixError, StoreError) as problem:
        raise click.ClickException(str(problem)) from None
    console = Console(stderr=True)
    # Live displays of runs in several threads would overwrite one another.
    show_progress = not no_progress and console.is_terminal and parallel == 1

    def runner(spec: TestSpec, schedule: Schedule | None) -> RunOutcome:
        return run_test(spec, console=console, progress=show_progress, schedule=schedule)

    results = run_matrix(
        entries, runner, console, fail_fast=fail_fast, parallel=parallel, publisher=publish
    )
    # CI logs are no terminal: rich would squeeze the table into 80 columns.
    wide = console if console.is_terminal else Console(stderr=True, width=_LOG_WIDTH)
    wide.print(_table(results))
    for line in _report_lines(results):
        wide.print(escape(line), soft_wrap=True, highlight=False)
    runs, as_expected, code = tally(results)
    style = "green" if as_expected == runs == len(entries) else "bold red"
    skipped = len(entries) - runs
    console.print(
        f"[{style}]{runs} run{'' if runs == 1 else 's'}: {as_expected} as expected, "
        f"{runs - as_expected} unexpected" + (f", {skipped} not run" if skipped else "") + "[/]"
    )
    if junit_xml is not None:
        console.print(f"JUnit XML: {_junit(results, junit_xml)}")
    if as_json:
        click.echo(json.dumps([_json(r) for r in results], indent=2))
    if skipped and not code:
        code = 3  # an interrupted matrix proves nothing about the runs it skipped
    raise click.exceptions.Exit(code)
