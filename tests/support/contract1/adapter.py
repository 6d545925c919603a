"""An adapter as contract 1 had them: it starts its own agents and hands back their Endpoints.

Kept as its author wrote it (the fixture of tests/systems/test_contract_version.py); importing it
fails on contract 2, which is the point.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.node import Daemon, Node
from systems.base import (
    BugSwitch,
    Deployment,
    Endpoint,
    ProcessTarget,
    Sink,
    SystemConfig,
)

__all__ = ["OldLockSystem"]


class OldLockSystem:
    """A lock on ``lock1``, a fenced store on ``store1``; the agents are the adapter's own."""

    name = "old-lock"

    def roles(self) -> Mapping[str, int]:
        """Contract 1 counted nodes: one lock, one store, at least one worker."""
        return {"lock": 1, "store": 1, "worker": 1}

    def bug_switches(self) -> Mapping[str, BugSwitch]:
        """Contract 1 required bug switches of every system; this one has none."""
        return {}

    def validate(self, config: SystemConfig) -> None:
        """Every config runs."""

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """One fenced sink."""
        return (Sink("store", fenced=True),)

    def lease_ttl(self, config: SystemConfig) -> float:
        """The run's TTL."""
        return config.lease_ttl

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Contract 1: the adapter started an agent per worker and returned their addresses."""
        agents = {name: Endpoint(node.ip, 7000) for name, node in nodes.items()}
        return Deployment(
            system=self.name,
            config=config,
            lease_ttl=config.lease_ttl,
            agents=agents,
            targets=(ProcessTarget("lock", "lock1", "lockd", 7001),),
            inventory=self.inventory(config),
        )

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """Nothing to stop here."""

    def restart(self, node: Node, target: ProcessTarget) -> Daemon:
        """Contract 1 required restart of every system, by target."""
        raise NotImplementedError("the fixture never runs")
