"""System-under-test adapters.

A system is packaged as an adapter implementing :class:`System` (see :mod:`systems.base`: the
required contract and the optional abilities) and registered under the entry-point group
``fencecheck.systems``; :func:`load_system` builds one by name and :func:`available_systems` lists
the names. :mod:`systems.reference` is fencecheck's own system with a bug switch per known fencing
mistake; :mod:`systems.holder_flaws` are the mistakes of the holder, available with every system;
:mod:`systems.deploy` helps adapters install and start programs, and :mod:`systems.kit` offers
the parts adapters would otherwise write alike. ``docs/adding-a-system.md`` is the guide.

This package is the adapter author's one import: every name of the contract
(:mod:`systems.base`), of the kit (:mod:`systems.kit`), :mod:`systems.deploy` itself, and the
node types and wait strategies an adapter handles (:mod:`harness.node`,
:mod:`harness.node.wait`), e.g. ``from systems import DaemonTable, Deployment, Node, PortOpen``.
"""

from harness.node import Daemon, Node, NodeError
from harness.node.wait import CommandSucceeds, LogLine, PortOpen, WaitStrategy, wait_all, wait_for
from systems import base, deploy, kit

# The contract's and the kit's names are listed once, in their modules' __all__; the package
# offers all of them.
from systems.base import *  # noqa: F403
from systems.holder_flaws import HOLDER_FLAWS
from systems.kit import *  # noqa: F403
from systems.registry import (
    ENTRY_POINT_GROUP,
    UnknownSystemError,
    available_systems,
    load_system,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "HOLDER_FLAWS",
    "CommandSucceeds",
    "Daemon",
    "LogLine",
    "Node",
    "NodeError",
    "PortOpen",
    "UnknownSystemError",
    "WaitStrategy",
    "available_systems",
    "deploy",
    "load_system",
    "wait_all",
    "wait_for",
]
__all__ += base.__all__ + kit.__all__
