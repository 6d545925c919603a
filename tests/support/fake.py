"""A no-op system adapter, a test double for code that drives :class:`systems.base.System`.

It starts nothing: :meth:`FakeSystem.setup` records the call and names the reference system's
holder client with a config pointing nowhere, so a test can drive the harness's side (the agents,
the runner's checks) without a lock service.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from harness.node import Node
from systems.base import (
    Deployment,
    HolderClientCode,
    RoleSpec,
    Sink,
    SystemConfig,
    check_roles,
)
from systems.reference import client

__all__ = ["FakeSystem"]


class FakeSystem:
    """Claims one fenced sink ``fake``; needs only workers; records every call."""

    CONTRACT: Final = 2
    name: Final = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def describe(self) -> str:
        """What it is."""
        return "a test double that starts nothing"

    def roles(self) -> Mapping[str, RoleSpec]:
        """Workers only."""
        return {"worker": RoleSpec(1, "w")}

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """A single fenced sink."""
        return (Sink("fake", fenced=True, mitigation="none", description="records nothing"),)

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Record the call; the client points at a closed port."""
        check_roles(self.name, self.roles(), nodes)
        self.calls.append(("setup", *sorted(nodes)))
        nowhere = {"lock": "127.0.0.1:9", "store": "127.0.0.1:9"}
        return Deployment(client=HolderClientCode(client, nowhere))

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """Record the call."""
        self.calls.append(("teardown", *sorted(nodes)))
