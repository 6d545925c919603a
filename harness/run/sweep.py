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

With ``rates`` the columns are the holder's clock rate instead (the rate x TTL table): each run
runs the holder's clock at the column's rate (``clock-rate``, in windows three TTLs long, the
rate pinned in every window of the seed's schedule) instead of pausing it, and the same designs
are counted. A slow clock keeps a holder that trusts its own timer writing after its lease: the
unfenced design shows it; behind a lock-delay the careful holder confirms its lease with the
lock service past its first half (``harness.nodeside.agent``), and the fenced one refuses it.
With a ``pair`` of fault kinds (``sweep --kinds pause,kill``), each run plays those two kinds
instead, every window overlapped by one of the other kind (``overlap`` 1, aimed at the targets
``pair_targets``), both at the column's length, and each cell also says how long the two were in
force together per run (from the coverage's ``overlaps``): overlap length against the TTL.

Designs measured on the same sinks share runs: one run with no lock-delay gives both the fenced
and the unfenced count of its cell. Nothing is refused for being "unable to show a bug": a pause
shorter than the lease is a legitimate cell whose expected answer is 0, and it is measured. A cell
that still could not run (the runner refused its spec, or the system has no sink of the design's
kind) is shown as such, with the reason, never dropped and never given an invented number.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from harness.record.results import StoredResults, StoredSink
from harness.record.spec import TestSpec
from harness.run.judge import RunOutcome
from harness.run.plan import RunError
from nemeses import Schedule, generate_schedule
from systems import load_system, topology

__all__ = [
    "QUICK",
    "Cell",
    "Grid",
    "Runner",
    "Variant",
    "cell_specs",
    "rate_schedule",
    "render_html",
    "run_sweep",
    "stale_on",
    "variants",
]

Runner = Callable[[TestSpec, Schedule | None], RunOutcome]
"""Carries out one run: its spec, and the schedule to play (``None``: the seed's)."""

_RATE_WINDOW_TTL: Final = 3.0
"""A rate cell's windows last this many TTLs: long enough to move a lease across its expiry."""
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
    rates: tuple[float, ...] = ()
    """The holder's clock rates to sweep instead of pause lengths (empty: pauses)."""

    @property
    def columns(self) -> tuple[float, ...]:
        """The values across: the rates, or else the pause lengths (TTL multiples)."""
        return self.rates or self.multiples

    def expected(self, variant: Variant) -> str:
        """Where ``variant`` should fail along this grid's columns."""
        if not self.rates:
            return variant.expected
        if variant.fenced:
            return "never"
        if not variant.lock_delay_ttl:
            return "rate < 1 (the holder's own timer outlives its lease)"
        return "never (past half its lease the holder confirms it with the lock service)"

    def heading(self, value: float) -> str:
        """A column's heading: ``pause 3x`` or ``rate 0.25x``."""
        return f"{'rate' if self.rates else 'pause'} {value:g}x"

    pair: tuple[str, ...] = ()
    """Two fault kinds overlapped in every run instead of holder pauses alone (module docs)."""
    pair_targets: tuple[str, ...] = ("holder",)


QUICK: Final = Grid(ttls=(0.5,), multiples=(0.15, 0.8, 3.0, 8.0), seeds=(1,))
"""``sweep --quick``: one TTL, the four default pause lengths (under, just under, past the lease,
and past the lease plus the lock-delay), one seed: a few minutes."""


@dataclass(slots=True)
class Cell:
    """One cell of the table: its variant, TTL and pause (or rate: ``multiple`` is the column's
    value), and what its runs found.

    ``refused`` says why nothing ran in it (the runner refused the spec, or the system has no sink
    of the variant's kind)."""

    variant: Variant
    ttl: float
    multiple: float
    runs: int = 0
    stale: int = 0
    refused: str | None = None
    run_dirs: list[Path] = field(default_factory=list)
    together_s: float | None = None
    """For a sweep of a pair of kinds: the seconds they were in force together, over its runs."""

    @property
    def fraction(self) -> float | None:
        """Share of the runs with a stale write accepted (``None``: nothing ran)."""
        return self.stale / self.runs if self.runs else None

    def shown(self) -> str:
        """``"2/3"``, ``"not run"`` when nothing ran in the cell, or ``"-"`` before it ran."""
        if self.runs and self.together_s is not None:
            return f"{self.stale}/{self.runs}, together {self.together_s / self.runs:.2f} s/run"
        if self.runs:
            return f"{self.stale}/{self.runs}"
        return "not run" if self.refused else "-"


def cell_specs(
    grid: Grid, lock_delay_ttl: float, ttl: float, multiple: float, store: Path
) -> list[TestSpec]:
    """The runs of one cell for designs with lock-delay ``lock_delay_ttl``: holder pauses of
    ``multiple`` TTLs only (for a grid of rates: holder clock-rate windows of three TTLs, the
    rate pinned by :func:`rate_schedule`), under the ``sinks`` workload, no bug planted, one run
    per seed."""
    length = _RATE_WINDOW_TTL if grid.rates else multiple
    room = (length + _LEAD_AND_TAIL_TTL) * ttl * _PAUSES_PER_RUN
    time_limit = max(_MIN_RUN_S, round(room, 1))
    delay = f"-lock-delay-{lock_delay_ttl:g}ttl" if lock_delay_ttl else ""
    return [
        TestSpec(
            system=grid.system,
            workload=_WORKLOAD,
            nemeses=("clock-rate",) if grid.rates else (grid.pair or ("pause",)),
            targets=grid.pair_targets if grid.pair else ("holder",),
            overlap=1.0 if grid.pair else 0.0,
            fault_lengths=(length,),
            ttl=ttl,
            lock_delay=round(lock_delay_ttl * ttl, 3),
            time_limit=time_limit,
            seed=seed,
            name=f"sweep-{grid.system}{delay}",
            store=store,
        )
        for seed in grid.seeds
    ]


def rate_schedule(spec: TestSpec, rate: float) -> Schedule:
    """The seed's schedule of ``spec`` with every window's clock rate set to ``rate``; raises
    :class:`RunError` when the spec schedules none."""
    nodes = dict(topology(load_system(spec.system).roles(), spec.workers))
    try:
        drawn = generate_schedule(
            spec.seed,
            nodes,
            lease_ttl_ns=round(spec.ttl * 1e9),
            duration_ns=round(spec.time_limit * 1e9),
            kinds=spec.nemeses,
            targets=spec.targets,
            ttl_multiples=spec.fault_lengths,
        )
    except (ValueError, RuntimeError) as problem:
        raise RunError(f"no schedule for this cell: {problem}") from None
    windows = tuple(replace(w, params={**w.params, "rate": rate}) for w in drawn.windows)
    return replace(drawn, windows=windows)


def stale_on(sinks: Iterable[StoredSink], fenced: bool) -> bool | None:
    """Whether a stale write was accepted (counted or expected) on one of ``sinks`` that is
    ``fenced`` (or not); ``None`` when the run had no such sink."""
    chosen = [sink for sink in sinks if sink.fenced == fenced]
    if not chosen:
        return None
    return any(sink.stale_accepted for sink in chosen)


def run_sweep(
    grid: Grid,
    runner: Runner,
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
        for multiple in grid.columns
    ]
    delays = sorted({v.lock_delay_ttl for v in grid.variants})
    for delay in delays:
        for ttl in grid.ttls:
            for multiple in grid.columns:
                sharing = [
                    c
                    for c in cells
                    if c.variant.lock_delay_ttl == delay and (c.ttl, c.multiple) == (ttl, multiple)
                ]
                specs = cell_specs(grid, delay, ttl, multiple, store)
                rate = multiple if grid.rates else None
                _run_cells(sharing, specs, rate, runner, on_run, "+".join(sorted(grid.pair)))
    return cells


def _run_cells(
    cells: Sequence[Cell],
    specs: Sequence[TestSpec],
    rate: float | None,
    runner: Runner,
    on_run: Callable[[Sequence[Cell], int], None] | None,
    pair: str,
) -> None:
    for number, spec in enumerate(specs):
        try:
            outcome = runner(spec, None if rate is None else rate_schedule(spec, rate))
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
            if pair:
                cell.together_s = (cell.together_s or 0.0) + _together_s(stored, pair)
        if on_run is not None:
            on_run(cells, 1)


def _together_s(stored: StoredResults | None, pair: str) -> float:
    """Seconds the kinds of ``pair`` (``"kill+pause"``) were in force together in a run."""
    coverage = stored.coverage if stored is not None else None
    row = coverage.overlaps.get(pair) if coverage is not None else None
    return float(row.seconds) if row is not None and row.seconds is not None else 0.0


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
        if grid.rates:
            parts += [f"<th>holder clock at {m:g}&times;</th>" for m in grid.columns]
        else:
            parts += [f"<th>pause {m:g}&times;TTL ({m * ttl:g} s)</th>" for m in grid.columns]
        parts.append("<th>expected to fail</th></tr>")
        for variant in grid.variants:
            parts.append(f"<tr><th>{html.escape(variant.label)}</th>")
            parts += [_td(c) for c in cells if c.variant == variant and c.ttl == ttl]
            parts.append(f"<td>{html.escape(grid.expected(variant))}</td></tr>")
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
