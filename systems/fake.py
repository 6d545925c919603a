"""A no-op system adapter, a test double for code that drives :class:`systems.base.System`.

It starts nothing: :meth:`FakeSystem.setup` records the call and reports agents at each worker's
address, so a test can point them at agents of its own (or at nothing, to test failure paths).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from harness.node import Daemon, Node
from systems.base import (
    BugSwitch,
    Deployment,
    Endpoint,
    ProcessTarget,
    Sink,
    SystemConfig,
    check_bugs,
    check_roles,
    nodes_with_role,
)

__all__ = ["FakeSystem"]


class FakeSystem:
    """Claims one fenced sink ``fake`` and one switch ``fake-bug``; records every call."""

    name: Final = "fake"

    def __init__(self, agent_port: int = 7000) -> None:
        self.agent_port = agent_port
        self.calls: list[tuple[str, ...]] = []

    def roles(self) -> Mapping[str, int]:
        """Workers only."""
        return {"worker": 1}

    def bug_switches(self) -> Mapping[str, BugSwitch]:
        """One switch that does nothing."""
        return {"fake-bug": BugSwitch("fake-bug", "does nothing", "nothing", "none")}

    def validate(self, config: SystemConfig) -> None:
        """Reject unknown switch names."""
        check_bugs(self.name, list(self.bug_switches()), config)

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """A single fenced sink."""
        return (Sink("fake", fenced=True, mitigation="none", description="records nothing"),)

    def lease_ttl(self, config: SystemConfig) -> float:
        """The configured TTL, unchanged."""
        return config.lease_ttl

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Record the call; agents are reported at ``worker.ip:agent_port``."""
        self.validate(config)
        check_roles(self.name, self.roles(), nodes)
        self.calls.append(("setup", *sorted(nodes)))
        workers = nodes_with_role(nodes, "worker")
        return Deployment(
            system=self.name,
            config=config,
            lease_ttl=self.lease_ttl(config),
            agents={node.name: Endpoint(node.ip, self.agent_port) for node in workers},
            targets=tuple(
                ProcessTarget("worker", node.name, "agent", self.agent_port) for node in workers
            ),
            inventory=self.inventory(config),
        )

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """Record the call."""
        self.calls.append(("teardown", *sorted(nodes)))

    def restart(self, node: Node, target: ProcessTarget) -> Daemon:
        """Record the call and return the node's record of the daemon."""
        self.calls.append(("restart", node.name, target.daemon))
        return node.daemon(target.daemon)
