"""``fencecheck matrices`` and ``fencecheck examples``: what ships inside the package, and where.

A wheel installed outside a checkout has no ``matrices/`` folder to point at; these commands print
the installed files' paths (``run-all --matrix detection`` takes a shipped matrix by name).
"""

from __future__ import annotations

import json

import click

from harness.bundled import bundled_examples, bundled_matrices
from harness.cli import cli

__all__ = ["examples_command", "matrices_command"]


@cli.command("matrices")
def matrices_command() -> None:
    """List the shipped matrices: name, rows and path (run one with run-all --matrix NAME)."""
    for name, path in bundled_matrices().items():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            rows = len(data.get("runs") or [])
        except (OSError, ValueError, AttributeError):
            rows = 0
        click.echo(f"{name}  ({rows} rows)  {path}")


@cli.command("examples")
def examples_command() -> None:
    """List the shipped example files (histories to check, an inventory, a pytest example)."""
    for path in bundled_examples():
        click.echo(str(path))
