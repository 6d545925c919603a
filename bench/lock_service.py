"""Detection of the lock-service switches: how often, and how soon, a default run catches them.

For each switch (``token-before-lease``, ``grant-to-expired-waiter`` by default) it runs N seeded
runs of the reference system with what ``fencecheck run --bug X`` picks by itself (the faults
and targets of the switch's ``exposed_by``, every other setting the run's default) and prints,
per switch, the runs whose verdict was invalid with one of the switch's own anomalies
(detections out of N) and the median time, from the run's start, to the first such violation
(the completion of the earliest operation its evidence names as the violating one).

    PYTHONPATH=. python3 bench/lock_service.py [--runs 20] [--time-limit 60] [--seed 1]

Each run is a real Docker cluster: the defaults take about 20 x 2 x 70 s. On a shared machine
run a few (``--runs 3 --time-limit 30``). Exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from rich.console import Console
from rich.table import Table

from checkers import CheckResult
from harness.run.exposure import exposing_faults, switches_of
from harness.run.runner import run_test
from harness.run.spec import TestSpec
from systems import load_system

__all__ = ["main"]

_SYSTEM: Final = "reference"
_SWITCHES: Final = ("token-before-lease", "grant-to-expired-waiter")


@dataclass(frozen=True, slots=True)
class _Run:
    seed: int
    caught: bool
    first_ns: int | None
    verdict: str


def first_violation(result: CheckResult, names: Sequence[str]) -> int | None:
    """When the earliest counted anomaly of ``names`` completed (ns since the run began): the
    latest completion among the operations of its evidence, the moment it became visible."""
    times = [
        max(op.time for op in anomaly.ops if op.time is not None)
        for name in names
        for anomaly in result.anomalies.get(name, ())
        if any(op.time is not None for op in anomaly.ops)
    ]
    return min(times) if times else None


def _one(switch: str, seed: int, time_limit: float, console: Console) -> _Run:
    """One run of ``switch`` as ``run --bug SWITCH --seed SEED`` would make it."""
    bug = switches_of(load_system(_SYSTEM))[switch]
    picked = exposing_faults({switch: bug}, (switch,))
    spec = TestSpec(system=_SYSTEM, bugs=(switch,), time_limit=time_limit, seed=seed)
    if picked is not None:
        spec = replace(spec, nemeses=picked[0], targets=picked[1])
    outcome = run_test(spec, console=console, progress=False)
    result = outcome.result
    names = [name for name in bug.anomalies if result.anomaly_counts.get(name)]
    return _Run(
        seed,
        result.valid is False and bool(names),
        first_violation(result, names),
        str(result.valid),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per switch")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed")
    parser.add_argument("--switch", action="append", choices=_SWITCHES, help="default: both")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    table = Table(title=f"{_SYSTEM}: {args.runs} runs of {args.time_limit:g} s per switch")
    for column in ("switch", "detected", "median to first violation", "verdicts"):
        table.add_column(column)
    for switch in args.switch or _SWITCHES:
        table.add_row(*detect(switch, args.runs, args.seed, args.time_limit, console))
    Console().print(table)
    return 0


def detect(
    switch: str, runs: int, seed: int, time_limit: float, console: Console
) -> tuple[str, str, str, str]:
    """``runs`` seeded runs of ``switch`` from ``seed`` on: its row (switch, detections out of
    the runs, median time to the first violation, the verdicts)."""
    done = []
    for at in range(runs):
        run = _one(switch, seed + at, time_limit, console)
        console.print(f"{switch} seed {run.seed}: {run.verdict}, caught {run.caught}")
        done.append(run)
    firsts = [run.first_ns for run in done if run.caught and run.first_ns is not None]
    median = f"{statistics.median(firsts) / 1e9:.1f} s" if firsts else "-"
    verdicts = ", ".join(run.verdict for run in done)
    return switch, f"{sum(run.caught for run in done)}/{len(done)}", median, verdicts


if __name__ == "__main__":
    raise SystemExit(main())
