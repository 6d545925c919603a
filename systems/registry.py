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
from systems.upgrade import import_problem, version_problem

__all__ = [
    "ENTRY_POINT_GROUP",
    "UnknownSystemError",
    "available_systems",
    "load_entry",
    "load_system",
]

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
    the entry point does not load, was written for another contract version, or does not produce
    a :class:`System`.
    """
    found = _entry_points()
    entry = found.get(name)
    if entry is None:
        listed = ", ".join(sorted(found)) or "none (is fencecheck installed? pip install -e .)"
        raise UnknownSystemError(f"unknown system {name!r}; available systems: {listed}")
    return load_entry(entry)


def load_entry(entry: EntryPoint) -> System:
    """Build the adapter ``entry`` names, checking first the contract it was written for.

    Raises :class:`AdapterError` with one line: what changed since the adapter's contract and
    where the guide says how to port it (:mod:`systems.upgrade`), or why it does not load.
    """
    name = entry.name
    try:
        factory = entry.load()
    except ImportError as problem:
        moved = import_problem(name, problem)
        if moved is not None:
            raise AdapterError(moved) from problem
        raise _failed(entry, problem) from problem
    except Exception as problem:
        raise _failed(entry, problem) from problem
    try:
        system = factory()
    except Exception as problem:
        raise _failed(entry, problem) from problem
    mismatch = version_problem(name, getattr(system, "CONTRACT", None))
    if mismatch is not None:
        raise AdapterError(mismatch)
    if not isinstance(system, System):
        raise AdapterError(
            f"system {name!r} ({entry.value}) produced a {type(system).__name__}, which lacks "
            "the System protocol's methods (name, describe, roles, inventory, setup, teardown)"
        )
    return system


def _failed(entry: EntryPoint, problem: Exception) -> AdapterError:
    return AdapterError(
        f"system {entry.name!r} ({entry.value}) failed to load: {problem!r}; "
        "check that its package is installed and imports cleanly"
    )
