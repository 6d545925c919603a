"""The lock-service rules measured: how often, and how soon, default runs catch the switches, and
how often the correct systems are wrongly judged.

Two kinds of rows, each N seeded runs (seeds ``--seed``, ``--seed + 1``...):

- a **switch** of the reference system (``token-before-lease``, ``grant-to-expired-waiter``), run
  with what ``fencecheck run --bug X`` picks by itself (the faults and targets of the switch's
  ``exposed_by``, every other setting the run's default): *caught* counts the runs whose verdict
  was invalid with one of the switch's own anomalies, *median* is the median time from the run's
  start to the first such violation (the completion of the latest operation the earliest
  anomaly's evidence names: when it became visible), *false alarms* counts runs invalid with
  other anomalies only; *without grant_seq* counts the runs whose history, checked again with
  every ``grant_seq`` taken out (the acquires' and their ``lease_ended``'s), is still invalid
  with the switch's anomalies, and *nor waited* those still invalid with ``waited`` taken out
  too (a service that reports neither: ``token-before-lease`` then cannot show);
- a **correct system** (``reference``, ``etcd``, ``zookeeper``, ``redis``, no switch), run with the
  default faults: *false alarms* counts the runs judged invalid, which a correct system must never
  be; *unknown* the runs too weak to judge.

    PYTHONPATH=. python3 bench/lock_service.py [--runs 20] [--time-limit 60] [--seed 1]
        [--switch NAME ...] [--system NAME ...]

Each run is a real Docker cluster: the defaults take about 20 x 6 x 70 s. On a shared machine run
a few (``--runs 3 --time-limit 30``, or one row with ``--switch`` or ``--system``; naming either
runs only what is named). Exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Final

from rich.console import Console
from rich.table import Table

from checkers import Verdict, check
from harness.record import Event, read_history
from harness.record.run_record import RunRecord
from harness.record.spec import TestSpec
from harness.record.verdict import Anomaly
from harness.run.exposure import exposure_fields, switches_of
from harness.run.runner import run_test
from systems import BugSwitch, load_system

__all__ = ["first_violation", "main", "own_anomalies", "owned_count", "without"]

_REFERENCE: Final = "reference"
_SWITCHES: Final = ("token-before-lease", "grant-to-expired-waiter")
_CORRECT: Final = ("reference", "etcd", "zookeeper", "redis")
_NO_SEQ: Final = frozenset(("grant_seq",))
_NO_SEQ_OR_WAITED: Final = frozenset(("grant_seq", "waited"))


@dataclass(frozen=True, slots=True)
class _Run:
    seed: int
    verdict: str
    caught: bool  # invalid with one of the switch's own anomalies (never, for a correct system)
    first_ns: int | None
    false_alarm: bool  # invalid, and not (only) for the switch's own anomalies
    caught_without_seq: bool = False  # still caught with every grant_seq taken out
    caught_without_either: bool = False  # ... and every waited too


def own_anomalies(result: Verdict, switch: BugSwitch) -> list[Anomaly]:
    """The counted anomalies of ``result`` that are ``switch``'s own: of its names, on its
    sinks when it names any (:meth:`systems.BugSwitch.owns`)."""
    return [
        anomaly
        for name in switch.anomalies
        for anomaly in result.anomalies.get(name, ())
        if switch.owns(anomaly.name, anomaly.sink)
    ]


def owned_count(result: Verdict, switch: BugSwitch) -> int:
    """How many counted anomalies of ``result`` are ``switch``'s own, from the counts (the
    evidence :func:`own_anomalies` reads is capped per name, and the companion's of one name may
    fill it): on its sinks when it names any."""
    if not switch.sinks:
        return sum(result.anomaly_counts.get(name, 0) for name in switch.anomalies)
    return sum(
        result.sinks[sink].anomalies.get(name, 0)
        for sink in switch.sinks
        if sink in result.sinks
        for name in switch.anomalies
    )


def first_violation(anomalies: Iterable[Anomaly]) -> int | None:
    """When the earliest of ``anomalies`` completed (ns since the run began): the latest
    completion among the operations of its evidence, the moment it became visible."""
    times = [
        max(op.time for op in anomaly.ops if op.time is not None)
        for anomaly in anomalies
        if any(op.time is not None for op in anomaly.ops)
    ]
    return min(times) if times else None


def without(events: Iterable[Event], keys: frozenset[str]) -> Iterator[Event]:
    """``events`` with ``keys`` (``grant_seq``, ``waited``) taken out of acquires' and releases'
    values and of their ``lease_ended``: as from a lock service that does not report them."""
    for event in events:
        value = event.value
        if event.f not in ("acquire", "release") or not isinstance(value, dict):
            yield event
            continue
        stripped = {key: item for key, item in value.items() if key not in keys}
        ended = stripped.get("lease_ended")
        if isinstance(ended, dict):
            stripped["lease_ended"] = {k: v for k, v in ended.items() if k not in keys}
        yield replace(event, value=stripped)


def _switch_run(switch: str, seed: int, time_limit: float, console: Console) -> _Run:
    """One run of ``switch`` as ``run --bug SWITCH --seed SEED`` would make it."""
    bug = switches_of(load_system(_REFERENCE))[switch]
    # What `run --bug SWITCH` takes from the exposure: every field the command line leaves (the
    # bench gives only the time limit and the seed).
    picked = exposure_fields({switch: bug}, (switch,))
    picked = {k: v for k, v in picked.items() if k not in ("time_limit", "seed")}
    spec = TestSpec(system=_REFERENCE, bugs=(switch,), time_limit=time_limit, seed=seed)
    spec = replace(spec, **picked)
    outcome = run_test(spec, console=console, progress=False)
    result = outcome.result
    own = own_anomalies(result, bug)
    owned = owned_count(result, bug)
    others = [name for name in result.anomaly_types if name not in bug.anomalies]
    record = RunRecord.from_json(outcome.run_dir.read_test())

    def caught_without(keys: frozenset[str]) -> bool:
        events = without(read_history(outcome.run_dir.history), keys)
        again = check(events, inventory=record.sinks, lease_ttl=record.lease_ttl)
        return again.valid is False and any(again.anomaly_counts.get(n) for n in bug.anomalies)

    return _Run(
        seed,
        str(result.valid),
        result.valid is False and owned > 0,
        first_violation(own),
        result.valid is False and not owned and bool(others),
        caught_without(_NO_SEQ),
        caught_without(_NO_SEQ_OR_WAITED),
    )


def _correct_run(system: str, seed: int, time_limit: float, console: Console) -> _Run:
    """One run of the correct ``system`` with the default faults and targets."""
    spec = TestSpec(system=system, time_limit=time_limit, seed=seed)
    result = run_test(spec, console=console, progress=False).result
    if result.valid is False:
        console.print(f"{system} seed {seed}: FALSE ALARM {result.anomaly_types}")
    return _Run(seed, str(result.valid), False, None, result.valid is False)


def _row(table: Table, label: str, runs: Sequence[_Run], switch: bool) -> None:
    firsts = [run.first_ns for run in runs if run.caught and run.first_ns is not None]
    median = f"{statistics.median(firsts) / 1e9:.1f} s" if firsts else "-"
    caught = f"{sum(run.caught for run in runs)}/{len(runs)}" if switch else "-"
    without_seq = f"{sum(r.caught_without_seq for r in runs)}/{len(runs)}" if switch else "-"
    without_either = f"{sum(r.caught_without_either for r in runs)}/{len(runs)}" if switch else "-"
    unknown = sum(run.verdict == "unknown" for run in runs)
    table.add_row(
        label,
        caught,
        without_seq,
        without_either,
        median,
        f"{sum(run.false_alarm for run in runs)}/{len(runs)}",
        f"{unknown}/{len(runs)}",
        ", ".join(f"{run.seed}:{run.verdict}" for run in runs),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="seeded runs per row")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--seed", type=int, default=1, help="the first run's seed")
    parser.add_argument("--switch", action="append", choices=_SWITCHES, help="a switch's row")
    parser.add_argument("--system", action="append", choices=_CORRECT, help="a correct system")
    args = parser.parse_args(argv)
    named = bool(args.switch or args.system)
    switches = args.switch or ([] if named else list(_SWITCHES))
    systems = args.system or ([] if named else list(_CORRECT))
    console = Console(stderr=True)
    table = Table(title=f"{args.runs} seeded runs of {args.time_limit:g} s per row")
    columns = ("row", "caught", "without grant_seq", "nor waited", "median to first violation")
    for column in (*columns, "false alarms", "unknown"):
        table.add_column(column)
    table.add_column("seed:verdict")
    rows: list[tuple[str, Callable[[int, float, Console], _Run], bool]] = [
        (f"reference --bug {switch}", partial(_switch_run, switch), True) for switch in switches
    ]
    rows += [(f"{system} (correct)", partial(_correct_run, system), False) for system in systems]
    for label, one, switch in rows:
        runs = []
        for seed in range(args.seed, args.seed + args.runs):
            run = one(seed, args.time_limit, console)
            console.print(f"{label} seed {seed}: {run.verdict}, caught {run.caught}")
            runs.append(run)
        _row(table, label, runs, switch)
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
