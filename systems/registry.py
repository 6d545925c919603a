"""Finding system adapters by name through the ``fencecheck.systems`` entry-point group.

A package adds a system by declaring, in its ``pyproject.toml``::

    [project.entry-points."fencecheck.systems"]
    mysystem = "mypackage.adapter:MySystem"

where the object named is a zero-argument factory (usually the class) returning a
:class:`systems.base.System`.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Final

from systems.base import AdapterError, System

__all__ = ["ENTRY_POINT_GROUP", "UnknownSystemError", "available_systems", "load_system"]

ENTRY_POINT_GROUP: Final = "fencecheck.systems"


class UnknownSystemError(AdapterError, LookupError):
    """No adapter has the requested name; the message lists the ones installed."""


def _entry_points() -> dict[str, EntryPoint]:
    return {entry.name: entry for entry in entry_points(group=ENTRY_POINT_GROUP)}


def available_systems() -> list[str]:
    """The names of every installed adapter, sorted."""
    return sorted(_entry_points())


def load_system(name: str) -> System:
    """Build the adapter registered as ``name``.

    Raises :class:`UnknownSystemError` listing the available names, or :class:`AdapterError` when
    the entry point does not load or does not produce a :class:`System`.
    """
    found = _entry_points()
    entry = found.get(name)
    if entry is None:
        listed = ", ".join(sorted(found)) or "none (is fencecheck installed? pip install -e .)"
        raise UnknownSystemError(f"unknown system {name!r}; available systems: {listed}")
    try:
        factory = entry.load()
        system = factory()
    except Exception as problem:
        raise AdapterError(
            f"system {name!r} ({entry.value}) failed to load: {problem!r}; "
            "check that its package is installed and imports cleanly"
        ) from problem
    if not isinstance(system, System):
        raise AdapterError(
            f"system {name!r} ({entry.value}) produced a {type(system).__name__}, which lacks "
            "the System protocol's methods (name, describe, roles, inventory, setup, teardown)"
        )
    return system
