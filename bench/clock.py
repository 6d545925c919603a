"""Clock faults: how often the mistakes only they expose are caught, and false alarms without them.

Detection: for each switch (the reference's ``wall-clock-expiry`` and ``timestamp-token``, the
holder flaw ``trust-own-timer`` on the reference, Redis's ``owned-trusts-lease`` by default) N
seeded runs of its system with what ``fencecheck run --bug X`` picks from the switch's
``exposed_by`` (faults, targets, workload, fault lengths, lock-delay, writes per lease: every
field but the bench's length and seed); per switch the runs whose verdict was invalid with one of
its own anomalies (detections out of N) and the median time, from the run's start, to the first
such violation.

False alarms: N seeded runs of each correct system (``reference``, ``redis``, ``zookeeper`` by
default) under ``--nemesis clock-step,clock-rate`` with every other setting the run's default but
the targets (``--target``, default the run's own: the holders' agents; ``holder,lock`` moves the
lock service's clocks too); per system the verdicts (``False`` is a false alarm). A run the
harness refuses before it starts (a clock fault aimed at a daemon that cannot take one) is counted
as refused, with the reason.
Every run prints one line (its verdict and its folder, which a false alarm keeps) as it ends.

    PYTHONPATH=. python3 bench/clock.py [--runs 20] [--time-limit 60] [--seed 1] [--store DIR]
        [--switch NAME ...] [--system NAME ...] [--target T,T] [--no-detection]
        [--no-false-alarms]

Each run is a real Docker cluster (about the time limit plus 10 s); on a shared machine run a
few (``--runs 3 --time-limit 30``). Exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Final

from rich.console import Console
from rich.table import Table

from bench.lock_service import first_violation
from harness.record.spec import TestSpec
from harness.run.exposure import exposure_fields, switches_of
from harness.run.plan import RunError
from harness.run.runner import run_test
from systems import load_system

__all__ = ["main"]

_SWITCHES: Final = {
    "wall-clock-expiry": "reference",
    "trust-own-timer": "reference",
    "timestamp-token": "reference",
    "owned-trusts-lease": "redis",
}
"""Each switch and the system it is planted in."""
_BENCH_FIELDS: Final = ("time_limit", "seed")
_LOAD_WAIT_S: Final = 30.0


def _wait_for_quiet(max_load: float) -> None:
    """Wait while the machine's 1-minute load is above ``max_load``: a run started on a machine
    that busy measures the machine, not the clock faults."""
    while os.getloadavg()[0] > max_load:
        time.sleep(_LOAD_WAIT_S)


_SYSTEMS: Final = ("reference", "redis", "zookeeper")
_CLOCK_KINDS: Final = ("clock-step", "clock-rate")


def _detect(
    switch: str, seed: int, args: argparse.Namespace, console: Console
) -> tuple[bool, int | None]:
    """One run of ``switch`` as ``run --bug SWITCH --seed SEED`` makes it: whether it was caught,
    and when first (ns)."""
    system = _SWITCHES[switch]
    switches = switches_of(load_system(system))
    bug = switches[switch]
    picked = {
        k: v for k, v in exposure_fields(switches, (switch,)).items() if k not in _BENCH_FIELDS
    }
    spec = TestSpec(
        system=system, bugs=(switch,), time_limit=args.time_limit, seed=seed, store=args.store
    )
    _wait_for_quiet(args.max_load)
    try:
        outcome = run_test(replace(spec, **picked), console=console, progress=False)
    except RunError as problem:
        print(f"{switch} seed {seed}: error: {problem}")
        return False, None
    result = outcome.result
    names = [name for name in bug.anomalies if result.anomaly_counts.get(name)]
    caught = result.valid is False and bool(names)
    first = first_violation(result, names)
    when = f", first at {first / 1e9:.1f} s" if caught and first is not None else ""
    print(f"{switch} seed {seed}: {result.valid}, caught {caught}{when} {outcome.run_dir.path}")
    return caught, first


def _correct(system: str, seed: int, args: argparse.Namespace, console: Console) -> str:
    """One run of the correct ``system`` under both clock kinds: its verdict, or why refused."""
    spec = TestSpec(
        system=system,
        nemeses=_CLOCK_KINDS,
        time_limit=args.time_limit,
        seed=seed,
        store=args.store,
    )
    if args.target:
        spec = replace(spec, targets=tuple(args.target.split(",")))
    _wait_for_quiet(args.max_load)
    try:
        outcome = run_test(spec, console=console, progress=False)
    except (ValueError, LookupError) as problem:
        print(f"{system} seed {seed}: refused: {problem}")
        return f"refused: {problem}"
    except RunError as problem:
        print(f"{system} seed {seed}: error: {problem}")
        return f"error: {problem}"
    verdict = str(outcome.result.valid) if outcome.error is None else f"error: {outcome.error}"
    print(f"{system} seed {seed}: {verdict} {outcome.run_dir.path}")
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
    parser.add_argument(
        "--max-load", type=float, default=6.0, help="wait before a run while the load is above"
    )
    parser.add_argument("--store", type=Path, default=Path("store"), help="folder of the runs")
    parser.add_argument("--switch", action="append", choices=tuple(_SWITCHES), help="default: all")
    parser.add_argument("--system", action="append", choices=_SYSTEMS, help="default: all")
    parser.add_argument("--target", help="the false-alarm runs' targets (default: the run's)")
    parser.add_argument("--no-detection", action="store_true", help="skip the switches")
    parser.add_argument("--no-false-alarms", action="store_true", help="skip the systems")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    seeds = range(args.seed, args.seed + args.runs)
    if not args.no_detection:
        rows = []
        for switch in args.switch or _SWITCHES:
            runs = [_detect(switch, seed, args, console) for seed in seeds]
            firsts = [first for caught, first in runs if caught and first is not None]
            median = f"{statistics.median(firsts) / 1e9:.1f} s" if firsts else "-"
            rows.append((switch, f"{sum(caught for caught, _ in runs)}/{len(runs)}", median))
        title = f"detection: {args.runs} exposed runs of {args.time_limit:g} s"
        _print(title, ("switch", "detected", "median to first violation"), rows)
    if not args.no_false_alarms:
        rows = []
        for system in args.system or _SYSTEMS:
            verdicts = [_correct(system, seed, args, console) for seed in seeds]
            invalid = sum(verdict == "False" for verdict in verdicts)
            rows.append((system, f"{invalid}/{len(verdicts)}", ", ".join(dict.fromkeys(verdicts))))
        aimed = f" at {args.target}" if args.target else ""
        title = f"false alarms: {args.runs} runs of {args.time_limit:g} s under clock faults{aimed}"
        _print(title, ("system", "invalid", "verdicts"), rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
