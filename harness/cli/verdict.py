"""Printing a verdict for a person: shared by ``check``, ``run`` and ``analyze``."""

from __future__ import annotations

from typing import Any

from rich.console import Console

__all__ = ["print_verdict"]


def print_verdict(console: Console, result: dict[str, Any]) -> None:
    """Print the verdict line and each anomaly's explanation from a ``results.json`` mapping."""
    valid = result.get("valid")
    style = {True: "bold green", False: "bold red"}.get(valid, "bold yellow")  # type: ignore[arg-type]
    console.print(f"[{style}]valid: {valid}[/]")
    for name, items in (result.get("anomalies") or {}).items():
        for item in items[:3]:
            console.print(f"  [red]{name}[/]: {item.get('explanation', '')}")
