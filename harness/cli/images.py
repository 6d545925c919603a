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


def _system_images(names: tuple[str, ...], every: bool) -> dict[str, tuple[str, ...]]:
    """System name -> its image's packages, for ``--system``/``--all`` (an unknown or broken
    system is a usage error naming it)."""
    from systems import AdapterError, available_systems, load_system, packages_of

    chosen = available_systems() if every else list(names)
    found: dict[str, tuple[str, ...]] = {}
    for name in chosen:
        try:
            found[name] = packages_of(load_system(name))
        except (LookupError, ValueError, AdapterError) as problem:
            raise click.BadParameter(f"{name}: {problem}", param_hint="--system") from None
    return found


_SYSTEM_OPTION = click.option(
    "--system", "systems", multiple=True, help="Also a system's image (repeatable)."
)
_ALL_OPTION = click.option(
    "--all", "every", is_flag=True, help="Every installed system's image too."
)


@images_group.command("build")
@_SYSTEM_OPTION
@_ALL_OPTION
def build(systems: tuple[str, ...], every: bool) -> None:
    """Build every image whose recipe changed (debootstrap base ~35 s, node image ~10 s) and,
    with --system or --all, the systems' images (the node image plus their Debian packages)."""
    console = Console()
    wanted = _system_images(systems, every)
    try:
        with build_progress(console) as show:
            tags = images.ensure_images(show)
            tags += [images.system_image(packages, show) for packages in wanted.values()]
    except (images.ImageError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    for tag in dict.fromkeys(tags):
        console.print(f"[green]ready[/green] {tag}")


@images_group.command("list")
@_SYSTEM_OPTION
def list_images(systems: tuple[str, ...]) -> None:
    """Show the tags the current recipes need, each installed system's image (or the named
    ones), and whether the engine has them."""
    wanted = _system_images(systems, not systems)
    try:
        rows = [("base", images.base_tag()), ("node", images.node_tag())]
        rows += [(f"system {name}", images.system_tag(p)) for name, p in wanted.items()]
        table = Table("image", "tag", "present")
        for what, tag in rows:
            table.add_row(what, tag, "yes" if images.image_exists(tag) else "[red]no[/red]")
    except (images.ImageError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem
    Console().print(table)
