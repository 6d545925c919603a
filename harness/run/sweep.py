"""The seed's table, measured: which designs survive which pauses.

A sweep runs a grid of lease TTL by holder pause length (as TTL multiples) by seeds for a system
and counts, per design and cell, the runs in which a stale write was accepted. Each run pauses
only the holder, only for the cell's length, under the ``sinks`` workload (every unit of work is
written to every sink of the inventory, unfenced ones first), and plants no bug: the designs are
the sinks the system already has. By default, on the reference system:

- ``fenced``: its fenced sinks (``store``, ``store-batch``), which check the epoch;
- ``unfenced``: its ``audit`` sink, which accepts every write (no fencing check), in runs with no
  lock-delay;
- ``lock-delay``: the same unfenced sink in runs whose lock service waits a lock-delay (here
  3 TTLs) after a lease expires before granting it again (Chubby's mitigation).

Designs measured on the same sinks share runs: one run with no lock-delay gives both the fenced
and the unfenced count of its cell. Nothing is refused for being "unable to show a bug": a pause
shorter than the lease is a legitimate cell whose expected answer is 0, and it is measured. A cell
that still could not run (the runner refused its spec, or the system has no sink of the design's
kind) is shown as such, with the reason, never dropped and never given an invented number.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from harness.run.results import StoredSink
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
    "stale_on",
    "variants",
]

_WORKLOAD: Final = "sinks"
_LEAD_AND_TAIL_TTL: Final = 4.0
"""A pause and this many TTLs (the schedule's lead-in, recovery and tail) make room for a window."""
_PAUSES_PER_RUN: Final = 3
"""A cell's run has room for this many pauses. A pause shows a stale write only when it lands in
the holder's critical section (after its lease check, before its write reaches the sink): most
do under ``sinks``, not all. With one or two a run past the lease sometimes shows nothing (seen
once in thirteen such runs), which measures where the pause landed, not what the design does."""
_MIN_RUN_S: Final = 6.0
"""...and lasts at least this long, so that short leases still see holders take over."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One design to sweep: a label, whether it is the system's fenced or unfenced sinks, and
    the lock-delay its runs use, in TTLs (the lock service's wait after an expiry)."""

    label: str
    fenced: bool = True
    lock_delay_ttl: float = 0.0

    @property
    def expected(self) -> str:
        """Where this design can accept a stale write: never (fenced), or when the pause outlasts
        what was left of the lease when it began (at most one TTL: a holder renews part-way
        through) plus the lock-delay."""
        if self.fenced:
            return "never"
        if not self.lock_delay_ttl:
            return "pause > lease left (<= 1x TTL)"
        return (
            f"pause > lease left + {self.lock_delay_ttl:g}x TTL (<= {1 + self.lock_delay_ttl:g}x)"
        )


def variants(lock_delay_ttl: float = 3.0) -> tuple[Variant, ...]:
    """The default designs: fenced, unfenced, and unfenced behind a lock-delay of
    ``lock_delay_ttl`` TTLs."""
    return (
        Variant("fenced"),
        Variant("unfenced (no fencing check)", fenced=False),
        Variant(f"unfenced + lock-delay {lock_delay_ttl:g}xTTL", False, lock_delay_ttl),
    )


@dataclass(frozen=True, slots=True)
class Grid:
    """The axes of a sweep."""

    system: str = "reference"
    variants: tuple[Variant, ...] = field(default_factory=variants)
    ttls: tuple[float, ...] = (1.0,)
    multiples: tuple[float, ...] = (0.15, 0.8, 3.0, 8.0)
    seeds: tuple[int, ...] = (1, 2, 3)


QUICK: Final = Grid(ttls=(0.5,), multiples=(0.15, 0.8, 3.0, 8.0), seeds=(1,))
"""``sweep --quick``: one TTL, the four default pause lengths (under, just under, past the lease,
and past the lease plus the lock-delay), one seed: a few minutes."""


@dataclass(slots=True)
class Cell:
    """One cell of the table: its variant, TTL and pause, and what its runs found.

    ``refused`` says why nothing ran in it (the runner refused the spec, or the system has no sink
    of the variant's kind)."""

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
        """``"2/3"``, ``"not run"`` when nothing ran in the cell, or ``"-"`` before it ran."""
        if self.runs:
            return f"{self.stale}/{self.runs}"
        return "not run" if self.refused else "-"


def cell_specs(
    grid: Grid, lock_delay_ttl: float, ttl: float, multiple: float, store: Path
) -> list[TestSpec]:
    """The runs of one cell for designs with lock-delay ``lock_delay_ttl``: holder pauses of
    ``multiple`` TTLs only, under the ``sinks`` workload, no bug planted, one run per seed."""
    room = (multiple + _LEAD_AND_TAIL_TTL) * ttl * _PAUSES_PER_RUN
    time_limit = max(_MIN_RUN_S, round(room, 1))
    delay = f"-lock-delay-{lock_delay_ttl:g}ttl" if lock_delay_ttl else ""
    return [
        TestSpec(
            system=grid.system,
            workload=_WORKLOAD,
            nemeses=("pause",),
            targets=("holder",),
            fault_lengths=(multiple,),
            ttl=ttl,
            lock_delay=round(lock_delay_ttl * ttl, 3),
            time_limit=time_limit,
            seed=seed,
            name=f"sweep-{grid.system}{delay}",
            store=store,
        )
        for seed in grid.seeds
    ]


def stale_on(sinks: Iterable[StoredSink], fenced: bool) -> bool | None:
    """Whether a stale write was accepted (counted or expected) on one of ``sinks`` that is
    ``fenced`` (or not); ``None`` when the run had no such sink."""
    chosen = [sink for sink in sinks if sink.fenced == fenced]
    if not chosen:
        return None
    return any(sink.stale_accepted for sink in chosen)


def run_sweep(
    grid: Grid,
    runner: Callable[[TestSpec], RunOutcome],
    store: Path,
    on_run: Callable[[Sequence[Cell], int], None] | None = None,
) -> list[Cell]:
    """Run every cell of ``grid`` (storing runs under ``store``) and count its stale writes per
    design; ``on_run(cells, runs)`` follows each run (``runs`` 1) or refusal (``runs``: the
    seeds that will not run) with the cells it counted for."""
    cells = [
        Cell(variant, ttl, multiple)
        for variant in grid.variants
        for ttl in grid.ttls
        for multiple in grid.multiples
    ]
    delays = sorted({v.lock_delay_ttl for v in grid.variants})
    for delay in delays:
        for ttl in grid.ttls:
            for multiple in grid.multiples:
                sharing = [
                    c
                    for c in cells
                    if c.variant.lock_delay_ttl == delay and (c.ttl, c.multiple) == (ttl, multiple)
                ]
                _run_cells(sharing, cell_specs(grid, delay, ttl, multiple, store), runner, on_run)
    return cells


def _run_cells(
    cells: Sequence[Cell],
    specs: Sequence[TestSpec],
    runner: Callable[[TestSpec], RunOutcome],
    on_run: Callable[[Sequence[Cell], int], None] | None,
) -> None:
    for number, spec in enumerate(specs):
        try:
            outcome = runner(spec)
        except RunError as problem:
            for cell in cells:
                cell.refused = str(problem)
            if on_run is not None:
                on_run(cells, len(specs) - number)
            return  # every seed of the cells is refused for the same reason
        stored = outcome.run_dir.read_results()
        for cell in cells:
            stale = stale_on(stored.sinks if stored else (), cell.variant.fenced)
            if stale is None:
                kind = "fenced" if cell.variant.fenced else "unfenced"
                cell.refused = f"{spec.system} has no {kind} sink in its inventory"
                continue
            cell.runs += 1
            cell.stale += stale
            cell.run_dirs.append(outcome.run_dir.path)
        if on_run is not None:
            on_run(cells, 1)


def render_html(grid: Grid, cells: Sequence[Cell]) -> str:
    """A self-contained page: one table per TTL, designs down, pause lengths across."""
    parts = [
        "<!doctype html><html lang=en><meta charset=utf-8><title>fencecheck sweep</title>",
        "<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #999;padding:4px 10px;text-align:center}"
        ".bad{background:#f6c5c5}.ok{background:#d3efd3}.na{color:#777}</style>",
        f"<h1>Stale writes accepted: {html.escape(grid.system)}</h1>",
        "<p>Fraction of runs, per cell, in which a write with an old epoch was accepted by the "
        "row's sinks. Each run pauses only the lock holder, for the column's multiple of the "
        "lease TTL, and writes every unit of work to every sink; no bug is planted. "
        "<em>expected</em> is where the design should fail: a fenced sink never, an unfenced one "
        "when the pause outlasts the lease (plus its lock-delay). <span class=na>not run</span> "
        "cells say why on hover.</p>",
    ]
    for ttl in grid.ttls:
        parts.append(f"<h2>lease TTL {ttl:g} s</h2><table><tr><th>design</th>")
        parts += [f"<th>pause {m:g}&times;TTL ({m * ttl:g} s)</th>" for m in grid.multiples]
        parts.append("<th>expected to fail</th></tr>")
        for variant in grid.variants:
            parts.append(f"<tr><th>{html.escape(variant.label)}</th>")
            parts += [_td(c) for c in cells if c.variant == variant and c.ttl == ttl]
            parts.append(f"<td>{html.escape(variant.expected)}</td></tr>")
        parts.append("</table>")
    parts.append("</html>")
    return "\n".join(parts)


def _td(cell: Cell) -> str:
    fraction = cell.fraction
    label = html.escape(cell.variant.label, quote=True)
    where = f'data-design="{label}" data-pause="{cell.multiple:g}"'
    if fraction is None:
        title = html.escape(cell.refused or "not run", quote=True)
        return f'<td class=na {where} title="{title}">{cell.shown()}</td>'
    style = "bad" if fraction else "ok"
    return f"<td class={style} {where}>{cell.shown()} ({fraction:.0%})</td>"
