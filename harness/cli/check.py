"""``fencecheck check HISTORY``: judge a history and say why.

``HISTORY`` is a file, ``-`` for standard input, or a FIFO (``<(zcat h.jsonl.gz)``); gzip'd input
is read directly. For a person: the verdict, a table of anomalies (counted and expected) with one
explanation each, the first few in full with their operations and faults, the per-sink verdicts
(with what could not be observed), what the history exercised (its coverage, counted in the
checker's one pass: stale writes attempted, holders stopped past their lease, restarts, epochs,
and the gaps that weaken a valid verdict) and what left the verdict unknown. With ``--json``: the
verdict as JSON on stdout (``results.json``'s shape, its ``coverage`` section included). Exit code
0 valid, 1 invalid, 2 unknown, 3 error (bad input: one line that names the line of the history
and the fix, never a traceback).
"""

from __future__ import annotations

import os
import re
import select
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Final

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from checkers import Anomaly, Coverage, Verdict, check
from checkers.explain import describe_fault, seconds
from checkers.registry import REGISTRY
from harness.cli import EXIT_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, cli
from harness.cli.units import Duration
from harness.record import (
    HistoryError,
    InventoryError,
    Sink,
    json_bytes,
    load_inventory,
    read_history,
)

__all__ = [
    "CheckError",
    "check_command",
    "exit_code",
    "parse_evidence",
    "render_result",
]

_SHOWN_IN_FULL = 2
_VERDICTS = {
    "True": ("VALID", "green"),
    "False": ("INVALID", "red"),
    "unknown": ("UNKNOWN", "yellow"),
}


class CheckError(click.ClickException):
    """Bad input to ``check``: exits 3 under any click invocation."""

    exit_code = EXIT_ERROR


def parse_evidence(text: str) -> int:
    """``--max-evidence``: a whole number ``>= 0`` (0 keeps the counts and no evidence)."""
    if not re.fullmatch(r"\s*[0-9]+\s*", text):
        raise CheckError(
            f"--max-evidence {text!r} is not a whole number >= 0: write it as 0, 5, 100"
        )
    return int(text)


def exit_code(result: Verdict) -> int:
    """0 valid, 1 invalid, 2 unknown."""
    if result.valid is True:
        return EXIT_VALID
    return EXIT_INVALID if result.valid is False else EXIT_UNKNOWN


_STDIN = "-"
_HELP = "\n\n".join(
    [
        "Check a history: exit 0 valid, 1 invalid, 2 unknown, 3 error.",
        "HISTORY is a history.jsonl file (gzip'd or not), - for standard input, or a FIFO.",
        "\b\nAnomalies:\n"
        + "\n".join(f"  {kind.name}: {kind.meaning}" for kind in REGISTRY.values()),
    ]
)


@cli.command("check", help=_HELP)
@click.argument("history", type=click.Path(path_type=Path, allow_dash=True))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option(
    "--inventory",
    type=click.Path(path_type=Path),
    help='Write-path inventory: {"sink": {"fenced": bool, "mitigation": ...}}. '
    "Without it every sink counts as fenced.",
)
@click.option(
    "--ttl",
    type=Duration(positive=True),
    help="The lease TTL (e.g. 2s, 1500ms), quoted in explanations.",
)
@click.option(
    "--max-evidence",
    callback=lambda _ctx, _param, text: parse_evidence(text),
    default="100",
    show_default=True,
    help="Evidence kept per anomaly name (all are counted; 0 keeps counts only).",
)
def check_command(
    history: Path, as_json: bool, inventory: Path | None, ttl: float | None, max_evidence: int
) -> None:
    """Check a history (the help text is built from the anomaly registry)."""
    stdin = str(history) == _STDIN
    if not stdin:
        _refuse_unless_history_file(history)
    sinks: dict[str, Sink] | None = None
    if inventory is not None:
        try:
            sinks = load_inventory(inventory)
        except InventoryError as problem:
            raise CheckError(str(problem)) from None
    # The coverage is counted in the checker's one pass (standard input cannot be read twice).
    notes: list[str] = []
    try:
        source = sys.stdin.buffer if stdin else _open_history(history)
        result = check(
            read_history(source, notes=notes),
            inventory=sinks,
            lease_ttl=ttl,
            max_evidence=max_evidence,
        )
    except HistoryError as problem:
        raise CheckError(f"{history}: {_one_line(str(problem))}") from None
    except OSError as problem:
        raise CheckError(f"cannot read {history}: {problem.strerror}") from None
    except (RecursionError, MemoryError) as problem:
        raise CheckError(f"{history}: input too deeply nested or too large ({problem!r})") from None
    if as_json:
        data = result.to_json()
        if notes:
            data["notes"] = notes
        click.echo(json_bytes(data, indent=True).decode())
    else:
        render_result(Console(highlight=False), result, history, notes=notes)
    click.get_current_context().exit(exit_code(result))


FIFO_WAIT_S: Final = 30.0
"""How long ``check`` waits for a FIFO's writer to start writing: a FIFO nobody opens for writing
would otherwise hang the command for ever."""


def _refuse_unless_history_file(path: Path) -> None:
    """A regular file or a FIFO (``<(zcat h.jsonl.gz)``) passes; anything else (a device such as
    ``/dev/zero``, a folder, nothing at all) is refused as no history."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise CheckError(f"no history file at {path}: pass the path of a history.jsonl") from None
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise CheckError(
            f"{path} is not a history file (a folder or a device): pass the path of a "
            "history.jsonl, - for standard input, or a FIFO"
        )


def _open_history(path: Path) -> BinaryIO | Path:
    """``path`` itself for a file; for a FIFO, its stream once its writer wrote (or closed it),
    waiting at most :data:`FIFO_WAIT_S` (else :class:`CheckError`)."""
    if not stat.S_ISFIFO(path.stat().st_mode):
        return path
    # Opened without blocking (a plain open waits for a writer for ever), then polled.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    if not poller.poll(FIFO_WAIT_S * 1000):
        os.close(fd)
        raise CheckError(
            f"nothing was written to the FIFO {path} in {FIFO_WAIT_S:g} s: start its writer "
            "first (e.g. fencecheck check <(zcat history.jsonl.gz))"
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_result(
    console: Console,
    result: Verdict,
    history: Path,
    gaps: Sequence[str] | None = None,
    notes: Sequence[str] = (),
) -> None:
    """Print a verdict for a person: counts, anomaly table, the first few in full, sinks, and
    what the history exercised (the verdict's coverage).

    ``gaps`` are what the run failed to exercise (by default the verdict's coverage's); a valid
    verdict carries them on its own line, since a pass that tested nothing must not read as a
    plain pass. ``notes`` are what reading the history found (a torn last line), each on a line
    of its own.
    """
    gaps = result.coverage.gaps() if gaps is None else gaps
    word, colour = _VERDICTS[str(result.valid)]
    counts = result.counts
    weak = result.valid is True and bool(gaps)
    console.print(
        Text.assemble(
            (f"{word}", f"bold {colour}"),
            (", but weak: " + "; ".join(gaps), "bold yellow") if weak else "",
            f"  {history}: {counts.events:,} events, {counts.accepted_writes:,} accepted writes, "
            f"{counts.successful_reads:,} reads, {counts.grants:,} grants, "
            f"{len(result.faults)} fault windows",
        ),
        soft_wrap=True,  # the history's path stays whole in an 80-column log
    )
    if result.anomaly_counts or result.expected_counts:
        console.print(_anomaly_table(result))
        for anomalies in (*result.anomalies.values(), *result.expected.values()):
            for anomaly in anomalies[:_SHOWN_IN_FULL]:
                _render_anomaly(console, anomaly)
    if result.sinks:
        console.print(_sink_table(result))
        for verdict in result.sinks.values():
            if verdict.warning:
                said = f"{verdict.name}: {verdict.warning}"
                console.print(Text.assemble(("warning: ", "bold yellow"), said))
            for note in verdict.coverage:
                console.print(Text.assemble(("coverage: ", "cyan"), f"{verdict.name}: {note}"))
    console.print(Text.assemble(("exercised: ", "cyan"), _exercised(result.coverage)))
    for note in result.grant_coverage:
        console.print(Text.assemble(("coverage: ", "cyan"), f"grants: {note}"))
    for reason in result.unknown_reasons:
        console.print(Text.assemble(("unknown: ", "yellow"), reason))
    for note in notes:
        console.print(Text.assemble(("note: ", "yellow"), note))


def _exercised(coverage: Coverage) -> str:
    """The coverage's headline numbers in one line (the gaps are said beside the verdict)."""
    stops = sum(coverage.stops_past_lease.values())
    parts = [
        f"{coverage.stale_attempts:,} stale writes attempted",
        f"{stops:,} stops past a lease" + _by(coverage.stops_past_lease),
        f"{sum(coverage.restarts.values()):,} restarts" + _by(coverage.restarts),
        f"{coverage.epochs_granted:,} epochs granted",
        f"{coverage.keys_written:,} keys written",
    ]
    if coverage.power_losses.get("total"):
        parts.append(
            f"{coverage.power_losses['total']:,} power losses "
            f"({coverage.power_losses.get('dropped_data', 0):,} dropped data)"
        )
    if coverage.clock_windows:
        parts.append(
            f"{coverage.clock_windows:,} clock windows "
            f"({coverage.clock_across_expiry:,} across a lease's expiry)"
        )
    if coverage.overlaps:
        together = sum(count for count, _ in coverage.overlaps.values())
        parts.append(
            f"{together:,} overlapping faults"
            + _by({pair: count for pair, (count, _) in coverage.overlaps.items()})
        )
    return ", ".join(parts)


def _by(counts: dict[str, int]) -> str:
    """`` (pause 2, kill 1)``; nothing for no counts."""
    if not counts:
        return ""
    return " (" + ", ".join(f"{name} {number:,}" for name, number in sorted(counts.items())) + ")"


def _anomaly_table(result: Verdict) -> Table:
    table = Table(title="anomalies", title_justify="left")
    table.add_column("anomaly")
    table.add_column("count", justify="right")
    table.add_column("counts against the run")
    table.add_column("first explanation", overflow="fold")
    for bucket, counts, verdict in (
        (result.anomalies, result.anomaly_counts, Text("yes", "red")),
        (result.expected, result.expected_counts, Text("no: expected on this sink", "yellow")),
    ):
        for name, number in sorted(counts.items()):
            first = bucket.get(name, [])
            table.add_row(name, f"{number:,}", verdict, first[0].explanation if first else "")
    return table


def _render_anomaly(console: Console, anomaly: Anomaly) -> None:
    console.print(Text.assemble(("\n" + anomaly.name, "bold"), ": ", anomaly.explanation))
    table = Table(box=None, padding=(0, 1), show_edge=False)
    for column in ("role", "index", "time", "node", "process", "f", "type", "epoch", "id", "at"):
        table.add_column(column)
    for op in anomaly.ops:
        where = f"{op.sink}/{op.key}" if op.sink is not None else (op.lock or "")
        if op.position is not None:
            where += f" #{op.position}"
        table.add_row(
            op.role,
            _text(op.index),
            seconds(op.time) if op.time is not None else "",
            op.node or "",
            _text(op.process),
            op.f,
            op.type,
            _text(op.epoch),
            op.id or "",
            where,
        )
    console.print(table)
    for window in anomaly.faults:
        console.print(f"  fault: {describe_fault(window)}")


def _sink_table(result: Verdict) -> Table:
    table = Table(title="sinks", title_justify="left")
    for column in ("sink", "guard", "verdict", "keys", "accepted", "seq", "anomalies"):
        table.add_column(column)
    table.add_column("note")
    for verdict in result.sinks.values():
        spec = Sink(verdict.name, verdict.fenced, verdict.mitigation)  # type: ignore[arg-type]
        found = {**verdict.anomalies, **{f"{k} (expected)": n for k, n in verdict.expected.items()}}
        table.add_row(
            verdict.name,
            spec.describe() + ("" if verdict.declared else " (not declared)"),
            _sink_word(verdict.valid, verdict.keys),
            f"{verdict.keys:,}",
            f"{verdict.accepted_writes:,}",
            "yes" if verdict.seq_observable else "no",
            ", ".join(f"{name} {number:,}" for name, number in sorted(found.items())),
            "; ".join(verdict.reasons) if verdict.keys else "",
        )
    return table


def _sink_word(valid: object, keys: int) -> str:
    """A sink's verdict as a word; a sink no write reached is "not written", not an "unknown"
    beside a valid run."""
    if keys == 0:
        return "not written"
    return {"True": "valid", "False": "INVALID"}.get(str(valid), "unknown")


def _text(value: object) -> str:
    return "" if value is None else str(value)
