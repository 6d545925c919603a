"""What the benches of one fault family share: seeded runs of each switch the family exposes (as
``fencecheck run --bug X`` makes them) and seeded runs of each correct system under the family's
faults (false alarms).

A family script names its switches (each with its system), its faults and its systems in a
:class:`Family` and hands it to :func:`main`, which parses the common options, runs both parts and
prints one line per run, one ``SUMMARY`` line per switch and per system, and a table of each part:

- **detection**: per switch, N seeded runs with what ``run --bug SWITCH`` picks by itself (every
  field of the switch's ``exposed_by`` but the bench's own length and seed); *caught* counts the
  runs invalid with one of the switch's own anomalies (of its names, on its sinks when it names
  any: a lock service's epoch-reuse is not a store's), *median* is the median time from the run's
  start to the first such violation (:func:`bench.lock_service.first_violation`);
- **false alarms**: per correct system, N seeded runs under the family's faults (or
  ``--nemesis``), aimed as ``--target``, ``--fault-lengths`` and ``--ttl`` say (or as the run
  does by default), with the family's workload for that system (or ``--workload``), every other
  setting the run's default: the runs judged invalid (should be none), valid and unknown (too
  weak to judge), and those the harness refused or that broke off (with the reason).

Before each run the bench waits while the machine's one-minute load is above ``--max-load``: on a
shared machine a busier one starves the holders' renewals, and the verdict would be the machine's,
not the system's. A run a signal ended ends the bench (exit 0): each run takes the signal as its
own end, and the bench would otherwise move on to the next seed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from bench.lock_service import first_violation, own_anomalies, owned_count
from harness.record.spec import TestSpec
from harness.run.exposure import exposure_fields, planted_with, switches_of
from harness.run.judge import RunOutcome
from harness.run.plan import RunError
from harness.run.runner import run_test
from systems import load_system

__all__ = [
    "Family",
    "Run",
    "correct_run",
    "describe",
    "detect_run",
    "false_alarm_faults",
    "main",
    "summarize_detection",
    "summarize_false_alarms",
    "wait_for_quiet",
]

_BENCH_FIELDS: Final = frozenset(("time_limit", "seed"))
"""The spec fields the bench sets itself, over the switch's exposure."""
_LOAD_WAIT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class Family:
    """One fault family's bench: what it runs and what it runs it under."""

    switches: Mapping[str, str]
    """Each switch only this family's faults expose, with the system it is planted in."""
    nemeses: tuple[str, ...]
    """The faults the false-alarm runs play on each correct system."""
    systems: tuple[str, ...]
    """The correct systems ``--system`` may name."""
    default_systems: tuple[str, ...]
    """The correct systems run when ``--system`` is not given."""
    workloads: Mapping[str, str] = field(default_factory=dict)
    """The workload a correct system's false-alarm runs use when ``--workload`` is not given
    (where the run's default would never write what the faults test, such as etcd's PostgreSQL
    sink); any other system runs its default."""


@dataclass(frozen=True, slots=True)
class Run:
    """One seeded run as the bench saw it."""

    seed: int
    verdict: str
    """``True``, ``False`` or ``None`` (unknown); ``refused: …`` or ``error: …`` when the run did
    not start or broke off."""
    caught: bool = False
    """Invalid with one of the planted switch's own anomalies (never, for a correct system)."""
    first_ns: int | None = None
    """When the first such violation became visible, in ns from the run's start."""


def wait_for_quiet(max_load: float) -> None:
    """Return once the machine's one-minute load is at most ``max_load``."""
    while os.getloadavg()[0] > max_load:
        time.sleep(_LOAD_WAIT_S)


def _play(spec: TestSpec, max_load: float, console: Console) -> RunOutcome | str:
    """Run ``spec`` once the machine is quiet: its outcome, or why it did not start."""
    wait_for_quiet(max_load)
    try:
        return run_test(spec, console=console, progress=False)
    except RunError as problem:
        return f"error: {problem}"
    except (ValueError, LookupError) as problem:  # the spec refused before anything started
        return f"refused: {problem}"


def _stop_if_interrupted(outcome: RunOutcome) -> None:
    """End the bench (exit 0) after a run a signal stopped."""
    if outcome.interrupted:
        print("interrupted: the bench stops here", flush=True)
        raise SystemExit(0)


def _verdict(outcome: RunOutcome) -> str:
    return str(outcome.result.valid) if outcome.error is None else f"error: {outcome.error}"


def detect_run(
    system: str,
    switch: str,
    seed: int,
    time_limit: float,
    store: Path,
    max_load: float,
    console: Console,
) -> Run:
    """One run of ``switch`` planted in ``system`` as ``run --bug SWITCH --seed SEED`` makes it;
    prints its line."""
    switches = switches_of(load_system(system))
    bug = switches[switch]
    bugs = planted_with(switches, (switch,))
    picked = {k: v for k, v in exposure_fields(switches, bugs).items() if k not in _BENCH_FIELDS}
    spec = TestSpec(system=system, bugs=bugs, time_limit=time_limit, seed=seed, store=store)
    outcome = _play(replace(spec, **picked), max_load, console)
    if isinstance(outcome, str):
        print(f"{switch} seed {seed}: {outcome}", flush=True)
        return Run(seed, outcome)
    result = outcome.result
    caught = result.valid is False and owned_count(result, bug) > 0
    first = first_violation(own_anomalies(result, bug)) if caught else None
    at_first = f"{first / 1e9:.1f} s" if first is not None else "-"
    print(
        f"{switch} seed {seed}: valid {_verdict(outcome)}, caught {caught}, first violation "
        f"{at_first}, {dict(result.anomaly_counts)} {outcome.run_dir.path}",
        flush=True,
    )
    _stop_if_interrupted(outcome)
    return Run(seed, _verdict(outcome), caught, first)


def correct_run(
    system: str,
    faults: Mapping[str, Any],
    seed: int,
    time_limit: float,
    store: Path,
    max_load: float,
    console: Console,
) -> Run:
    """One run of the correct ``system`` with ``faults`` (spec fields: ``nemeses`` and any of
    ``targets``, ``fault_lengths``, ``ttl`` and ``workload``) over the run's defaults; prints its
    line."""
    spec = TestSpec(system=system, time_limit=time_limit, seed=seed, store=store, **faults)
    outcome = _play(spec, max_load, console)
    if isinstance(outcome, str):
        print(f"{system} seed {seed}: {outcome}", flush=True)
        return Run(seed, outcome)
    print(
        f"{system} seed {seed}: valid {_verdict(outcome)} {dict(outcome.result.anomaly_counts)} "
        f"{outcome.run_dir.path}",
        flush=True,
    )
    _stop_if_interrupted(outcome)
    return Run(seed, _verdict(outcome))


def describe(faults: Mapping[str, Any]) -> str:
    """``power-loss,kill,pause at lock-all, fault lengths 1.1, TTL 4 s, workload sinks``: the
    false-alarm runs' faults and whatever else they set, as a title says it."""
    parts = [",".join(faults["nemeses"])]
    if "targets" in faults:
        parts[0] += f" at {','.join(faults['targets'])}"
    if "fault_lengths" in faults:
        parts.append(f"fault lengths {','.join(f'{m:g}' for m in faults['fault_lengths'])}")
    if "ttl" in faults:
        parts.append(f"TTL {faults['ttl']:g} s")
    if "workload" in faults:
        parts.append(f"workload {faults['workload']}")
    return ", ".join(parts)


def false_alarm_faults(family: Family, system: str, args: argparse.Namespace) -> dict[str, Any]:
    """The spec fields of ``system``'s false-alarm runs: the family's faults and workload unless
    the command line says otherwise."""
    faults: dict[str, Any] = {"nemeses": args.nemesis or family.nemeses}
    if args.target:
        faults["targets"] = args.target
    if args.fault_lengths:
        faults["fault_lengths"] = args.fault_lengths
    if args.ttl:
        faults["ttl"] = args.ttl
    workload = args.workload or family.workloads.get(system)
    if workload:
        faults["workload"] = workload
    return faults


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _seeds(runs: Sequence[Run]) -> str:
    return ",".join(str(run.seed) for run in runs) or "none"


def summarize_detection(switch: str, runs: Sequence[Run], time_limit: float) -> tuple[str, ...]:
    """Print ``switch``'s SUMMARY line; its table row."""
    caught = [run for run in runs if run.caught]
    firsts = [run.first_ns for run in caught if run.first_ns is not None]
    median = f"{statistics.median(firsts) / 1e9:.1f} s" if firsts else "-"
    missed = [run for run in runs if not run.caught]
    print(
        f"SUMMARY {switch}: caught {len(caught)}/{len(runs)}, median to first violation {median}, "
        f"seeds {runs[0].seed}..{runs[-1].seed}, missed seeds {_seeds(missed)}, "
        f"{time_limit:g} s runs",
        flush=True,
    )
    return switch, f"{len(caught)}/{len(runs)}", median, _seeds(missed)


def summarize_false_alarms(
    system: str, runs: Sequence[Run], under: str, time_limit: float
) -> tuple[str, ...]:
    """Print ``system``'s SUMMARY line; its table row."""
    by = {
        name: [run for run in runs if run.verdict == verdict]
        for name, verdict in (("valid", "True"), ("invalid", "False"), ("unknown", "None"))
    }
    other = [run for run in runs if run.verdict not in ("True", "False", "None")]
    counts = ", ".join(f"{name} {len(got)}" for name, got in by.items())
    print(
        f"SUMMARY {system} under {under}: invalid {len(by['invalid'])}/{len(runs)} ({counts}, "
        f"refused or broken {len(other)}), invalid seeds {_seeds(by['invalid'])}, unknown seeds "
        f"{_seeds(by['unknown'])}, seeds {runs[0].seed}..{runs[-1].seed}, {time_limit:g} s runs",
        flush=True,
    )
    return (
        system,
        under,
        f"{len(by['invalid'])}/{len(runs)}",
        str(len(by["valid"])),
        str(len(by["unknown"])),
        "; ".join(dict.fromkeys(run.verdict for run in other)) or "-",
    )


def _print(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def main(family: Family, doc: str, argv: Sequence[str] | None = None) -> int:
    """Parse the common options (``doc``'s first paragraph is the description), run the family's
    detection and false-alarm parts and print their tables. Exit status 0 whatever the numbers."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per switch and system")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed")
    parser.add_argument("--store", type=Path, default=Path("store"), help="folder of the runs")
    parser.add_argument(
        "--max-load", type=float, default=6.0, help="wait before a run while the load is above"
    )
    parser.add_argument(
        "--switch", action="append", choices=tuple(family.switches), help="default: all"
    )
    parser.add_argument(
        "--system",
        action="append",
        choices=family.systems,
        help=f"correct systems (default: {', '.join(family.default_systems)})",
    )
    parser.add_argument(
        "--nemesis",
        type=_split,
        help=f"the false-alarm runs' faults, K,K (default: {','.join(family.nemeses)})",
    )
    parser.add_argument(
        "--target", type=_split, help="the false-alarm runs' targets, T,T (default: the run's)"
    )
    parser.add_argument(
        "--fault-lengths",
        type=lambda text: tuple(float(m) for m in _split(text)),
        help="the false-alarm runs' fault lengths in TTLs, M,M (default: the run's)",
    )
    parser.add_argument("--ttl", type=float, help="the false-alarm runs' lease TTL in seconds")
    parser.add_argument(
        "--workload", help="the false-alarm runs' workload (default: the family's or the run's)"
    )
    parser.add_argument("--no-detection", action="store_true", help="skip the switches")
    parser.add_argument("--no-false-alarms", action="store_true", help="skip the systems")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    console = Console(stderr=True)
    seeds = range(args.seed, args.seed + args.runs)
    common = (args.time_limit, args.store, args.max_load, console)
    if not args.no_detection:
        rows = []
        for switch in args.switch or family.switches:
            system = family.switches[switch]
            runs = [detect_run(system, switch, seed, *common) for seed in seeds]
            rows.append(summarize_detection(switch, runs, args.time_limit))
        title = f"detection: {args.runs} runs of {args.time_limit:g} s per switch"
        _print(title, ("switch", "caught", "median to first violation", "missed seeds"), rows)
    if not args.no_false_alarms:
        rows = []
        for system in args.system or family.default_systems:
            faults = false_alarm_faults(family, system, args)
            runs = [correct_run(system, faults, seed, *common) for seed in seeds]
            rows.append(summarize_false_alarms(system, runs, describe(faults), args.time_limit))
        title = f"false alarms: {args.runs} runs of {args.time_limit:g} s per system"
        _print(title, ("system", "under", "invalid", "valid", "unknown", "refused or broken"), rows)
    return 0
