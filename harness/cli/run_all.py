"""``fencecheck run-all``: a matrix of runs, one summary table at the end (like Jepsen's test-all).

Each run gets its own store directory (and the store's index is kept up to date by the runner).
What fails is what was unexpected (see :mod:`harness.run.matrix`): the exit code is 0 when every run
came out as expected, else the worst surprise: 3 a run crashed, 2 a run was unknown, 1 any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.cli import cli
from harness.cli.run import store_option
from harness.report import publish
from harness.report.junit import error_case, junit_case, write_cases
from harness.run.matrix import (
    EXPECTABLE,
    MatrixEntry,
    MatrixError,
    MatrixResult,
    entries_from,
    load_matrix,
    tally,
)
from harness.run.runner import RunError, RunOutcome, run_test
from harness.run.spec import TestSpec
from harness.run.store import StoreError, check_output_file, check_store
from harness.run.summary import summarize

__all__ = ["Runner", "run_all", "run_matrix"]

Runner = Callable[[TestSpec], RunOutcome]
"""Carries out one spec; :func:`harness.run.runner.run_test` in real use, a fake in tests."""

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
) -> list[MatrixResult]:
    """Carry out every entry in order; a crash is recorded and the matrix goes on.

    Stops early after an interrupted run (Ctrl-C, SIGTERM), or after the first unexpected result
    with ``fail_fast``.
    """
    results: list[MatrixResult] = []
    for number, entry in enumerate(entries, 1):
        console.rule(
            f"[bold]{number}/{len(entries)}[/] {escape(entry.label)}  expect {entry.expect}"
        )
        try:
            outcome = runner(entry.spec)
        except RunError as problem:
            results.append(MatrixResult(entry, None, str(problem)))
        except Exception as problem:  # one crashed run must not lose the others' results
            results.append(MatrixResult(entry, None, f"{type(problem).__name__}: {problem}"))
        else:
            results.append(MatrixResult(entry, summarize(outcome.run_dir)))
            if outcome.interrupted:
                console.print("[yellow]interrupted: the remaining runs are skipped[/]")
                break
        if fail_fast and results[-1].mismatch is not None:
            console.print("[yellow]--fail-fast: stopping at the first unexpected result[/]")
            break
    return results


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
    table.add_column("report / problem", overflow="fold")
    for number, result in enumerate(results, 1):
        spec = result.entry.spec
        verdict = result.verdict
        mismatch = result.mismatch
        mark = "[green]as expected[/]" if mismatch is None else "[bold red]UNEXPECTED[/]"
        summary = result.summary
        where = _near(summary.run.report) if summary is not None else ""
        note = where if mismatch is None else f"{mismatch}\n{where}".strip()
        table.add_row(
            str(number),
            spec.system,
            ", ".join(spec.bugs) or "-",
            spec.workload,
            ", ".join(spec.nemeses) or "-",
            str(spec.seed),
            f"[{_VERDICT_STYLE.get(verdict, 'white')}]{verdict}[/]",
            str(result.entry.expect),
            mark,
            escape(note),
        )
    return table


def _near(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (shorter in a table)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _json(result: MatrixResult) -> dict[str, Any]:
    summary = result.summary
    return {
        "spec": result.entry.spec.to_json(),
        "expect": {
            "verdict": result.entry.expect.verdict,
            "anomalies": list(result.entry.expect.anomalies),
        },
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
        if result.summary is None:
            cases.append(error_case(result.entry.label, mismatch or "crashed"))
        elif mismatch is None:
            cases.append(junit_case(result.summary, "pass"))
        elif result.exit_code == 1:
            cases.append(junit_case(result.summary, "failure", mismatch))
        else:
            cases.append(junit_case(result.summary, "error", mismatch))
    return write_cases(cases, path)


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
        "nemeses": list(nemesis_sets) or ["pause"],
        "expect": expect,
    }
    return entries_from({"cross": cross}, "flags", overrides)


@cli.command("run-all")
@click.option(
    "--matrix",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A matrix file (JSON, or TOML by its .toml suffix): runs and what each should find.",
)
@click.option("--system", "systems", multiple=True, help="A system (repeat for more).")
@click.option(
    "--bugs",
    "bug_sets",
    multiple=True,
    help="A set of bug switches, comma-separated, 'none' for none (repeat for more sets).",
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
@click.option("--ttl", type=float, help="Override every run's lease TTL (seconds).")
@click.option("--time-limit", type=float, help="Override every run's time limit (seconds).")
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
@click.option("--dry-run", is_flag=True, help="Print the runs and expectations; run nothing.")
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
    dry_run: bool,
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
    try:
        entries = _entries(matrix, systems, bug_sets, nemesis_sets, expect, overrides)
        if dry_run:
            for number, entry in enumerate(entries, 1):
                seed = entry.spec.seed
                click.echo(f"{number}. {entry.label}  seed {seed}  expect {entry.expect}")
            return
        if junit_xml is not None:
            check_output_file(junit_xml, "--junit-xml")
        for entry in entries:
            check_store(entry.spec.store, entry.spec.test_name)
    except (MatrixError, StoreError) as problem:
        raise click.ClickException(str(problem)) from None
    console = Console(stderr=True)
    show_progress = not no_progress and console.is_terminal

    def runner(spec: TestSpec) -> RunOutcome:
        outcome = run_test(spec, console=console, progress=show_progress)
        publish(outcome.run_dir)
        return outcome

    results = run_matrix(entries, runner, console, fail_fast=fail_fast)
    # CI logs are no terminal: rich would squeeze the table into 80 columns.
    wide = console if console.is_terminal else Console(stderr=True, width=_LOG_WIDTH)
    wide.print(_table(results))
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
