"""Layer 1: the node interface (a container or a real host) and its backends.

:mod:`harness.node.protocol` holds the protocols every backend implements; backends live in
sub-packages (:mod:`harness.node.docker`).
"""

from harness.node.protocol import (
    CommandResult,
    Daemon,
    Freezable,
    NetnsRunner,
    Node,
    NodeError,
    NodeIdentity,
    Throttleable,
)

__all__ = [
    "CommandResult",
    "Daemon",
    "Freezable",
    "NetnsRunner",
    "Node",
    "NodeError",
    "NodeIdentity",
    "Throttleable",
]
