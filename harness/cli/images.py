"""``fencecheck images``: build the recipe-hashed images and show which ones are current."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.cli import cli
from harness.node.docker import images
from harness.node.docker.engine import EngineError

__all__ = ["build_progress", "images_group"]


@contextmanager
def build_progress(console: Console) -> Iterator[images.Progress]:
    """A progress callback showing a spinner, the latest build line and the elapsed time."""
    with Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}", justify="left"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("checking images", total=None)
        width = max(console.width - 20, 20)

        def show(line: str) -> None:
            progress.update(task, description=line.strip()[:width])

        yield show


@cli.group("images")
def images_group() -> None:
    """Build and list the container images (no registry: built from Debian packages)."""


@images_group.command("build")
def build() -> None:
    """Build every image whose recipe changed (debootstrap base ~35 s, node image ~10 s)."""
    console = Console()
    try:
        with build_progress(console) as show:
            tags = images.ensure_images(show)
    except (images.ImageError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    for tag in tags:
        console.print(f"[green]ready[/green] {tag}")


@images_group.command("list")
def list_images() -> None:
    """Show the tags the current recipes need and whether the engine has them."""
    try:
        wanted = [images.base_tag(), images.node_tag()]
        table = Table("image", "present")
        for tag in wanted:
            table.add_row(tag, "yes" if images.image_exists(tag) else "[red]no[/red]")
    except (images.ImageError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    Console().print(table)
