"""Adapter contract versions: which one an adapter was written for, and what changed since.

An adapter declares the contract it was written for as the class attribute ``CONTRACT`` (an
integer, written out, not imported: it records what its author read). The registry compares it
with :data:`systems.base.CONTRACT` before it uses the adapter, and turns the failures an adapter
written for an older contract runs into (a mismatch, a missing declaration, an import of a name
that moved) into one line naming what changed and the guide's migration section. CHANGELOG.md
lists the same changes for people.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from systems.base import CONTRACT

__all__ = ["CHANGES", "MIGRATION", "RETIRED", "import_problem", "version_problem"]

MIGRATION: Final = "docs/adding-a-system.md#migrating-from-an-older-contract"
"""Where the guide says how to port an adapter to the current contract."""

CHANGES: Final[Mapping[int, str]] = MappingProxyType(
    {
        2: (
            "contract 2 replaced Endpoint and the agents an adapter started (the harness starts "
            "them; setup returns Deployment(client=HolderClientCode(module, config), targets)), "
            "roles() returns RoleSpec, restart(node, daemon) and bug switches became the optional "
            "Restarts and PlantsBugs, BugSwitch.exposed_by is an Exposure, and holder clients "
            "return typed results (harness.nodeside.client)"
        ),
    }
)
"""What each contract version changed, in one sentence each, by version."""

RETIRED: Final[Mapping[str, str]] = MappingProxyType(
    {
        "systems.base.Endpoint": "gone: the harness dials its own agents",
        "systems.Endpoint": "gone: the harness dials its own agents",
        "systems.base.HolderClient": "now harness.nodeside.client.HolderClient",
        "systems.HolderClient": "now harness.nodeside.client.HolderClient",
        "systems.fake": "gone: write your own test double",
    }
)
"""Names an older contract offered, what became of each (``module.name`` or a module)."""

_CANNOT_IMPORT: Final = re.compile(r"cannot import name '([^']+)' from '([^']+)'")


def version_problem(name: str, declared: object) -> str | None:
    """Why an adapter ``name`` declaring contract ``declared`` (``None``: no ``CONTRACT``
    attribute) cannot be used, in one line; ``None`` if it was written for this contract."""
    if declared == CONTRACT and isinstance(declared, int):
        return None
    if declared is None:
        said = "declares no CONTRACT, so it was written for contract 1"
    elif not isinstance(declared, int) or isinstance(declared, bool):
        said = f"declares CONTRACT = {declared!r}, not a version number"
    else:
        said = f"was written for contract {declared}"
    if isinstance(declared, int) and declared > CONTRACT:
        change = "it needs a newer fencecheck (pip install -U fencecheck)"
    else:
        since = (declared if isinstance(declared, int) and declared > 0 else 1) + 1
        change = "; ".join(CHANGES[version] for version in range(since, CONTRACT + 1))
    return (
        f"system {name!r} {said}; this fencecheck implements contract {CONTRACT}: {change}; "
        f"port it as {MIGRATION} says, then set CONTRACT = {CONTRACT}"
    )


def import_problem(name: str, problem: ImportError) -> str | None:
    """One line for an adapter ``name`` whose import failed on a name an older contract offered
    (``None`` when the failed import is not one of :data:`RETIRED`)."""
    found = _CANNOT_IMPORT.search(str(problem))
    retired = f"{found.group(2)}.{found.group(1)}" if found else (problem.name or "")
    fate = RETIRED.get(retired)
    if fate is None:
        return None
    return (
        f"system {name!r} imports {retired}, which contract {CONTRACT} no longer has ({fate}): "
        f"it was written for an older contract; {CHANGES[CONTRACT]}; "
        f"port it as {MIGRATION} says, then set CONTRACT = {CONTRACT}"
    )
