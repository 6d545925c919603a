"""``fencecheck cluster``: bring a cluster up for people to poke at, list runs, remove them."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from harness.cli import cli
from harness.cli.images import build_progress
from harness.node import NodeError
from harness.node.docker.cluster import (
    Cluster,
    default_topology,
    gc,
    list_runs,
    new_run_id,
    remove_run,
)
from harness.node.docker.engine import EngineError
from harness.node.docker.images import ImageError, node_image

__all__ = ["cluster_group"]


@cli.group("cluster")
def cluster_group() -> None:
    """Start, inspect and remove clusters of containers."""


@cluster_group.command("up")
@click.option("--workers", default=3, show_default=True, help="Number of worker nodes.")
@click.option("--run-id", default=None, help="Run id to use (default: time plus random suffix).")
@click.option("--image", default=None, help="Node image tag (default: the current recipe's).")
def up(workers: int, run_id: str | None, image: str | None) -> None:
    """Start a cluster and leave it running; prints its run id."""
    console = Console()
    try:
        if image is None:
            with build_progress(console) as show:
                image = node_image(show)
        cluster = Cluster(run_id or new_run_id(), default_topology(workers), image=image, keep=True)
        with cluster:
            table = Table("node", "role", "ip", "container")
            for node in cluster.nodes.values():
                table.add_row(node.name, node.role, node.ip, cluster.container_name(node.name))
            console.print(table)
    except (NodeError, ImageError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    console.print(f"remove it with: fencecheck cluster down {cluster.run_id}", style="dim")
    click.echo(cluster.run_id)


@cluster_group.command("status")
@click.argument("run_id", required=False)
def status(run_id: str | None) -> None:
    """List fencecheck runs on the engine (or one run) with their nodes' states."""
    try:
        runs = [run for run in list_runs() if run_id is None or run.run_id == run_id]
    except EngineError as problem:
        raise click.ClickException(str(problem)) from problem
    if run_id is not None and not runs:
        raise click.ClickException(
            f"no run {run_id!r} on the engine; see `fencecheck cluster status`"
        )
    table = Table("run id", "nodes", "created", "controller", "kept")
    for run in runs:
        nodes = " ".join(
            name if state == "running" else f"[red]{name}:{state}[/red]"
            for name, state in zip(run.nodes, run.states, strict=True)
        )
        owner = "running" if run.owner_alive else "[yellow]gone[/yellow]"
        table.add_row(
            run.run_id,
            nodes or "[red]none[/red]",
            run.created[:19],
            owner,
            "yes" if run.kept else "",
        )
    Console().print(table if runs else "no fencecheck clusters")


@cluster_group.command("down")
@click.argument("run_id", required=False)
@click.option("--all", "everything", is_flag=True, help="Remove every fencecheck run.")
def down(run_id: str | None, everything: bool) -> None:
    """Remove a run's containers and network (by run id, or all with --all)."""
    if (run_id is None) == (not everything):
        raise click.UsageError("give a RUN_ID or --all (see `fencecheck cluster status`)")
    try:
        targets = [run.run_id for run in list_runs()] if everything else [str(run_id)]
        removed = sum(remove_run(target) for target in targets)
    except (NodeError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    if run_id is not None and removed == 0:
        raise click.ClickException(
            f"nothing with run id {run_id!r}; see `fencecheck cluster status`"
        )
    click.echo(f"removed {removed} containers and networks")


@cluster_group.command("gc")
@click.option("--include-kept", is_flag=True, help="Also remove clusters left up on purpose.")
def collect(include_kept: bool) -> None:
    """Remove what crashed runs left (runs whose controller process is gone)."""
    try:
        removed = gc(include_kept=include_kept)
    except (NodeError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    click.echo(f"removed {removed} containers and networks")
