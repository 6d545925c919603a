"""``fencecheck run``, ``analyze`` and ``list``: carry out a test, re-check a stored one, show
what can be combined."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from harness.cli import EXIT_ERROR, EXIT_UNKNOWN, EXIT_VALID, cli
from harness.cli.check import exit_code, render_result
from harness.cli.hosts import load_hosts_option
from harness.cli.units import Duration
from harness.node.interrupts import interrupts_once, shielded
from harness.report import publish
from harness.run.exposure import ExposureError, exposing_faults, switches_of
from harness.run.exposure import expose as exposed_spec
from harness.run.judge import check_run
from harness.run.runner import RunError, RunOutcome, note_late_signal, run_test
from harness.run.spec import SpecError, TestSpec, split_names, store_path
from harness.run.store import (
    RunDir,
    StoreError,
    check_output_file,
    open_run_dir,
    why_unwritable,
)
from nemeses.registry import DEFAULT_NEMESES, KINDS
from nemeses.schedule import DEFAULT_TTL_MULTIPLES
from systems import load_system

__all__ = ["analyze_command", "list_command", "run_command", "store_option"]


def _lengths(value: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in split_names(value))
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: give TTL multiples such as 0.8,1.1,3,8", param_hint="--fault-lengths"
        ) from None


def _store(value: str) -> Path:
    try:
        return store_path(value)
    except SpecError as problem:
        raise click.BadParameter(str(problem), param_hint="--store") from None


store_option = click.option(
    "--store",
    default="store",
    show_default=True,
    callback=lambda ctx, param, value: _store(value),
    help="Folder of stored runs (checked writable before anything starts).",
)
"""The ``--store`` option of the commands that run tests: an empty name is refused."""


@cli.command("run")
@click.option("--system", default="reference", show_default=True, help="System under test.")
@click.option("--bug", "bugs", multiple=True, help="Plant a bug switch (repeatable).")
@click.option(
    "--workload",
    type=click.Choice(["append", "rmw", "sinks"]),
    default="append",
    show_default=True,
)
@click.option(
    "--nemesis",
    default=None,
    help="Fault kinds, comma-separated ('none' for none); default: "
    + ",".join(DEFAULT_NEMESES)
    + ", or the fault that exposes the planted --bug. "
    + "; ".join(f"{name}: {kind.summary}" for name, kind in KINDS.items()),
)
@click.option(
    "--target",
    default=None,
    help="Fault targets, comma-separated: holder, lock-leader, lock-follower, a role (lock, "
    "store, worker) or a node name. Default: holder, or what the planted --bug needs.",
)
@click.option(
    "--fault-lengths",
    default="",
    help="Fault durations as multiples of the lease TTL, comma-separated (default: "
    + ",".join(f"{multiple:g}" for multiple in DEFAULT_TTL_MULTIPLES)
    + ").",
)
@click.option(
    "--ttl", type=Duration(), default=1.0, show_default=True, help="Lease TTL (1, 1s, 500ms)."
)
@click.option(
    "--lock-delay",
    type=Duration(),
    default=0.0,
    show_default=True,
    help="How long the lock stays unavailable after a lease lapses (0: none).",
)
@click.option(
    "--time-limit", type=Duration(), default=30.0, show_default=True, help="Run length (30, 2m)."
)
@click.option("--workers", type=click.IntRange(1, 16), default=3, show_default=True)
@click.option(
    "--keys",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Keys per lock, 1 to 100,000; each holder deals them from a shuffled deck, so with "
    "many (e.g. 1000) a stale write usually lands on a key the new holder has not touched.",
)
@click.option(
    "--locks",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Locks sharing each sink (each with its own keys); judged per sink and lock.",
)
@click.option(
    "--writes-per-lease",
    type=int,
    default=20,
    show_default=True,
    help="Units of work per lease before the holder releases it: 1 or 2 give hundreds of "
    "grants (epochs) per run.",
)
@click.option(
    "--keys-per-write",
    type=int,
    default=1,
    show_default=True,
    help="Keys one write spans, all accepted or none (append workload; the system must "
    "support it, e.g. the reference system).",
)
@click.option("--rate", type=float, default=0.0, help="Ops/s per holder; 0 = unthrottled.")
@click.option(
    "--read-ratio",
    type=float,
    default=0.1,
    show_default=True,
    help="Share of a holder's operations that are reads (0 to 1).",
)
@click.option(
    "--op-timeout",
    type=Duration(),
    default=0.0,
    show_default=True,
    help="Seconds an operation may take before it is recorded as unknown; 0 = long enough "
    "to outlast every scheduled fault.",
)
@click.option("--name", default="", help="The run's folder name in the store (default: derived).")
@click.option(
    "--work-ms",
    type=click.IntRange(0),
    default=50,
    show_default=True,
    help="Critical-section time between the lease check and the write.",
)
@click.option("--seed", type=int, default=None, help="Same seed, same faults and choices.")
@click.option(
    "--expose",
    is_flag=True,
    help="Take faults, targets, workload and fault lengths from the first --bug's exposed_by.",
)
@store_option
@click.option(
    "--hosts",
    "hosts_file",
    type=click.Path(path_type=Path),
    help="Run on the real hosts of this TOML hosts file over SSH instead of containers "
    "(its roles replace --workers).",
)
@click.option("--keep-cluster", is_flag=True, help="Leave the containers running afterwards.")
@click.option("--no-progress", is_flag=True, help="No live display (CI logs).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option(
    "--junit-xml",
    type=click.Path(path_type=Path),
    help="Write a JUnit XML report (checked writable before the run).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 2 when the run is valid but weak (it tested less than it claims: no stale "
    "write attempted, no holder stopped past its lease...).",
)
def run_command(
    system: str,
    bugs: tuple[str, ...],
    workload: str,
    nemesis: str | None,
    target: str | None,
    fault_lengths: str,
    ttl: float,
    lock_delay: float,
    time_limit: float,
    workers: int,
    keys: int,
    locks: int,
    writes_per_lease: int,
    keys_per_write: int,
    rate: float,
    read_ratio: float,
    op_timeout: float,
    name: str,
    work_ms: int,
    seed: int | None,
    expose: bool,
    store: Path,
    hosts_file: Path | None,
    keep_cluster: bool,
    no_progress: bool,
    as_json: bool,
    junit_xml: Path | None,
    strict: bool,
) -> None:
    """Start a cluster, run holders under faults, check the history, store everything.

    Exit code: 0 valid, 1 invalid, 2 unknown (or, with --strict, valid but weak), 3 error.
    """
    picked = _picked(system, bugs) if nemesis is None else None
    if picked is not None:
        nemesis, target = ",".join(picked[0]), target or ",".join(picked[1])
    spec = TestSpec(
        system=system,
        bugs=tuple(bugs),
        workload=workload,
        nemeses=split_names(nemesis or ",".join(DEFAULT_NEMESES)),
        targets=split_names(target or "holder") or ("holder",),
        fault_lengths=_lengths(fault_lengths),
        ttl=ttl,
        lock_delay=lock_delay,
        time_limit=time_limit,
        workers=workers,
        keys=keys,
        locks=locks,
        writes_per_lease=writes_per_lease,
        keys_per_write=keys_per_write,
        rate=rate,
        read_ratio=read_ratio,
        op_timeout=op_timeout,
        name=name,
        work_ms=work_ms,
        store=store,
    )
    if seed is not None:
        spec = replace(spec, seed=seed)
    if expose:
        try:
            spec = exposed_spec(spec)
        except (ExposureError, LookupError) as problem:
            raise click.ClickException(str(problem).strip("'\"")) from None
    console = Console(stderr=True)
    hosts = load_hosts_option(hosts_file) if hosts_file is not None else None
    try:
        if junit_xml is not None:
            check_output_file(junit_xml, "--junit-xml")
        outcome = run_test(
            spec,
            console=console,
            progress=not no_progress and console.is_terminal,
            keep_cluster=keep_cluster,
            hosts=hosts,
        )
    except (RunError, StoreError) as problem:
        raise click.ClickException(str(problem)) from None
    # The run is checked; its report is written next. A first signal now is recorded like any
    # other (the verdict is concluded again and the report rewritten once) but never cuts the
    # report short; after the report, every signal is only announced.
    with interrupts_once() as late, shielded():
        console.print("[dim]phase: the report[/]", highlight=False)
        written = _publish(outcome, junit_xml, console)
        if late and not outcome.interrupted:
            console.print(f"[yellow]{late[0].signal} while the report was written: noted[/]")
            outcome = note_late_signal(outcome, late[0], "the report")
            written = _publish(outcome, junit_xml, console)
    with interrupts_once(already=True):
        raise click.exceptions.Exit(_conclude(outcome, written, as_json, console, strict))


def _conclude(
    outcome: RunOutcome, written: bool, as_json: bool, console: Console, strict: bool
) -> int:
    """Print a published run's verdict and return the exit code (``written``: its report and
    files are; ``strict``: a valid run with coverage gaps exits 2, saying so)."""
    coverage, gaps = _coverage(outcome.run_dir)
    if as_json:
        data = {**outcome.result.to_json(), "coverage": coverage}
        extra = {"interrupted": outcome.interrupted, "run_dir": str(outcome.run_dir.path)}
        if outcome.error is not None:
            extra["run_error"] = outcome.error
        if outcome.record is not None and outcome.record.lost:
            extra["lost"] = list(outcome.record.lost)
        click.echo(json.dumps({**data, **extra}, indent=2))
    else:
        render_result(
            Console(highlight=False),
            outcome.result,
            outcome.run_dir.history,
            gaps,
        )
    if written:
        console.print(f"report: {outcome.run_dir.report}", soft_wrap=True)
    if outcome.error is not None:
        console.print(f"[red]error:[/] the run broke off: {outcome.error}")
        return EXIT_ERROR
    if not written:
        return EXIT_ERROR
    code = exit_code(outcome.result)
    if strict and code == EXIT_VALID and gaps:
        console.print(f"[yellow]--strict:[/] valid but weak, exit 2: {'; '.join(gaps)}")
        return EXIT_UNKNOWN
    return code


def _picked(system: str, bugs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The faults and targets that expose the planted ``bugs``, for a run that names no fault."""
    if not bugs:
        return None
    try:
        return exposing_faults(switches_of(load_system(system)), bugs)
    except (LookupError, ValueError):
        return None  # the runner names the unknown system


def _publish(outcome: RunOutcome, junit_xml: Path | None, console: Console) -> bool:
    """Write the report, the store's index and the JUnit file; False (said why) if one failed."""
    try:
        publish(outcome.run_dir)
        if junit_xml is not None:
            from harness.report.junit import write_junit

            write_junit([outcome.run_dir], junit_xml)
    except OSError as problem:
        where = problem.filename or outcome.run_dir.path
        console.print(
            f"[red]error:[/] cannot write {where}: {why_unwritable(problem)}; free space or fix "
            f"the permissions, then `fencecheck analyze {outcome.run_dir.path}`"
        )
        return False
    return True


@cli.command("analyze")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def analyze_command(run_dir: Path, as_json: bool) -> None:
    """Re-check a stored run (e.g. store/latest) and rewrite its results and report."""
    try:
        run = open_run_dir(run_dir)
        result = check_run(run)
        publish(run)
    except (OSError, ValueError, KeyError) as problem:
        raise click.ClickException(str(problem)) from None
    coverage, gaps = _coverage(run)
    if as_json:
        click.echo(json.dumps({**result.to_json(), "coverage": coverage}, indent=2))
    else:
        render_result(Console(highlight=False), result, run.history, gaps)
    raise click.exceptions.Exit(exit_code(result))


def _coverage(run: RunDir) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The ``coverage`` section ``check_run`` just wrote into ``results.json``, and its gaps."""
    stored = run.read_results()
    if stored is None or stored.coverage is None:
        return {}, ()
    return dict(stored.coverage.numbers), stored.coverage.gaps


@cli.command("list")
def list_command() -> None:
    """Show the systems, bug switches, holder flaws, workloads and nemeses that can be combined."""
    from nemeses import TOPOLOGIES
    from systems import (
        HOLDER_FLAWS,
        PlantsBugs,
        TakesDiskFaults,
        available_systems,
        load_system,
    )
    from workloads import WORKLOADS

    console = Console()
    # Folded, never cut with an ellipsis: a switch name is what the user types next.
    table = Table(
        "system",
        Column("bug switch", overflow="fold"),
        "exposed by",
        "expected anomaly",
        title="systems",
    )
    for name in available_systems():
        try:
            system = load_system(name)
            switches = system.bug_switches() if isinstance(system, PlantsBugs) else {}
            about = system.describe()
            if isinstance(system, TakesDiskFaults):
                dirs = system.disk_dirs()
                about += f"; disk faults on its {', '.join(sorted(dirs))} data dirs"
        except Exception as problem:  # a broken third-party adapter must not hide the others
            # The whole reason, folded over the row's lines: the fix is usually at its end.
            table.add_row(name, Text(f"cannot load: {problem}", style="red"))
            continue
        table.add_row(name, f"(none: the correct system) {about}", "", "valid")
        for switch in switches.values():
            table.add_row("", switch.name, switch.exposed_by.describe(), switch.anomaly)
    console.print(table)
    flaws = Table(
        "holder flaw", "exposed by", "expected anomaly", title="holder flaws (any system)"
    )
    for flaw in HOLDER_FLAWS.values():
        flaws.add_row(flaw.name, flaw.exposed_by.describe(), flaw.anomaly)
    console.print(flaws)
    workloads = Table("workload", "what holders do", title="workloads")
    for workload in WORKLOADS.values():
        workloads.add_row(workload.name, workload.description)
    console.print(workloads)
    kinds = Table("fault kind", "what it does", "manual command", title="nemeses")
    for name, kind in KINDS.items():
        manual = (
            f"fencecheck nemesis {name}"
            if kind.manual
            else "(compound: " + " + ".join(kind.parts) + ")"
        )
        kinds.add_row(name, kind.summary, manual)
    console.print(kinds)
    console.print(f"[bold]partition topologies[/]: {', '.join(TOPOLOGIES)}")
    if not available_systems():
        raise click.exceptions.Exit(EXIT_ERROR)
