"""System-under-test adapters.

A system is packaged as an adapter implementing :class:`System` (see :mod:`systems.base`: the
required contract and the optional abilities) and registered under the entry-point group
``fencecheck.systems``; :func:`load_system` builds one by name and :func:`available_systems` lists
the names. :mod:`systems.reference` is fencecheck's own system with a bug switch per known fencing
mistake; :mod:`systems.holder_flaws` are the mistakes of the holder, available with every system;
:mod:`systems.deploy` helps adapters install and start programs. ``docs/adding-a-system.md`` is
the guide.
"""

from systems.base import (
    MITIGATIONS,
    ROLE_NAMES,
    AdapterError,
    BugSwitch,
    CollectsData,
    ConfigError,
    Deployment,
    Exposure,
    HolderClientCode,
    KnowsClientMember,
    KnowsLeader,
    Mitigation,
    NeedsPackages,
    PlantsBugs,
    ProcessTarget,
    Restarts,
    RoleSpec,
    Sink,
    System,
    SystemConfig,
    Volatile,
    WritesSpanKeys,
    durability_problem,
    lease_ttl_of,
    packages_of,
    read_packages,
    topology,
)
from systems.holder_flaws import HOLDER_FLAWS
from systems.registry import (
    ENTRY_POINT_GROUP,
    UnknownSystemError,
    available_systems,
    load_system,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "HOLDER_FLAWS",
    "MITIGATIONS",
    "ROLE_NAMES",
    "AdapterError",
    "BugSwitch",
    "CollectsData",
    "ConfigError",
    "Deployment",
    "Exposure",
    "HolderClientCode",
    "KnowsClientMember",
    "KnowsLeader",
    "Mitigation",
    "NeedsPackages",
    "PlantsBugs",
    "ProcessTarget",
    "Restarts",
    "RoleSpec",
    "Sink",
    "System",
    "SystemConfig",
    "UnknownSystemError",
    "Volatile",
    "WritesSpanKeys",
    "available_systems",
    "durability_problem",
    "lease_ttl_of",
    "load_system",
    "packages_of",
    "read_packages",
    "topology",
]
