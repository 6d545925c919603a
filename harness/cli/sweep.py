"""``fencecheck sweep``: lease TTL by pause length by seeds, fenced, unfenced and with a
lock-delay, as a table and a page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.cli import EXIT_ERROR, EXIT_INVALID, EXIT_VALID, cli
from harness.cli.run import store_option
from harness.record.spec import TestSpec, split_names
from harness.run.judge import RunOutcome
from harness.run.runner import run_test
from harness.run.store import StoreError, atomic_write, check_store, why_unwritable
from harness.run.sweep import QUICK, Cell, Grid, render_html, run_sweep, variants
from nemeses import Schedule

__all__ = ["sweep_command"]

_LOG_WIDTH = 160


def _numbers(text: str, option: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in split_names(text))
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: give numbers such as 0.5,1", param_hint=option
        ) from None


@cli.command("sweep")
@click.option(
    "--quick",
    is_flag=True,
    help="One TTL (0.5 s), pauses of 0.15, 0.8, 3 and 8 TTLs, one seed (not the axes below).",
)
@click.option("--system", default="reference", show_default=True, help="System to sweep.")
@click.option(
    "--ttls", default="1", show_default=True, help="Lease TTLs, seconds, comma-separated."
)
@click.option(
    "--pauses",
    default="0.15,0.8,3,8",
    show_default=True,
    help="Holder pause lengths as TTL multiples, comma-separated.",
)
@click.option(
    "--rates",
    default="",
    help="Sweep the holder's clock rate instead of pauses (the rate x TTL table): rates, "
    "comma-separated, e.g. 0.25,0.5,2 (clock-rate windows of 3 TTLs).",
)
@click.option("--seeds", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option(
    "--kinds",
    default="",
    help="Two fault kinds to overlap in every run instead of holder pauses (e.g. pause,kill); "
    "each cell then also says how long they were in force together per run.",
)
@click.option(
    "--targets",
    default="holder,store",
    show_default=True,
    help="Fault targets of a --kinds sweep, comma-separated.",
)
@click.option(
    "--lock-delay-ttls",
    "--lock-delay",
    "lock_delay_ttl",
    type=click.FloatRange(0, 100, min_open=True),
    default=3.0,
    show_default=True,
    help="The lock-delay design's lock-delay, in TTLs (run's --lock-delay is in seconds; "
    "--lock-delay here is the old spelling).",
)
@store_option
@click.option(
    "--html",
    "page",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the HTML page (default: STORE/sweep.html).",
)
def sweep_command(
    quick: bool,
    system: str,
    ttls: str,
    pauses: str,
    rates: str,
    seeds: int,
    kinds: str,
    targets: str,
    lock_delay_ttl: float,
    store: Path,
    page: Path | None,
) -> None:
    """Measure which designs survive which pauses: the share of runs with a stale write accepted
    per lease TTL and pause length, on the system's fenced sinks, on its unfenced sink, and on
    that unfenced sink behind a lock-delay. No bug is planted; every cell is measured.

    Exit 0 when the fenced design accepted no stale write anywhere, 1 when it did, 3 on error.
    """
    axes = Grid(
        ttls=_numbers(ttls, "--ttls"),
        multiples=_numbers(pauses, "--pauses"),
        seeds=tuple(range(1, seeds + 1)),
    )
    swept = _numbers(rates, "--rates") if rates else ()
    pair = split_names(kinds)
    if pair and len(set(pair)) != 2:
        raise click.BadParameter(
            f"{kinds!r}: give two fault kinds, e.g. pause,kill", param_hint="--kinds"
        )
    if pair and swept:
        raise click.BadParameter(
            "a sweep varies either the clock rate or two overlapping kinds; give one",
            param_hint="--rates/--kinds",
        )
    grid = replace(
        QUICK if quick else axes,
        system=system,
        variants=variants(lock_delay_ttl),
        rates=swept,
        pair=pair,
        pair_targets=split_names(targets) or ("holder",),
    )
    page = page or store / "sweep.html"
    console = Console(stderr=True)
    try:
        check_store(store, "sweep")
    except StoreError as problem:
        raise click.ClickException(str(problem)) from None
    delays = {v.lock_delay_ttl for v in grid.variants}
    total = len(delays) * len(grid.ttls) * len(grid.columns) * len(grid.seeds)
    done = 0

    def runner(spec: TestSpec, schedule: Schedule | None) -> RunOutcome:
        return run_test(spec, console=console, progress=False, schedule=schedule)

    def on_run(counted: Sequence[Cell], runs: int) -> None:
        nonlocal done
        done += runs
        first = counted[0]
        head = f"[bold]{done}/{total}[/] TTL {first.ttl:g} s, {grid.heading(first.multiple)}:"
        found = "; ".join(
            f"{c.variant.label} "
            + (f"not run: {escape(c.refused)}" if c.refused else f"{c.shown()} stale")
            for c in counted
        )
        console.print(f"{head} {found}")

    cells = run_sweep(grid, runner, store, on_run)
    out = Console()
    # A log or a pipe is no terminal: rich would squeeze the table into 80 columns.
    (out if out.is_terminal else Console(width=_LOG_WIDTH)).print(_table(grid, cells))
    try:
        atomic_write(page, render_html(grid, cells).encode())
    except OSError as problem:
        console.print(f"[red]error:[/] cannot write {page}: {why_unwritable(problem)}")
        raise click.exceptions.Exit(EXIT_ERROR) from None
    console.print(f"page: {page}")
    fenced_failed = any(c.stale for c in cells if c.variant.fenced)
    raise click.exceptions.Exit(EXIT_INVALID if fenced_failed else EXIT_VALID)


def _table(grid: Grid, cells: list[Cell]) -> Table:
    table = Table(title=f"stale writes accepted: {grid.system}")
    table.add_column("design")
    table.add_column("TTL")
    for multiple in grid.columns:
        table.add_column(grid.heading(multiple))
    table.add_column("expected to fail")
    for variant in grid.variants:
        for ttl in grid.ttls:
            row = [c for c in cells if c.variant == variant and c.ttl == ttl]
            shown = (c.shown() for c in row)
            table.add_row(variant.label, f"{ttl:g} s", *shown, grid.expected(variant))
    return table
