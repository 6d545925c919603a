"""``fencecheck hosts check|heal FILE``: the doctor and the clean-up for real hosts over SSH."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from harness.cli import EXIT_ERROR, EXIT_VALID, cli
from harness.node import NodeError
from harness.node.ssh import (
    HostsError,
    HostsFile,
    HostSpec,
    SshNode,
    check_hosts,
    clean_node,
    connect,
    heal_node,
    load_hosts,
    on_hosts,
)
from harness.node.ssh.packages import install_packages
from nemeses.partition import remove_rules
from nemeses.protocol import NemesisError

__all__ = ["hosts_group", "load_hosts_option"]


def load_hosts_option(path: Path) -> HostsFile:
    """Load a hosts file for a command, as a usage error (exit 3) naming the fix if it is bad."""
    try:
        return load_hosts(path)
    except HostsError as problem:
        raise click.ClickException(str(problem)) from None


@cli.group("hosts")
def hosts_group() -> None:
    """Real hosts over SSH: check them, heal them (see README, "Real hosts")."""


@hosts_group.command("check")
@click.argument("file", type=click.Path(path_type=Path))
def check_command(file: Path) -> None:
    """Check every host of FILE: login, sudo, iptables, cgroups, python3, clock, disk (exit 0/3)."""
    hosts = load_hosts_option(file)
    console = Console()
    table = Table("host", "check", "", "detail", "fix")
    failed = 0
    with console.status("checking hosts…"):
        rows = check_hosts(hosts)
    for row in rows:
        failed += not row.ok
        mark = "[green]ok[/green]" if row.ok else "[red]FAIL[/red]"
        table.add_row(row.host, row.check, mark, row.detail, row.fix)
    console.print(table)
    raise click.exceptions.Exit(EXIT_ERROR if failed else EXIT_VALID)


@hosts_group.command("install")
@click.argument("file", type=click.Path(path_type=Path))
def install_command(file: Path) -> None:
    """Install what the harness needs on FILE's hosts with apt-get (python3, iptables…)."""
    hosts = load_hosts_option(file)

    def install(spec: HostSpec) -> list[str]:
        node = connect(hosts, spec)
        try:
            return install_packages(node)
        finally:
            node.close()

    _report(hosts, on_hosts(list(hosts.hosts), install), "installed", "everything present")


@hosts_group.command("heal")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--clean", is_flag=True, help="Also kill fencecheck's daemons and remove what it wrote."
)
def heal_command(file: Path, clean: bool) -> None:
    """Undo every fault fencecheck may have left on FILE's hosts (after a crashed controller):
    partition rules, frozen or CPU-capped daemons, stopped processes (exit 0/3)."""
    hosts = load_hosts_option(file)

    def heal(spec: HostSpec) -> list[str]:
        node = connect(hosts, spec)
        try:
            return _heal(node, clean)
        finally:
            node.close()

    _report(hosts, on_hosts(list(hosts.hosts), heal), "", "nothing to undo")


def _report(
    hosts: HostsFile, results: list[list[str] | NodeError], verb: str, nothing: str
) -> None:
    """One line per host (what was done, or why it failed); exit 0, or 3 if any host failed."""
    console = Console(highlight=False)
    failed = 0
    for spec, result in zip(hosts.hosts, results, strict=True):
        if isinstance(result, NodeError):
            failed += 1
            console.print(f"[red]FAIL[/] {spec.name}: {result}")
        else:
            done = f"{verb} {', '.join(result)}".strip() if verb else "; ".join(result)
            console.print(f"[green]ok[/] {spec.name}: {done if result else nothing}")
    raise click.exceptions.Exit(EXIT_ERROR if failed else EXIT_VALID)


def _heal(node: SshNode, clean: bool) -> list[str]:
    try:
        done = ["removed our iptables rules"] if remove_rules(node) else []
    except NemesisError as problem:
        raise NodeError(str(problem)) from None
    done += heal_node(node)
    if clean:
        done += [*clean_node(node), "removed fencecheck's files"]
    return done
