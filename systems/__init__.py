"""System-under-test adapters.

A system is packaged as an adapter implementing :class:`System` (see :mod:`systems.base`) and
registered under the entry-point group ``fencecheck.systems``; :func:`load_system` builds one by
name and :func:`available_systems` lists the names. :mod:`systems.reference` is fencecheck's own
system with a bug switch per known fencing mistake; :mod:`systems.fake` is a no-op test double.
"""

from systems.base import (
    MITIGATIONS,
    AdapterError,
    BugSwitch,
    CollectsData,
    ConfigError,
    Deployment,
    Endpoint,
    HolderClient,
    Mitigation,
    ProcessTarget,
    Sink,
    System,
    SystemConfig,
)
from systems.registry import (
    ENTRY_POINT_GROUP,
    UnknownSystemError,
    available_systems,
    load_system,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "MITIGATIONS",
    "AdapterError",
    "BugSwitch",
    "CollectsData",
    "ConfigError",
    "Deployment",
    "Endpoint",
    "HolderClient",
    "Mitigation",
    "ProcessTarget",
    "Sink",
    "System",
    "SystemConfig",
    "UnknownSystemError",
    "available_systems",
    "load_system",
]
