"""Clock faults: how often the mistakes only they expose are caught, and false alarms without them.

Detection: for each switch (``wall-clock-expiry``, ``timestamp-token`` and the holder flaw
``trust-own-timer`` by default) N seeded runs of the reference system shaped by the switch's
``exposed_by`` (what ``fencecheck run --bug X --expose`` takes: faults, targets, workload, fault
lengths, lock-delay, writes per lease); per switch the runs whose verdict was invalid with one of
its own anomalies (detections out of N) and the median time, from the run's start, to the first
such violation.

False alarms: N seeded runs of each correct system (``reference``, ``redis``, ``zookeeper`` by
default) under ``--nemesis clock-step,clock-rate`` with every other setting the run's default;
per system the verdicts (``False`` is a false alarm). A run the harness refuses before it starts
(a clock fault aimed at a daemon that cannot take one) is counted as refused, with the reason.

    PYTHONPATH=. python3 bench/clock.py [--runs 20] [--time-limit 60] [--seed 1]
        [--switch NAME ...] [--system NAME ...] [--no-detection] [--no-false-alarms]

Each run is a real Docker cluster (about the time limit plus 10 s); on a shared machine run a
few (``--runs 3 --time-limit 30``). Exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from typing import Final

from rich.console import Console
from rich.table import Table

from bench.lock_service import first_violation
from harness.record.spec import TestSpec
from harness.run.exposure import expose, switches_of
from harness.run.runner import run_test
from systems import load_system

__all__ = ["main"]

_SWITCHES: Final = ("wall-clock-expiry", "trust-own-timer", "timestamp-token")
_SYSTEMS: Final = ("reference", "redis", "zookeeper")
_CLOCK_KINDS: Final = ("clock-step", "clock-rate")


def _detect(switch: str, seed: int, time_limit: float, console: Console) -> tuple[bool, int | None]:
    """One exposed run of ``switch``: whether it was caught, and when first (ns)."""
    system = load_system("reference")
    bug = switches_of(system)[switch]
    spec = expose(TestSpec(system="reference", bugs=(switch,), time_limit=time_limit, seed=seed))
    result = run_test(spec, console=console, progress=False).result
    names = [name for name in bug.anomalies if result.anomaly_counts.get(name)]
    caught = result.valid is False and bool(names)
    console.print(f"{switch} seed {seed}: {result.valid}, caught {caught}")
    return caught, first_violation(result, names)


def _correct(system: str, seed: int, time_limit: float, console: Console) -> str:
    """One run of the correct ``system`` under both clock kinds: its verdict, or why refused."""
    spec = TestSpec(system=system, nemeses=_CLOCK_KINDS, time_limit=time_limit, seed=seed)
    try:
        outcome = run_test(spec, console=console, progress=False)
    except (ValueError, LookupError) as problem:
        return f"refused: {problem}"
    verdict = str(outcome.result.valid) if outcome.error is None else f"error: {outcome.error}"
    console.print(f"{system} seed {seed}: {verdict}")
    return verdict


def _print(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per switch and system")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed")
    parser.add_argument("--switch", action="append", choices=_SWITCHES, help="default: all")
    parser.add_argument("--system", action="append", choices=_SYSTEMS, help="default: all")
    parser.add_argument("--no-detection", action="store_true", help="skip the switches")
    parser.add_argument("--no-false-alarms", action="store_true", help="skip the systems")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    seeds = range(args.seed, args.seed + args.runs)
    if not args.no_detection:
        rows = []
        for switch in args.switch or _SWITCHES:
            runs = [_detect(switch, seed, args.time_limit, console) for seed in seeds]
            firsts = [first for caught, first in runs if caught and first is not None]
            median = f"{statistics.median(firsts) / 1e9:.1f} s" if firsts else "-"
            rows.append((switch, f"{sum(caught for caught, _ in runs)}/{len(runs)}", median))
        title = f"detection: {args.runs} exposed runs of {args.time_limit:g} s"
        _print(title, ("switch", "detected", "median to first violation"), rows)
    if not args.no_false_alarms:
        rows = []
        for system in args.system or _SYSTEMS:
            verdicts = [_correct(system, seed, args.time_limit, console) for seed in seeds]
            invalid = sum(verdict == "False" for verdict in verdicts)
            rows.append((system, f"{invalid}/{len(verdicts)}", ", ".join(dict.fromkeys(verdicts))))
        title = f"false alarms: {args.runs} runs of {args.time_limit:g} s under clock faults"
        _print(title, ("system", "invalid", "verdicts"), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
