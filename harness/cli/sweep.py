"""``fencecheck sweep``: lease TTL by pause length by seeds, fenced and unfenced, as a table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.cli import EXIT_ERROR, EXIT_INVALID, EXIT_VALID, cli
from harness.cli.run import store_option
from harness.run.runner import RunOutcome, run_test
from harness.run.spec import TestSpec, split_names
from harness.run.store import StoreError, atomic_write, check_store, why_unwritable
from harness.run.sweep import QUICK, Cell, Grid, render_html, run_sweep

__all__ = ["sweep_command"]


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
    help="One TTL (0.5 s), pauses of 0.15, 0.8 and 3 TTLs, one seed (instead of the axes below).",
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
@click.option("--seeds", type=click.IntRange(1, 100), default=3, show_default=True)
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
    seeds: int,
    store: Path,
    page: Path | None,
) -> None:
    """Measure which designs survive which pauses: the share of runs with a stale write accepted
    per lease TTL and pause length, for the system fenced and with no-store-check (unfenced).

    Exit 0 when the fenced design accepted no stale write anywhere, 1 when it did, 3 on error.
    """
    axes = Grid(
        ttls=_numbers(ttls, "--ttls"),
        multiples=_numbers(pauses, "--pauses"),
        seeds=tuple(range(1, seeds + 1)),
    )
    grid = replace(QUICK if quick else axes, system=system)
    page = page or store / "sweep.html"
    console = Console(stderr=True)
    try:
        check_store(store, "sweep")
    except StoreError as problem:
        raise click.ClickException(str(problem)) from None
    total = len(grid.variants) * len(grid.ttls) * len(grid.multiples) * len(grid.seeds)
    done = 0

    def runner(spec: TestSpec) -> RunOutcome:
        return run_test(spec, console=console, progress=False)

    def on_run(cell: Cell) -> None:
        nonlocal done
        # A refused cell's seeds all go at once: none of them runs.
        done += len(grid.seeds) if cell.refused else 1
        found = (
            f"refused: {escape(cell.refused)}"
            if cell.refused
            else f"{cell.shown()} with a stale write"
        )
        console.print(
            f"[bold]{done}/{total}[/] {cell.variant.label}, TTL {cell.ttl:g} s, "
            f"pause {cell.multiple:g} x TTL: {found}"
        )

    cells = run_sweep(grid, runner, store, on_run)
    Console().print(_table(grid, cells))
    try:
        atomic_write(page, render_html(grid, cells).encode())
    except OSError as problem:
        console.print(f"[red]error:[/] cannot write {page}: {why_unwritable(problem)}")
        raise click.exceptions.Exit(EXIT_ERROR) from None
    console.print(f"page: {page}")
    fenced_failed = any(c.stale for c in cells if not c.variant.bugs)
    raise click.exceptions.Exit(EXIT_INVALID if fenced_failed else EXIT_VALID)


def _table(grid: Grid, cells: list[Cell]) -> Table:
    table = Table(title=f"stale writes accepted: {grid.system}")
    table.add_column("design")
    table.add_column("TTL")
    for multiple in grid.multiples:
        table.add_column(f"pause {multiple:g}x")
    for variant in grid.variants:
        for ttl in grid.ttls:
            row = [c for c in cells if c.variant == variant and c.ttl == ttl]
            table.add_row(variant.label, f"{ttl:g} s", *(c.shown() for c in row))
    return table
