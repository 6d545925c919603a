"""Adapters that break the contract in one known way each, for ``adapter check``'s tests.

Each is the reference system with one of its mistakes always planted, under a name of its own, as
a third party's adapter with that mistake would behave.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from harness.node import Node
from systems.base import Deployment, SystemConfig
from systems.reference import ReferenceSystem

__all__ = [
    "LockForgetsEpochs",
    "OpenToOutsiders",
    "StoreIgnoresEpochs",
    "UnfencedSinkClaimedFenced",
]


class _AlwaysBroken(ReferenceSystem):
    """The reference system with ``mistake`` planted whatever the run asks for."""

    mistake = ""

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Set up with the mistake planted."""
        return super().setup(nodes, replace(config, bugs=config.bugs | {self.mistake}))


class StoreIgnoresEpochs(_AlwaysBroken):
    """Its store does not check epochs, though the inventory says fenced."""

    mistake = "no-store-check"


class LockForgetsEpochs(_AlwaysBroken):
    """Its lock service keeps epochs in memory: a restart starts again at 1."""

    mistake = "epoch-in-memory"


class UnfencedSinkClaimedFenced(_AlwaysBroken):
    """Its bulk path ``store-batch`` checks no epochs, though the inventory says fenced."""

    mistake = "unfenced-path"


class OpenToOutsiders(ReferenceSystem):
    """Its servers ignore the run's secret: anyone who reaches their ports may use them."""

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Set up as if no secret had been installed."""
        return super().setup(nodes, replace(config, secret_file=None))
