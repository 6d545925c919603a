"""The no-op system's adapter: an in-memory lock and fenced sink, for measuring the harness.

One node ``n1`` runs :mod:`systems.noop.server` on port 7201 (lock service and sink ``memory`` in
one process); workers ``w1..`` hold leases through the harness's agents with
:mod:`systems.noop.client`. The system does per request what a fenced system must (strictly
increasing epochs, a real fence check), and no more: no disk, so a run's speed is the harness's
(``bench/capacity.py``). Its state is not durable, so it declares its one role volatile
(:class:`systems.base.Volatile`) and runs that would kill it are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from systems import (
    Daemon,
    DaemonEntry,
    DaemonTable,
    Deployment,
    HolderClientCode,
    Node,
    PackagesBeside,
    RoleSpec,
    Sink,
    SystemConfig,
    deploy,
    nodes_with_role,
    setting_up,
)
from systems.noop import client, server

__all__ = ["NoopSystem"]

_PORT: Final = 7201
_DAEMON: Final = "noop-server"
_PROGRAM: Final = f"{deploy.INSTALL_DIR}/noop_server.py"


@dataclass(eq=False)
class NoopSystem(PackagesBeside):
    """The no-op system (see :mod:`systems.noop`); ``client_timeout`` is how long the holder
    client waits for the server before it reports an outcome as unknown. Its ``packages.txt``
    lists none: the server is stdlib-only Python."""

    CONTRACT: ClassVar[int] = 2  # the adapter contract this was written for
    name: ClassVar[str] = "noop"

    ready_timeout: float = 20.0
    client_timeout: float = 10.0

    def describe(self) -> str:
        """One line for ``fencecheck list``."""
        return (
            "an in-memory lock and fenced sink with no disk, for measuring the harness "
            "(bench/capacity.py); not durable: kill faults on it are refused"
        )

    def roles(self) -> Mapping[str, RoleSpec]:
        """One node ``n1`` (lock service and sink), workers ``w1..``."""
        return {"lock": RoleSpec(1, "n"), "worker": RoleSpec(1, "w")}

    def volatile_roles(self) -> tuple[str, ...]:
        """The server keeps everything in memory: a kill of it forgets epochs and marks."""
        return ("lock",)

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """One fenced sink that numbers what it accepts (``seq``)."""
        return (
            Sink(
                "memory",
                fenced=True,
                mitigation="none",
                description="in-memory append-only list per key; refuses an epoch below the "
                "lock's highest accepted (not durable)",
                seq=True,
            ),
        )

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Install and start the server on ``n1``; name the holder client."""
        with setting_up(self, nodes, config):
            (node,) = nodes_with_role(nodes, "lock")
            self._start(node, config)
        return Deployment(
            client=HolderClientCode(
                client, {"server": f"{node.ip}:{_PORT}", "timeout": self.client_timeout}
            ),
            targets=self.daemons.targets(nodes),
        )

    def _start(self, node: Node, config: SystemConfig) -> Daemon:
        deploy.install(node, {_PROGRAM: deploy.source_of(server), **deploy.nodeside_files()})
        # The harness wrote the run's secret there before setup: only the run may use the server.
        secret = ["--secret-file", config.secret_file] if config.secret_file else []
        argv = ["python3", _PROGRAM, "--host", node.ip, "--port", str(_PORT), *secret]
        return self.daemons.start(node, _DAEMON, argv)

    @property
    def daemons(self) -> DaemonTable:
        """The server on the lock node, ready when it answers a ping."""
        return DaemonTable(
            self.name,
            DaemonEntry(_DAEMON, "lock", lambda _: deploy.Pings(_PORT, self.ready_timeout)),
        )

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL the server (it keeps no data)."""
        self.daemons.tear_down(nodes)
