"""``fencecheck cluster``: bring a cluster up for people to poke at, list runs, remove them."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from harness.cli import cli
from harness.cli.images import build_progress
from harness.node import NodeError
from harness.node.docker.cluster import (
    Cluster,
    NodeSpec,
    RunInfo,
    default_topology,
    gc,
    list_runs,
    manual_runs,
    new_run_id,
    remove_run,
)
from harness.node.docker.engine import EngineError
from harness.node.docker.images import ImageError, system_image
from harness.run.agents import deploy_system
from systems import AdapterError, SystemConfig, load_system, packages_of, topology

__all__ = ["cluster_group"]


@cli.group("cluster")
def cluster_group() -> None:
    """Start, inspect and remove clusters of containers."""


@cluster_group.command("up")
@click.option("--workers", default=3, show_default=True, help="Number of worker nodes.")
@click.option("--run-id", default=None, help="Run id to use (default: time plus random suffix).")
@click.option("--image", default=None, help="Node image tag (default: the current recipe's).")
@click.option(
    "--system",
    default="reference",
    show_default=True,
    help="System to deploy, so faults have daemons to aim at; 'none' for bare nodes.",
)
@click.option("--ttl", type=click.FloatRange(min=0.05, max=3600), default=2.0, show_default=True)
def up(workers: int, run_id: str | None, image: str | None, system: str, ttl: float) -> None:
    """Start a cluster with a system deployed and leave it running; prints its run id."""
    console = Console()
    try:
        deploy = None if system == "none" else load_system(system)
    except (LookupError, ValueError) as problem:
        raise click.ClickException(str(problem).strip("'\"")) from None
    try:
        if image is None:
            with build_progress(console) as show:
                image = system_image(packages_of(deploy) if deploy else (), show)
        nodes = default_topology(workers)
        if deploy is not None:
            nodes = [NodeSpec(name, role) for name, role in topology(deploy.roles(), workers)]
        cluster = Cluster(run_id or new_run_id(), nodes, image=image, keep=True)
        with cluster:
            if deploy is not None:
                try:
                    # The write-path proxy too, so that `fencecheck nemesis hold` (and the other
                    # proxy kinds) can be tried by hand on this cluster.
                    deployment, _ = deploy_system(
                        deploy, cluster.nodes, SystemConfig(lease_ttl=ttl), proxy=True
                    )
                except BaseException:
                    cluster.down()
                    raise
                daemons = ", ".join(f"{t.role}: {t.daemon}" for t in deployment.targets)
                console.print(
                    f"{system} deployed ({daemons}; agents and the write-path proxy on the workers)"
                )
            table = Table("node", "role", "ip", "container")
            for node in cluster.nodes.values():
                table.add_row(node.name, node.role, node.ip, cluster.container_name(node.name))
            console.print(table)
    except (NodeError, ImageError, EngineError, AdapterError) as problem:
        raise click.ClickException(str(problem)) from problem
    console.print(f"remove it with: fencecheck cluster down {cluster.run_id}", style="dim")
    click.echo(cluster.run_id)


@cluster_group.command("status")
@click.argument("run_id", required=False)
def status(run_id: str | None) -> None:
    """List fencecheck runs on the engine (or one run) with their nodes' states.

    Piped (not a terminal), one tab-separated line per run with whole run ids, for scripts.
    """
    try:
        runs = [run for run in list_runs() if run_id is None or run.run_id == run_id]
    except EngineError as problem:
        raise click.ClickException(str(problem)) from problem
    if run_id is not None and not runs:
        raise click.ClickException(
            f"no run {run_id!r} on the engine; see `fencecheck cluster status`"
        )
    console = Console()
    columns = ("run id", "nodes", "created", "controller", "kept", "yours")
    if not console.is_terminal:
        click.echo("\t".join(columns))
        for run in runs:
            click.echo("\t".join(_status_row(run, plain=True)))
        return
    table = Table(*columns)
    for run in runs:
        table.add_row(*_status_row(run, plain=False))
    console.print(table if runs else "no fencecheck clusters")


def _status_row(run: RunInfo, *, plain: bool) -> tuple[str, ...]:
    def marked(text: str, style: str) -> str:
        return text if plain else f"[{style}]{text}[/{style}]"

    nodes = " ".join(
        name if state == "running" else marked(f"{name}:{state}", "red")
        for name, state in zip(run.nodes, run.states, strict=True)
    )
    return (
        run.run_id,
        nodes or marked("none", "red"),
        run.created[:19],
        "running" if run.owner_alive else marked("gone", "yellow"),
        "yes" if run.kept else "",
        "yes" if run.mine else "",
    )


@cluster_group.command("down")
@click.argument("run_id", required=False)
@click.option(
    "--all", "everything", is_flag=True, help="Remove all your runs no controller drives."
)
@click.option("--yes", is_flag=True, help="Do not ask before removing several (with --all).")
def down(run_id: str | None, everything: bool, yes: bool) -> None:
    """Remove a run's containers and network: by run id; with no argument the one cluster you
    kept; with --all every run of yours that no controller drives (asks first on a terminal)."""
    if run_id is not None and everything:
        raise click.UsageError("give a RUN_ID or --all, not both")
    try:
        targets = _down_targets(run_id, everything, yes)
        removed = sum(remove_run(target) for target in targets)
    except (NodeError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    if run_id is not None and removed == 0:
        raise click.ClickException(
            f"nothing with run id {run_id!r}; see `fencecheck cluster status`"
        )
    click.echo(f"removed {removed} containers and networks")


def _on_terminal() -> bool:
    """Whether someone can answer a question (scripts and CI get no prompt)."""
    return sys.stdin.isatty()


def _down_targets(run_id: str | None, everything: bool, yes: bool) -> list[str]:
    if run_id is not None:
        return [run_id]
    runs = list_runs()
    if not everything:
        kept = manual_runs(runs)
        if len(kept) != 1:
            found = ", ".join(run.run_id for run in kept) or "none"
            raise click.UsageError(
                f"without a RUN_ID, down removes the one cluster you kept; you kept: {found}. "
                "Give a RUN_ID or --all (see `fencecheck cluster status`)"
            )
        return [kept[0].run_id]
    chosen = [run for run in runs if run.mine and not run.owner_alive]
    skipped = len(runs) - len(chosen)
    if skipped:
        click.echo(
            f"leaving {skipped} run(s) of other users or still driven by a controller; "
            "remove one by name with `fencecheck cluster down RUN_ID`",
            err=True,
        )
    names = [run.run_id for run in chosen]
    if names and not yes and _on_terminal():
        click.confirm(f"remove {len(names)} run(s): {', '.join(names)}?", abort=True)
    return names


@cluster_group.command("gc")
@click.option("--include-kept", is_flag=True, help="Also remove clusters left up on purpose.")
def collect(include_kept: bool) -> None:
    """Remove what crashed runs left (runs whose controller process is gone)."""
    try:
        removed = gc(include_kept=include_kept)
    except (NodeError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    click.echo(f"removed {removed} containers and networks")
