"""The redis system's adapter: one Redis 7 server (Debian's) as lock service and sinks.

Redis runs on the lock node with arguments only (Debian's redis.conf daemonizes and binds
localhost), its data under ``/var/lib/fencecheck/redis``, with ``appendonly yes`` and
``appendfsync always``: the careful setting, under which an acknowledged ``INCR`` of the epoch
counter is on disk before the reply. The holders' client is :mod:`systems.redis.client`.
"""

from __future__ import annotations

import shlex
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from harness.node import Daemon, Node, NodeError
from harness.node.wait import CommandSucceeds
from systems import deploy
from systems.base import (
    AdapterError,
    BugSwitch,
    Deployment,
    Exposure,
    HolderClientCode,
    ProcessTarget,
    RoleSpec,
    Sink,
    SystemConfig,
    check_bugs,
    check_roles,
    nodes_with_role,
    read_packages,
)
from systems.holder_flaws import check_no_clash
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
                "the lock's random value is the token (redis-py's Lock, Redlock): grants carry "
                "numbers in no order, which the fenced store compares",
                Exposure(faults=("pause",), ttl_multiples=(3.0,)),
                ("grant-regression",),
            ),
            BugSwitch(
                _NO_AOF,
                "Redis with its default persistence (appendonly no, RDB save points not reached): "
                "a SIGKILL and restart forgets the epoch counter, the lock and the sinks' data",
                Exposure(faults=("kill",), targets=("lock",)),
                ("grant-regression", "epoch-reuse", "lost-write"),
                ("store",),
            ),
            BugSwitch(
                client.UNCHECKED_RELEASE,
                "renew sets the lock again and release deletes it without checking whose it is: "
                "a holder back from a pause takes the lock over from its successor",
                Exposure(faults=("pause",), workload="sinks", ttl_multiples=(3.0,)),
                ("stale-write",),
                ("owned",),
            ),
        )
    }
)
"""The system's bug switches."""


class RedisSystem:
    """Redis 7 as lock service and sinks (see :mod:`systems.redis`).

    ``ready_timeout`` bounds the wait for Redis after a start; ``client_timeout`` is how long a
    holder waits for Redis to answer before it reports an outcome as unknown.
    """

    name: Final = "redis"

    def __init__(
        self,
        port: int = 6379,
        data_dir: str = f"{deploy.DATA_DIR}/redis",
        ready_timeout: float = 20.0,
        client_timeout: float = 5.0,
    ) -> None:
        self.port = port
        self.data_dir = data_dir
        self.ready_timeout = ready_timeout
        self.client_timeout = client_timeout
        check_no_clash(self.name, BUG_SWITCHES)

    def describe(self) -> str:
        """What the system is."""
        return (
            "Redis 7 (Debian, appendonly): SET NX PX + INCR in one script, Lua-fenced store and "
            "owned sinks, an unfenced log"
        )

    def roles(self) -> Mapping[str, RoleSpec]:
        """One Redis server ``r1`` (lock service and sinks) and workers ``w1..``."""
        return {"lock": RoleSpec(1, "r"), "worker": RoleSpec(1, "w")}

    def packages(self) -> tuple[str, ...]:
        """The Debian packages of ``packages.txt`` beside this module."""
        return read_packages(PACKAGES)

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
                description="a list per key in Redis; one Lua script compares the epoch with "
                "the lock's highest seen (numerically), appends, and takes seq from a counter",
                seq=True,
            ),
            Sink(
                "owned",
                fenced=True,
                mitigation="none",
                description="a list per key in Redis; one Lua script appends only while the "
                "lock key still holds this grant's value (seq from its own counter)",
                seq=True,
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
        """Redis's command line under ``config`` (the restart after a kill reuses it). With the
        run's secret, a config file comes first whose only line is ``requirepass``: only the run
        may use the server, and the password never shows in a command line."""
        argv = ["redis-server", *([self._auth_file] if config.secret_file else [])]
        argv += [
            *("--bind", "0.0.0.0", "--port", str(self.port), "--protected-mode", "no"),
            *("--dir", self.data_dir, "--logfile", ""),
        ]
        if _NO_AOF not in config.bugs:
            argv += ["--appendonly", "yes", "--appendfsync", "always"]
        return argv

    @property
    def _auth_file(self) -> str:
        return f"{self.data_dir}/auth.conf"

    def _ready(self, node: Node) -> CommandSucceeds:
        """Ready when ``redis-cli ping`` answers ``PONG``, authenticating (``REDISCLI_AUTH``, which
        no command line shows) with the password of the config file, if there is one."""
        auth = shlex.quote(self._auth_file)
        password = f"$(sed -n 's/^requirepass //p' {auth} 2>/dev/null)"
        probe = f'REDISCLI_AUTH="{password}" redis-cli -h {node.ip} -p {self.port} ping'
        return CommandSucceeds(
            f"{probe} | grep -qx PONG", timeout=self.ready_timeout, interval=0.05
        )

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Start Redis on the lock node from an empty data directory; name the holder client."""
        self.validate(config)
        check_roles(self.name, self.roles(), nodes)
        (server,) = nodes_with_role(nodes, "lock")
        try:
            deploy.fresh_dir(server, self.data_dir)
            if config.secret_file:
                secret = server.get_file(config.secret_file).decode().strip()
                server.put_file(self._auth_file, f"requirepass {secret}\n".encode(), 0o600)
            deploy.start_and_wait(server, _DAEMON, self.server_argv(config), self._ready(server))
        except (AdapterError, NodeError) as problem:
            self.teardown(nodes)
            raise AdapterError(f"setting up system {self.name!r} failed:\n{problem}") from None
        return Deployment(
            client=HolderClientCode(
                client,
                {
                    "host": server.ip,
                    "port": self.port,
                    "timeout": self.client_timeout,
                    "bugs": sorted(config.bugs),
                    "secret_file": config.secret_file,
                },
            ),
            targets=(ProcessTarget("lock", server.name, _DAEMON),),
            lease_ttl=self.lease_ttl(config),
        )

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL Redis (the data directory stays for inspection)."""
        deploy.tear_down("redis", nodes_with_role(nodes, "lock"), (_DAEMON,))

    def restart(self, node: Node, daemon: str) -> Daemon:
        """Start the killed Redis again with its last command line (same data directory) and
        wait until it answers: it reloads its append-only file, if it keeps one."""
        if daemon != _DAEMON:
            raise AdapterError(f"the redis system has no daemon {daemon!r} to restart")
        return deploy.restart_daemon(node, daemon, self._ready(node))
