"""Freeze: the cgroup freezer stops every process of a node at once (``docker pause``).

Confirmed by the backend: :meth:`harness.node.Freezable.freeze` returns once the node is frozen.
"""

from __future__ import annotations

from typing import Any

from harness.node import Freezable, Node
from nemeses._base import ToggleNemesis
from nemeses.kinds import Draw, FaultKind, Leftovers, ManualCommand
from nemeses.protocol import Fault, NemesisError

__all__ = ["KIND", "FreezeNemesis"]


class FreezeNemesis(ToggleNemesis):
    """Freezes the target nodes at ``start-freeze`` and thaws them at ``stop-freeze``."""

    kind = "freeze"

    def apply(self, node: Node, fault: Fault) -> dict[str, Any]:
        """Freeze ``node``; returns once frozen."""
        _freezable(node).freeze()
        return {}

    def undo(self, node: Node) -> None:
        """Thaw ``node``; returns once running."""
        _freezable(node).thaw()


def _freezable(node: Node) -> Freezable:
    if isinstance(node, Freezable):
        return node
    raise NemesisError(f"{node.name}: this backend cannot freeze a node; use pause instead")


def draw_node(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A whole-node fault with no parameters of its own."""
    return (draw.target,), {}


def _recover(node: Node, leftovers: Leftovers) -> bool:
    # Whether a node is frozen cannot be asked of every backend: only what the ledger says.
    if not (leftovers.frozen and isinstance(node, Freezable)):
        return False
    FreezeNemesis().undo(node)
    return True


KIND = FaultKind(
    name="freeze",
    summary="freeze every process of a node with the cgroup freezer (docker pause)",
    verb="frozen",
    colour="#22a6b3",
    heal_rank=1,
    blocks_commands=True,
    stops_holder=True,
    build=lambda locate, restarter: FreezeNemesis(),
    draw=draw_node,
    recover=_recover,
    manual=ManualCommand(
        help="Freeze every process of NODES with the cgroup freezer; thaw them after --for.",
        fault=lambda nodes, values, roles: Fault("freeze", nodes),
        leaves_frozen=True,
    ),
)
"""The freeze fault kind's registry entry."""
