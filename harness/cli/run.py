"""``fencecheck run``, ``analyze`` and ``list``: carry out a test, re-check a stored one, show
what can be combined."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import click
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from checkers import Verdict
from harness.cli import EXIT_ERROR, EXIT_UNKNOWN, EXIT_VALID, cli
from harness.cli.check import exit_code, render_result
from harness.cli.hosts import load_hosts_option
from harness.cli.units import Duration
from harness.node.interrupts import interrupts_once, shielded
from harness.record.results import control_note
from harness.record.spec import (
    SPEC_FIELDS,
    SpecError,
    SpecField,
    TestSpec,
    split_names,
    store_path,
)
from harness.report import publish
from harness.run.exposure import ExposureError, planted_fields
from harness.run.exposure import expose as exposed_spec
from harness.run.judge import RunOutcome, check_run, note_late_signal
from harness.run.plan import RunError
from harness.run.runner import run_test
from harness.run.spec import option_help
from harness.run.store import (
    StoreError,
    check_output_file,
    open_run_dir,
    why_unwritable,
)
from harness.run.summary import RunSummary, summarize
from nemeses.registry import KINDS

__all__ = [
    "analyze_command",
    "list_command",
    "no_stale_write_warning",
    "run_command",
    "store_option",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def _store(value: str) -> Path:
    try:
        return store_path(value)
    except SpecError as problem:
        raise click.BadParameter(str(problem), param_hint="--store") from None


store_option = click.option(
    SPEC_FIELDS["store"].option,
    default=str(SPEC_FIELDS["store"].default),
    show_default=True,
    callback=lambda ctx, param, value: _store(value),
    help=SPEC_FIELDS["store"].help,
)
"""The ``--store`` option of the commands that run tests: an empty name is refused."""


def _spec_option(spec_field: SpecField) -> Callable[[_F], _F]:
    """The ``run`` option of one spec field (see :data:`SPEC_FIELDS`). Every one defaults to
    ``None`` (shown with the spec's default): a field left out is then told from one given, so
    a planted bug's exposure fills only the fields the command line leaves."""
    if spec_field.kind == "path":
        return store_option
    if spec_field.kind == "bugs":
        return click.option(
            spec_field.option, spec_field.name, multiple=True, help=option_help(spec_field)
        )
    if spec_field.kind == "flag":
        return click.option(
            spec_field.option,
            spec_field.name,
            is_flag=True,
            default=None,
            help=option_help(spec_field),
        )
    types: dict[str, click.ParamType[Any] | type] = {
        "int": int,
        "float": float,
        "duration": Duration(),
        "choice": click.Choice(spec_field.choices),
    }
    shown = spec_field.argv(spec_field.default)[1:] if spec_field.default is not None else []
    return click.option(
        spec_field.option,
        spec_field.name,
        type=types.get(spec_field.kind, str),
        default=None,
        callback=_PARSERS.get(spec_field.kind),
        show_default=" ".join(shown) or False,
        help=option_help(spec_field),
    )


def _names(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    return None if value is None else split_names(value)


def _lengths(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    try:
        return tuple(float(part) for part in split_names(value))
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: give TTL multiples such as 0.8,1.1,3,8", param_hint="--fault-lengths"
        ) from None


_PARSERS: Final = {"names": _names, "lengths": _lengths}


def _spec_options(command: _F) -> _F:
    """Every spec field's option on ``command``, in the table's order."""
    for spec_field in reversed(SPEC_FIELDS.values()):
        command = _spec_option(spec_field)(command)
    return command


@cli.command("run")
@_spec_options
@click.option(
    "--expose",
    is_flag=True,
    help="Take every field the first --bug's exposed_by sets, even over the options given "
    "(numbers: at least the exposure's).",
)
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
    expose: bool,
    hosts_file: Path | None,
    keep_cluster: bool,
    no_progress: bool,
    as_json: bool,
    junit_xml: Path | None,
    strict: bool,
    **options: Any,
) -> None:
    """Start a cluster, run holders under faults, check the history, store everything.

    A planted --bug's exposure (`fencecheck list`) sets every field this command line leaves.
    Exit code: 0 valid, 1 invalid, 2 unknown (or, with --strict, valid but weak), 3 error.
    """
    # Left out: None, or () for the repeated --bug (`--nemesis none` gives () too).
    given = {
        k: v
        for k, v in options.items()
        if v is not None and (v != () or SPEC_FIELDS[k].kind != "bugs")
    }
    if given.get("targets") == ():
        given["targets"] = ("holder",)
    exposed = _exposed(given)
    if "bugs" in exposed:  # the bugs asked for, with the ones they need beside them
        given["bugs"] = exposed.pop("bugs")
    spec = TestSpec(**{**exposed, **given})
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
        summary = _publish(outcome, junit_xml, console)
        if late and not outcome.interrupted:
            console.print(f"[yellow]{late[0].signal} while the report was written: noted[/]")
            outcome = note_late_signal(outcome, late[0], "the report")
            summary = _publish(outcome, junit_xml, console)
    with interrupts_once(already=True):
        raise click.exceptions.Exit(_conclude(outcome, summary, as_json, console, strict))


def _conclude(
    outcome: RunOutcome, summary: RunSummary | None, as_json: bool, console: Console, strict: bool
) -> int:
    """Print a published run's verdict and return the exit code (``summary``: the published
    run's, ``None`` when its report or files could not be written; ``strict``: a valid run with
    coverage gaps exits 2, saying so)."""
    written = summary is not None
    coverage, gaps = _coverage(outcome.result)
    record = outcome.record
    control = control_note(record.unexposed) if record is not None and record.unexposed else None
    if as_json:
        data = outcome.result.to_json()
        extra = {"interrupted": outcome.interrupted, "run_dir": str(outcome.run_dir.path)}
        if outcome.error is not None:
            extra["run_error"] = outcome.error
        if record is not None and record.lost:
            extra["lost"] = list(record.lost)
        if control is not None:
            extra["control"] = control
        click.echo(json.dumps({**data, **extra}, indent=2))
    else:
        render_result(
            Console(highlight=False),
            outcome.result,
            outcome.run_dir.history,
            gaps,
            [control] if control is not None else [],
        )
    if written:
        console.print(f"report: {outcome.run_dir.report}", soft_wrap=True)
    warning = no_stale_write_warning(coverage)
    if warning is not None:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True, highlight=False)
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


def no_stale_write_warning(coverage: Mapping[str, Any]) -> str | None:
    """The one-line warning for a run whose coverage shows no stale write attempted (it tested
    no fence, whatever its verdict), or ``None`` (also when no coverage was computed)."""
    if "stale_attempts" not in coverage or coverage["stale_attempts"]:
        return None
    return (
        "this run attempted no stale write, so it tested no fence; stop a holder past its "
        "lease (e.g. --nemesis pause --target holder --fault-lengths 3)"
    )


def _exposed(given: Mapping[str, Any]) -> dict[str, Any]:
    """What the planted bugs set (:func:`planted_fields`): ``bugs`` with their companions, and
    the fields of their exposures, which the options given override."""
    return planted_fields(given.get("system", "reference"), given.get("bugs", ()))


def _publish(outcome: RunOutcome, junit_xml: Path | None, console: Console) -> RunSummary | None:
    """Write the report, the store's index and the JUnit file and return the run's summary
    (its files read once, the record the runner's); ``None`` (said why) if one failed."""
    try:
        summary = publish(outcome.run_dir, summarize(outcome.run_dir, outcome.record))
        if junit_xml is not None:
            from harness.report.junit import write_junit

            write_junit([summary], junit_xml)
    except OSError as problem:
        where = problem.filename or outcome.run_dir.path
        console.print(
            f"[red]error:[/] cannot write {where}: {why_unwritable(problem)}; free space or fix "
            f"the permissions, then `fencecheck analyze {outcome.run_dir.path}`"
        )
        return None
    return summary


@cli.command("analyze")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
def analyze_command(run_dir: Path, as_json: bool) -> None:
    """Re-check a stored run (e.g. store/latest) and rewrite its results and report."""
    try:
        run = open_run_dir(run_dir)
        record = run.read_record()
        result = check_run(run, record)
        # What check_run wrote, read back once for the report, the index and the notes below.
        stored = publish(run, summarize(run, record)).results
        gaps = tuple(result.coverage.gaps())
    except (OSError, ValueError, KeyError) as problem:
        raise click.ClickException(str(problem)) from None
    notes = list(stored.notes) if stored is not None else []
    control = stored.control if stored is not None else None
    if as_json:
        said = {"notes": notes, **({"control": control} if control is not None else {})}
        click.echo(json.dumps({**result.to_json(), **said}, indent=2))
    else:
        shown = [*notes, control] if control is not None else notes
        render_result(Console(highlight=False), result, run.history, gaps, shown)
    raise click.exceptions.Exit(exit_code(result))


def _coverage(result: Verdict) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The verdict's coverage (counted in the check's one pass) as JSON data, and its gaps."""
    return result.coverage.to_json(), tuple(result.coverage.gaps())


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
        Column("exposed by", overflow="fold"),
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
            table.add_row("", switch.name, switch.describe(), switch.anomaly)
    console.print(table)
    flaws = Table(
        "holder flaw", "exposed by", "expected anomaly", title="holder flaws (any system)"
    )
    for flaw in HOLDER_FLAWS.values():
        flaws.add_row(flaw.name, flaw.describe(), flaw.anomaly)
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
