"""The seed's table, measured: which designs survive which pauses.

A sweep runs a grid of lease TTL by holder pause length (as TTL multiples) by seeds for a system
in several variants (by default the reference system as it is, fenced, and with
``no-store-check``, unfenced) and counts, per cell, the runs in which a stale write was accepted.
Each run pauses only the holder, only for the cell's length, so a cell's fraction says what that
pause does to that design: a fenced store must stay at 0 everywhere, an unfenced one fails where
the pause outlasts the lease.

A cell whose spec cannot show its planted bug (a pause no longer than the lease, with
``no-store-check``) is refused by the runner before anything starts; the table marks it so, with
the reason, instead of inventing a number for it.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from harness.run.replay import finding_of
from harness.run.runner import RunError, RunOutcome
from harness.run.spec import TestSpec

__all__ = [
    "QUICK",
    "Cell",
    "Grid",
    "Variant",
    "cell_specs",
    "render_html",
    "run_sweep",
]

_STALE: Final = "stale-write"
_LEAD_AND_TAIL_TTL: Final = 4.0
"""A pause and this many TTLs (the schedule's lead-in, recovery and tail) make room for one window;
a cell's run has room for two."""
_MIN_RUN_S: Final = 6.0
"""...and lasts at least this long, so that short leases still see holders take over."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One design to sweep: a label, the bug switches that make it, and its lock-delay."""

    label: str
    bugs: tuple[str, ...] = ()
    lock_delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Grid:
    """The axes of a sweep."""

    system: str = "reference"
    variants: tuple[Variant, ...] = (
        Variant("fenced"),
        Variant("unfenced (no-store-check)", ("no-store-check",)),
    )
    ttls: tuple[float, ...] = (1.0,)
    multiples: tuple[float, ...] = (0.15, 0.8, 3.0, 8.0)
    seeds: tuple[int, ...] = (1, 2, 3)


QUICK: Final = Grid(ttls=(0.5,), multiples=(0.15, 0.8, 3.0), seeds=(1,))
"""``sweep --quick``: one TTL, three pause lengths (under, just under and past the lease), one
seed: a couple of minutes."""


@dataclass(slots=True)
class Cell:
    """One cell of the table: its variant, TTL and pause, and what its runs found."""

    variant: Variant
    ttl: float
    multiple: float
    runs: int = 0
    stale: int = 0
    refused: str | None = None
    run_dirs: list[Path] = field(default_factory=list)

    @property
    def fraction(self) -> float | None:
        """Share of the runs with a stale write accepted (``None``: nothing ran)."""
        return self.stale / self.runs if self.runs else None

    def shown(self) -> str:
        """``"2/3"``, or ``"refused"`` when the runner would not run the cell."""
        if self.runs:
            return f"{self.stale}/{self.runs}"
        return "refused" if self.refused else "-"


def cell_specs(
    grid: Grid, variant: Variant, ttl: float, multiple: float, store: Path
) -> list[TestSpec]:
    """The runs of one cell: holder pauses of ``multiple`` TTLs only, one run per seed."""
    time_limit = max(_MIN_RUN_S, round((multiple + _LEAD_AND_TAIL_TTL) * ttl * 2, 1))
    return [
        TestSpec(
            system=grid.system,
            bugs=variant.bugs,
            nemeses=("pause",),
            targets=("holder",),
            fault_lengths=(multiple,),
            ttl=ttl,
            lock_delay=variant.lock_delay,
            time_limit=time_limit,
            seed=seed,
            name=f"sweep-{grid.system}-{'+'.join(variant.bugs) or 'fenced'}",
            store=store,
        )
        for seed in grid.seeds
    ]


def run_sweep(
    grid: Grid,
    runner: Callable[[TestSpec], RunOutcome],
    store: Path,
    on_run: Callable[[Cell], None] | None = None,
) -> list[Cell]:
    """Run every cell of ``grid`` (storing runs under ``store``) and count its stale writes;
    ``on_run(cell)`` follows each run, and each refused cell."""
    cells = []
    for variant in grid.variants:
        for ttl in grid.ttls:
            for multiple in grid.multiples:
                cell = Cell(variant, ttl, multiple)
                cells.append(cell)
                for spec in cell_specs(grid, variant, ttl, multiple, store):
                    try:
                        outcome = runner(spec)
                    except RunError as problem:
                        cell.refused = str(problem)
                        if on_run is not None:
                            on_run(cell)
                        break  # every seed of the cell is refused for the same reason
                    finding = finding_of(outcome.run_dir)
                    cell.runs += 1
                    cell.stale += _STALE in finding.anomaly_types
                    cell.run_dirs.append(outcome.run_dir.path)
                    if on_run is not None:
                        on_run(cell)
    return cells


def render_html(grid: Grid, cells: Sequence[Cell]) -> str:
    """A self-contained page: one table per TTL, variants down, pause lengths across."""
    parts = [
        "<!doctype html><html lang=en><meta charset=utf-8><title>fencecheck sweep</title>",
        "<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:4px 10px;text-align:center}"
        ".bad{background:#f6c5c5}.ok{background:#d3efd3}.na{color:#777}</style>",
        f"<h1>Stale writes accepted: {html.escape(grid.system)}</h1>",
        "<p>Fraction of runs, per cell, in which a write with an old epoch was accepted. Each run "
        "pauses only the lock holder, for the column's multiple of the lease TTL.</p>",
    ]
    for ttl in grid.ttls:
        parts.append(f"<h2>lease TTL {ttl:g} s</h2><table><tr><th>design</th>")
        parts += [f"<th>pause {m:g}&times;TTL ({m * ttl:g} s)</th>" for m in grid.multiples]
        parts.append("</tr>")
        for variant in grid.variants:
            parts.append(f"<tr><th>{html.escape(variant.label)}</th>")
            for cell in cells:
                if cell.variant == variant and cell.ttl == ttl:
                    parts.append(_td(cell))
            parts.append("</tr>")
        parts.append("</table>")
    parts.append("</html>")
    return "\n".join(parts)


def _td(cell: Cell) -> str:
    fraction = cell.fraction
    if fraction is None:
        title = html.escape(cell.refused or "not run", quote=True)
        return f'<td class=na title="{title}">{cell.shown()}</td>'
    style = "bad" if fraction else "ok"
    return f"<td class={style}>{cell.shown()} ({fraction:.0%})</td>"
