"""``fencecheck new-system NAME [--dir DIR]``: scaffold an adapter package for a new system."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli import EXIT_ERROR, cli
from systems import ConfigError
from systems.scaffold import scaffold

__all__ = ["new_system_command"]


@cli.command("new-system")
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Where to create the project folder fencecheck-NAME.",
)
def new_system_command(name: str, directory: Path) -> None:
    """Create an installable adapter package for system NAME that passes `adapter check` as is."""
    try:
        project = scaffold(name, directory)
    except (ConfigError, OSError) as problem:
        click.echo(f"error: {problem}", err=True)
        raise click.exceptions.Exit(EXIT_ERROR) from None
    click.echo(f"created {project}")
    click.echo("next:")
    click.echo(f"  pip install -e {project}")
    click.echo(f"  fencecheck adapter check {name}")
    click.echo(f"  fencecheck run --system {name} --time-limit 30")
    click.echo("then replace the stand-in lock service and store with your system's")
