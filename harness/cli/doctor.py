"""``fencecheck doctor``: what works on this machine and, for what does not, the fix."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from harness.cli import EXIT_ERROR, EXIT_VALID, cli
from harness.node.docker.doctor import run_checks

__all__ = ["doctor"]


@cli.command()
def doctor() -> None:
    """Check the engine, the images, iptables, CPU quota, freezer and signals (exit 0 or 3)."""
    console = Console()
    table = Table("check", "", "detail", "fix")
    failed = 0
    with console.status("checking…"):
        for check in run_checks():
            failed += not check.ok
            mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
            table.add_row(check.name, mark, check.detail, check.fix)
    console.print(table)
    raise click.exceptions.Exit(EXIT_ERROR if failed else EXIT_VALID)
