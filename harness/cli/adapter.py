"""``fencecheck adapter check SYSTEM``: the adapter contract battery on a real cluster.

Run it before the first real test of a new system: it says, item by item, whether grants,
writes, stale writes, fenced reads, unfenced sinks and restarts behave as the adapter claims, and
for each failed item what the adapter must fix. Exit 0 when every item holds, 1 when one does not,
3 when the check could not run (no engine, an image that does not build, a system that does not
set up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import click
from rich.console import Console
from rich.markup import escape

from harness.cli import EXIT_ERROR, EXIT_INVALID, EXIT_VALID, cli
from harness.node.docker.engine import EngineError
from harness.node.docker.images import ImageError
from harness.node.interrupts import sigterm_interrupts
from harness.run.contract import ContractReport, ItemKind, check_adapter
from systems import AdapterError, load_system

__all__ = ["adapter_group", "render_report"]


@cli.group("adapter")
def adapter_group() -> None:
    """Check a system adapter against the contract fencecheck relies on."""


@adapter_group.command("check")
@click.argument("system")
def check_command(system: str) -> None:
    """Set SYSTEM up on a fresh cluster and check its promises (about a minute at most)."""
    console = Console(highlight=False)
    try:
        adapter = load_system(system)
        with sigterm_interrupts():
            report = check_adapter(adapter, progress=lambda line: console.print(escape(line)))
    except (AdapterError, EngineError, ImageError, LookupError) as problem:
        errors = Console(stderr=True, highlight=False)
        first = str(problem).strip().splitlines() or ["(no message)"]
        errors.print(f"[red]error:[/] {escape(first[0])}")
        for line in first[1:40]:
            errors.print(escape(line))
        raise click.exceptions.Exit(EXIT_ERROR) from None
    render_report(console, report)
    raise click.exceptions.Exit(EXIT_VALID if report.ok else EXIT_INVALID)


def render_report(console: Console, report: ContractReport) -> None:
    """One line per item (✓ or ✗), with what was seen and, for a failure, the fix."""
    for item in report.items:
        mark = _MARKS[item.kind] if item.ok else "[red]✗[/]"
        detail = f" [dim]({escape(item.detail)})[/]" if item.detail else ""
        console.print(f"{mark} {escape(item.name)}{detail}")
        if not item.ok or item.kind == "warning":
            console.print(f"    [bold]fix:[/] {escape(item.fix)}")
    failed = len(report.failed())
    verdict = "[green]passes[/]" if report.ok else f"[red]fails {failed} item(s)[/]"
    warnings = report.warnings()
    warned = (
        f"; [yellow bold]{len(warnings)} warning(s): "
        + escape("; ".join(item.detail.removeprefix("warning: ") for item in warnings))
        + "[/]"
        if warnings
        else ""
    )
    console.print(
        f"adapter {escape(report.system)} {verdict} the contract "
        f"({len(report.items)} items, {report.seconds:.0f}s){warned}"
    )


# A skipped item is about a part the system lacks: it never shows the check mark of a held one.
_MARKS: Final[Mapping[ItemKind, str]] = {
    "checked": "[green]✓[/]",
    "skipped": "[dim]-[/]",
    "warning": "[yellow bold]![/]",
}
