"""Power loss: how often a default run catches the switches only it exposes, and whether the
correct systems stay valid under it.

Detection: for each of ``mark-no-fsync``, ``ack-before-fsync`` and ``counter-no-fsync`` (the
reference system's), ``appendfsync-everysec`` and ``appendfsync-no`` (Redis's),
``force-sync-no`` (ZooKeeper's) and ``pg-fsync-off`` (etcd's PostgreSQL), N seeded runs with
what ``fencecheck run --bug X`` picks by itself: detections out of N (invalid with one of the
switch's own anomalies) and the median time to the first violation. False alarms: N seeded runs
of each correct system (reference by default) under ``--nemesis power-loss,kill,pause`` (or the
``--nemesis``, ``--target`` and ``--fault-lengths`` given: ``--nemesis power-loss --target
lock-all --fault-lengths 1.1`` is the whole ZooKeeper ensemble losing power, as
``force-sync-no``'s exposure has it): the runs whose verdict was invalid (should be 0).

    PYTHONPATH=. python3 bench/power_loss.py [--runs 20] [--time-limit 60] [--seed 1]
        [--switch NAME ...] [--system NAME ...] [--workload NAME] [--no-detection]
        [--no-false-alarms] [--nemesis KINDS] [--target TARGETS] [--fault-lengths MULTIPLES]
        [--ttl S] [--busy-load LOAD] [--store DIR]

Each run prints one line (seed, verdict, time to the first violation, run folder); each switch
and each system ends with one summary line. Each run is a real Docker cluster: the defaults take
about 20 x 4 x 70 s. On a shared machine run a few (``--runs 3 --time-limit 30``). Exit status 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from bench.lock_service import first_violation
from harness.record.spec import TestSpec
from harness.run.exposure import exposure_fields, switches_of
from harness.run.judge import RunOutcome
from harness.run.runner import run_test
from systems import load_system

__all__ = ["main"]

_SWITCHES: Final = {
    "mark-no-fsync": "reference",
    "ack-before-fsync": "reference",
    "counter-no-fsync": "reference",
    "appendfsync-everysec": "redis",
    "appendfsync-no": "redis",
    "force-sync-no": "zookeeper",
    "pg-fsync-off": "etcd",
}
"""Each switch only a power loss exposes, with its system."""
_BENCH_FIELDS: Final = frozenset(("time_limit", "seed"))


_NEMESES: Final = ("power-loss", "kill", "pause")
_BUSY_LOAD: Final = 6.0
"""The one-minute load above which a run waits: on a shared machine a busier one starves the
holders' renewals, and the verdict would be the machine's, not the system's."""
_BUSY_WAIT_S: Final = 30.0


def _stop_if_interrupted(outcome: RunOutcome) -> None:
    """End the bench (exit 0) after a run a signal stopped: each run takes the signal as its own
    end, and without this a Ctrl-C would only move the bench on to the next seed."""
    if outcome.interrupted:
        print("interrupted: the bench stops here", flush=True)
        raise SystemExit(0)


def _wait_for_quiet(busy: float) -> None:
    """Return once the one-minute load is at most ``busy``."""
    while os.getloadavg()[0] > busy:
        time.sleep(_BUSY_WAIT_S)


def detect(
    switch: str,
    runs: int,
    seed: int,
    time_limit: float,
    store: Path,
    console: Console,
    busy: float = _BUSY_LOAD,
) -> tuple[str, str, str, str]:
    """``runs`` seeded runs of ``switch`` as ``run --bug SWITCH`` makes them: its row (switch,
    detections out of the runs, median time to the first violation, the verdicts)."""
    system = _SWITCHES[switch]
    switches = switches_of(load_system(system))
    bug = switches[switch]
    # What `run --bug SWITCH` fills in (the exposure), except the bench's own length and seed.
    picked = {
        k: v for k, v in exposure_fields(switches, (switch,)).items() if k not in _BENCH_FIELDS
    }
    caught, firsts, verdicts = 0, [], []
    for at in range(runs):
        spec = TestSpec(
            system=system, bugs=(switch,), time_limit=time_limit, seed=seed + at, store=store
        )
        spec = replace(spec, **picked)
        _wait_for_quiet(busy)
        outcome = run_test(spec, console=console, progress=False)
        result = outcome.result
        own = [name for name in bug.anomalies if result.anomaly_counts.get(name)]
        hit = result.valid is False and bool(own)
        first = first_violation(result, own) if hit else None
        caught += hit
        if first is not None:
            firsts.append(first)
        verdicts.append(str(result.valid))
        at_first = f"{first / 1e9:.1f} s" if first is not None else "-"
        print(
            f"{switch} seed {seed + at}: valid {result.valid}, caught {hit}, first violation "
            f"{at_first}, {dict(result.anomaly_counts)} {outcome.run_dir.path}",
            flush=True,
        )
        _stop_if_interrupted(outcome)
    median = f"{statistics.median(firsts) / 1e9:.1f} s" if firsts else "-"
    print(
        f"SUMMARY {switch}: caught {caught}/{runs}, median to first violation {median}, "
        f"seeds {seed}..{seed + runs - 1}, {time_limit:g} s runs",
        flush=True,
    )
    return switch, f"{caught}/{runs}", median, ", ".join(verdicts)


def false_alarms(
    system: str,
    runs: int,
    seed: int,
    time_limit: float,
    store: Path,
    console: Console,
    faults: Mapping[str, Any],
    busy: float = _BUSY_LOAD,
) -> str:
    """How many of ``runs`` seeded runs of correct ``system`` under ``faults`` (the spec's
    ``nemeses`` and any ``targets``, ``fault_lengths`` and ``ttl``) ended invalid, and every
    verdict."""
    verdicts = []
    nemeses = ",".join(faults["nemeses"])
    for at in range(runs):
        spec = TestSpec(system=system, time_limit=time_limit, seed=seed + at, store=store, **faults)
        _wait_for_quiet(busy)
        outcome = run_test(spec, console=console, progress=False)
        result = outcome.result
        verdicts.append(str(result.valid))
        print(
            f"{system} seed {seed + at}: valid {result.valid} {dict(result.anomaly_counts)} "
            f"{outcome.run_dir.path}",
            flush=True,
        )
        _stop_if_interrupted(outcome)
    invalid = sum(verdict == "False" for verdict in verdicts)
    print(
        f"SUMMARY {system} under {nemeses} {_shape(faults)}: invalid {invalid}/{runs}, "
        f"seeds {seed}..{seed + runs - 1}, {time_limit:g} s runs",
        flush=True,
    )
    return f"{invalid}/{runs} invalid ({', '.join(verdicts)})"


def _shape(faults: Mapping[str, Any]) -> str:
    """``(targets holder, fault lengths default, TTL 2 s)``: how the false-alarm runs aim their
    faults."""
    targets = ",".join(faults.get("targets", ("holder",)))
    lengths = ",".join(f"{m:g}" for m in faults.get("fault_lengths", ())) or "default"
    ttl = faults.get("ttl", TestSpec.ttl)
    workload = faults.get("workload", "default")
    return f"(targets {targets}, fault lengths {lengths}, TTL {ttl:g} s, workload {workload})"


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per switch or system")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed")
    parser.add_argument("--switch", action="append", choices=sorted(_SWITCHES), help="default: all")
    parser.add_argument("--system", action="append", help="correct systems (default reference)")
    parser.add_argument("--workload", help="the false-alarm runs' workload (default: the run's)")
    parser.add_argument("--no-detection", action="store_true")
    parser.add_argument("--no-false-alarms", action="store_true")
    parser.add_argument("--nemesis", type=_split, default=_NEMESES, help="false-alarm faults")
    parser.add_argument("--target", type=_split, help="false-alarm targets (default holder)")
    parser.add_argument(
        "--fault-lengths",
        type=lambda text: tuple(float(m) for m in _split(text)),
        help="false-alarm fault lengths in TTLs (default the run's)",
    )
    parser.add_argument("--ttl", type=float, help="false-alarm lease TTL in seconds")
    parser.add_argument("--store", type=Path, default=Path("store"), help="folder of the runs")
    parser.add_argument(
        "--busy-load",
        type=float,
        default=_BUSY_LOAD,
        help=f"wait before a run while the one-minute load is above this (default {_BUSY_LOAD:g})",
    )
    args = parser.parse_args(argv)
    faults: dict[str, Any] = {"nemeses": args.nemesis}
    if args.target:
        faults["targets"] = args.target
    if args.fault_lengths:
        faults["fault_lengths"] = args.fault_lengths
    if args.ttl:
        faults["ttl"] = args.ttl
    if args.workload:
        faults["workload"] = args.workload
    console = Console(stderr=True)
    if not args.no_detection:
        table = Table(title=f"{args.runs} runs of {args.time_limit:g} s per switch")
        for column in ("switch", "detected", "median to first violation", "verdicts"):
            table.add_column(column)
        for switch in args.switch or _SWITCHES:
            table.add_row(
                *detect(
                    switch,
                    args.runs,
                    args.seed,
                    args.time_limit,
                    args.store,
                    console,
                    args.busy_load,
                )
            )
        Console().print(table)
    if not args.no_false_alarms:
        table = Table(
            title=f"correct systems under --nemesis {','.join(args.nemesis)} {_shape(faults)}"
        )
        table.add_column("system")
        table.add_column(f"{args.runs} runs of {args.time_limit:g} s")
        for system in args.system or ["reference"]:
            table.add_row(
                system,
                false_alarms(
                    system,
                    args.runs,
                    args.seed,
                    args.time_limit,
                    args.store,
                    console,
                    faults,
                    args.busy_load,
                ),
            )
        Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
