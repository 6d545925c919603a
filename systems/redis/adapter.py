"""The redis system's adapter: one Redis 7 server (Debian's) as lock service and sinks.

Redis runs on the lock node with arguments only (Debian's redis.conf daemonizes and binds
localhost), its data under ``/var/lib/fencecheck/redis``, with ``appendonly yes`` and
``appendfsync always``: the careful setting, under which an acknowledged ``INCR`` of the epoch
counter is on disk before the reply. The holders' client is :mod:`systems.redis.client`.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from harness.node import Daemon, Node, NodeError
from harness.node.wait import CommandSucceeds, wait_for
from systems import deploy
from systems.base import (
    AdapterError,
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
from systems.redis import client

__all__ = ["BUG_SWITCHES", "PACKAGES", "RedisSystem"]

PACKAGES: Final = Path(__file__).with_name("packages.txt")
"""The Debian packages its nodes need beyond the node image, one a line."""

_DAEMON: Final = "redis-server"
_NO_AOF: Final = "no-aof"

BUG_SWITCHES: Final[Mapping[str, BugSwitch]] = types.MappingProxyType(
    {
        switch.name: switch
        for switch in (
            BugSwitch(
                client.RANDOM_VALUE_TOKEN,
                "the lock's random value is the token (redis-py's Lock, Redlock): the fenced "
                "store compares numbers that carry no order",
                "any run with two grants or more (--nemesis pause makes stale writes too)",
                "grant-regression; stale-write on store",
            ),
            BugSwitch(
                _NO_AOF,
                "Redis with its default persistence (appendonly no, RDB save points not reached): "
                "a SIGKILL and restart forgets the epoch counter, the lock and the sinks' data",
                "--nemesis kill --target lock: Redis killed and restarted",
                "grant-regression, epoch-reuse; lost-write on store",
            ),
            BugSwitch(
                client.UNCHECKED_RELEASE,
                "renew sets the lock again and release deletes it without checking whose it is: "
                "a holder back from a pause takes the lock over from its successor",
                "--workload sinks --nemesis pause: a holder paused past its lease resumes",
                "stale-write on owned",
            ),
        )
    }
)


class RedisSystem:
    """Redis 7 as lock service and sinks (see :mod:`systems.redis`).

    ``ready_timeout`` bounds the wait for Redis and the agents after a start; ``client_timeout``
    is how long a holder waits for Redis to answer before it reports an outcome as unknown.
    """

    name: Final = "redis"

    def __init__(
        self,
        port: int = 6379,
        agent_port: int = 7000,
        data_dir: str = f"{deploy.DATA_DIR}/redis",
        ready_timeout: float = 20.0,
        client_timeout: float = 5.0,
    ) -> None:
        self.port = port
        self.agent_port = agent_port
        self.data_dir = data_dir
        self.ready_timeout = ready_timeout
        self.client_timeout = client_timeout

    def roles(self) -> Mapping[str, int]:
        """One Redis server (the lock node) and at least one worker."""
        return {"lock": 1, "worker": 1}

    def bug_switches(self) -> Mapping[str, BugSwitch]:
        """``random-value-token``, ``no-aof`` and ``unchecked-release``."""
        return BUG_SWITCHES

    def validate(self, config: SystemConfig) -> None:
        """Reject switches this system does not have."""
        check_bugs(self.name, list(BUG_SWITCHES), config)

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """``store`` and ``owned`` fenced (each reports ``seq``), ``log`` unfenced."""
        return (
            Sink(
                "store",
                fenced=True,
                mitigation="none",
                description="a list per key in Redis; one Lua script compares the epoch with the "
                "lock's highest seen (numerically), appends, and takes seq from a counter",
            ),
            Sink(
                "owned",
                fenced=True,
                mitigation="none",
                description="a list per key in Redis; one Lua script appends only while the lock "
                "key still holds this grant's value",
            ),
            Sink(
                "log",
                fenced=False,
                mitigation="none",
                description="a plain RPUSH to a list per key: accepts every write",
            ),
        )

    def lease_ttl(self, config: SystemConfig) -> float:
        """The configured TTL: no switch changes it."""
        return config.lease_ttl

    def server_argv(self, config: SystemConfig) -> list[str]:
        """Redis's command line under ``config`` (the restart after a kill reuses it)."""
        argv = [
            "redis-server",
            "--bind",
            "0.0.0.0",
            "--port",
            str(self.port),
            "--protected-mode",
            "no",
            "--dir",
            self.data_dir,
            "--logfile",
            "",
        ]
        if _NO_AOF not in config.bugs:
            argv += ["--appendonly", "yes", "--appendfsync", "always"]
        return argv

    def _ready(self, node: Node) -> None:
        probe = f"redis-cli -h {node.ip} -p {self.port} ping | grep -qx PONG"
        try:
            wait_for(node, CommandSucceeds(probe, timeout=self.ready_timeout, interval=0.05))
        except NodeError as problem:
            raise AdapterError(f"Redis on {node.name} did not answer: {problem}") from None

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Start Redis on the lock node, then one agent per worker."""
        self.validate(config)
        check_roles(self.name, self.roles(), nodes)
        (server,) = nodes_with_role(nodes, "lock")
        workers = nodes_with_role(nodes, "worker")
        client_config = {
            "host": server.ip,
            "port": self.port,
            "timeout": self.client_timeout,
            "bugs": sorted(config.bugs),
        }

        def start_agent(node: Node) -> Daemon:
            listen = Endpoint(node.ip, self.agent_port)
            client_path = f"{deploy.INSTALL_DIR}/redis_client.py"
            files = {client_path: deploy.source_of(client), **deploy.agent_files()}
            argv = deploy.agent_argv(
                deploy.INSTALL_DIR,
                listen,
                node.name,
                client_path,
                self.lease_ttl(config),
                False,
                client_config,
            )
            deploy.install(node, files)
            return deploy.start_and_wait(
                node, deploy.AGENT_DAEMON, argv, listen, self.ready_timeout
            )

        try:
            deploy.fresh_dir(server, self.data_dir)
            server.start_daemon(_DAEMON, self.server_argv(config))
            self._ready(server)
            deploy.on_each(workers, start_agent)
        except (AdapterError, NodeError) as problem:
            self.teardown(nodes)
            raise AdapterError(f"setting up system {self.name!r} failed:\n{problem}") from None
        return Deployment(
            system=self.name,
            config=config,
            lease_ttl=self.lease_ttl(config),
            agents={node.name: Endpoint(node.ip, self.agent_port) for node in workers},
            targets=(
                ProcessTarget("lock", server.name, _DAEMON, self.port),
                *(
                    ProcessTarget("worker", node.name, deploy.AGENT_DAEMON, self.agent_port)
                    for node in workers
                ),
            ),
            inventory=self.inventory(config),
        )

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL Redis and the agents (the data directory stays for inspection)."""
        problems = []
        for node in nodes.values():
            try:
                deploy.kill_daemons(node, (_DAEMON, deploy.AGENT_DAEMON))
            except NodeError as problem:
                problems.append(f"{node.name}: {problem}")
        if problems:
            raise AdapterError("tearing down the redis system failed:\n" + "\n".join(problems))

    def restart(self, node: Node, target: ProcessTarget) -> Daemon:
        """Start a killed target again with its last command line and wait until it answers."""
        if target.daemon != _DAEMON:
            return deploy.restart_target(
                node, target, Endpoint(node.ip, target.port), self.ready_timeout
            )
        old = node.daemon(_DAEMON)
        if node.process_state(old) not in (None, "Z", "X"):
            raise AdapterError(f"Redis on {node.name} (pid {old.pid}) is still running")
        daemon = node.start_daemon(_DAEMON, old.argv)
        self._ready(node)
        return daemon
