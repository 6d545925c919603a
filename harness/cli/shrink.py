"""``fencecheck shrink``: turn a red run into the few faults that matter."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.cli import EXIT_ERROR, EXIT_INVALID, cli
from harness.cli.units import Duration
from harness.report import publish
from harness.run.replay import ReplayError, load_run
from harness.run.shrink import Shrunk, Trial, cluster_runner, shrink
from harness.run.store import RunDir, why_unwritable

__all__ = ["SHRUNK_FILE", "SHRUNK_MATRIX", "shrink_command"]

SHRUNK_FILE = "shrunk.json"
"""Where, in the run directory, ``shrink`` stores its result."""
SHRUNK_MATRIX = "shrunk-matrix.json"
"""Where, in the run directory, ``shrink`` stores the minimal candidate as a one-row matrix."""
_DEFAULT_RUNS = 20
_MOST_RUNS = 1000


@cli.command("shrink")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--budget",
    type=click.IntRange(1, _MOST_RUNS),
    default=None,
    help=f"Most candidate runs to spend (each a few seconds on a fresh cluster); default "
    f"{_DEFAULT_RUNS}, or no limit but --time when --time is given.",
)
@click.option(
    "--time-limit",
    "--time",
    "time_budget",
    type=Duration(positive=True),
    default=None,
    help="Wall-clock budget (90s, 15m, 1h): no candidate starts after it. With --budget, "
    "whichever runs out first (--time is the old spelling).",
)
@click.option(
    "--tries",
    type=click.IntRange(1, 10),
    default=1,
    show_default=True,
    help="Runs per candidate; a candidate is kept when one of them shows the anomaly.",
)
@click.option(
    "--anomaly", default=None, help="The anomaly type to keep (default: the run's first)."
)
@click.option("--no-progress", is_flag=True, help="No live display (CI logs).")
def shrink_command(
    run_dir: Path,
    budget: int | None,
    time_budget: float | None,
    tries: int,
    anomaly: str | None,
    no_progress: bool,
) -> None:
    """Shrink an invalid run (e.g. store/latest) to the fewest, shortest faults and workers that
    still show its anomaly, by re-running smaller candidates of its schedule.

    Prints and stores (RUN_DIR/shrunk.json) the minimal spec as a one-line command and as a matrix
    row with its exact windows (also RUN_DIR/shrunk-matrix.json, for run-all --matrix). Exit code:
    1 (the minimal run is invalid), 3 when it could not shrink.
    """
    # Under --time alone the runs are not counted down: the bar shows runs done, not a share.
    total = None if budget is None and time_budget is not None else budget
    if budget is None:
        budget = _MOST_RUNS if time_budget is not None else _DEFAULT_RUNS
    console = Console(stderr=True)
    try:
        stored = load_run(run_dir)
    except ReplayError as problem:
        raise click.ClickException(str(problem)) from None
    # Candidates are stored inside the run they shrink, out of the store's list of runs.
    runner = cluster_runner(console, stored.run.path / "shrink")
    columns = (
        TextColumn("[bold]shrink[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs  {task.description}"),
        TimeElapsedColumn(),
        *((TextColumn(f"of {time_budget:g} s"),) if time_budget is not None else ()),
    )
    best = len(stored.schedule.windows)
    show = not no_progress and console.is_terminal
    with Progress(*columns, console=console, disable=not show) as progress:
        task = progress.add_task(f"best: {_windows(best)}", total=total)

        def on_trial(trial: Trial, runs: int) -> None:
            nonlocal best
            size = len(trial.candidate.windows)
            if trial.kept:
                best = size
            mark = "[green]kept[/]" if trial.kept else "[dim]not kept[/]"
            console.print(f"{trial.step}: {_windows(size)}, {mark}")
            progress.update(task, completed=runs, description=f"best: {_windows(best)}")

        try:
            result = shrink(
                stored,
                runner,
                anomaly=anomaly,
                budget=budget,
                time_budget=time_budget,
                tries=tries,
                on_trial=on_trial,
            )
        except ValueError as problem:
            raise click.ClickException(str(problem)) from None
    _save(result, stored.run, console)
    _print(result, stored.run)
    raise click.exceptions.Exit(EXIT_INVALID)


def _windows(count: int) -> str:
    return f"{count} window{'' if count == 1 else 's'}"


def _save(result: Shrunk, run: RunDir, console: Console) -> None:
    try:
        run.write_json(run.path / SHRUNK_FILE, result.to_json())
        run.write_json(run.path / SHRUNK_MATRIX, result.matrix)
        if result.evidence != run.path:
            publish(RunDir(result.evidence))
    except OSError as problem:
        console.print(f"[red]error:[/] cannot write {SHRUNK_FILE}: {why_unwritable(problem)}")
        raise click.exceptions.Exit(EXIT_ERROR) from None


def _print(result: Shrunk, run: RunDir) -> None:
    before, after = len(result.original.windows), len(result.minimal.windows)
    workers = (result.original.spec.workers, result.minimal.spec.workers)
    keys = (result.original.spec.keys, result.minimal.spec.keys)
    budget = (
        f"budget {result.budget}"
        if result.time_budget is None
        else (f"budget {result.budget} runs or {result.time_budget:g} s")
    )
    click.echo(
        f"shrunk {before} windows to {after}, {workers[0]} workers to {workers[1]}, "
        f"{keys[0]} keys to {keys[1]}, "
        f"{result.original.spec.time_limit:g} s to {result.minimal.spec.time_limit:g} s "
        f"in {result.runs} runs, {result.seconds:.0f} s ({budget}); "
        f"{result.anomaly} still shows"
        + (" (interrupted: the best so far)" if result.interrupted else "")
    )
    ttl = result.minimal.spec.ttl
    for window in result.minimal.windows:
        click.echo(
            f"  window {window.index}: {window.kind} of {', '.join(window.targets)} for "
            f"{window.ttl_multiple:g} x TTL ({window.duration_ns / 1e9:g} s, TTL {ttl:g} s) "
            f"from {window.start_ns / 1e9:.3f} s"
        )
    click.echo(f"reproduce: {result.replay_command}")
    click.echo(f"exactly:   fencecheck run-all --matrix {run.path / SHRUNK_MATRIX}")
    click.echo(f"as a run:  {result.command}")
    click.echo(f"matrix row: {json.dumps(result.matrix_row)}")
    click.echo(f"stored in {run.path / SHRUNK_FILE}")
