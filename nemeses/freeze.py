"""Freeze: the cgroup freezer stops every process of a node at once (``docker pause``).

Confirmed by the backend: :meth:`harness.node.Freezable.freeze` returns once the node is frozen.
"""

from __future__ import annotations

from typing import Any

from harness.node import Freezable, Node
from nemeses._base import ToggleNemesis
from nemeses.protocol import Fault, NemesisError

__all__ = ["FreezeNemesis"]


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
