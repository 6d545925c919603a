"""The redis system's adapter: a Redis 7 primary, its replica and Sentinel (Debian's).

Redis runs on the two lock nodes with arguments (Debian's redis.conf daemonizes and binds
localhost) after a config file of its own, its data under ``/var/lib/fencecheck/redis``, with
``appendonly yes`` and ``appendfsync always``: the careful setting, under which an acknowledged
``INCR`` of the epoch counter is on disk before the reply. ``r1`` starts as the primary, ``r2`` as
its replica (``replicaof`` in its config file, which Sentinel rewrites on a failover, so a restart
keeps the role Sentinel gave). One Sentinel on ``r2`` watches the primary and promotes the replica
when the primary stops answering for :meth:`RedisSystem.down_after_ms`; the holders ask it where
the primary is. The holders' client is :mod:`systems.redis.client`.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from systems import (
    PAUSE_PAST_LEASE,
    AdapterError,
    BugSwitch,
    CommandSucceeds,
    Daemon,
    DaemonEntry,
    DaemonTable,
    Deployment,
    Exposure,
    HolderClientCode,
    Node,
    NodeError,
    PackagesBeside,
    RoleSpec,
    Sink,
    SwitchTable,
    SystemConfig,
    deploy,
    nodes_with_role,
    setting_up,
    switch_table,
    wait_for,
)
from systems.redis import client

__all__ = ["BUG_SWITCHES", "PACKAGES", "RedisSystem"]

PACKAGES: Final = Path(__file__).with_name("packages.txt")
"""The Debian packages its nodes need beyond the node image, one a line."""

_DAEMON: Final = "redis-server"
_SENTINEL: Final = "redis-sentinel"
_SERVICE: Final = "fencecheck"
_NO_AOF: Final = "no-aof"
_ASYNC_FAILOVER: Final = "async-failover"
_EVERYSEC: Final = "appendfsync-everysec"
_FSYNC_NO: Final = "appendfsync-no"
_APPENDFSYNC: Final = {_EVERYSEC: "everysec", _FSYNC_NO: "no"}
"""The bug switches that weaken ``appendfsync``, and the value each sets."""
_POWER_LOSS_OF_PRIMARY: Final = Exposure(
    faults=("power-loss",), targets=("lock-leader",), ttl_multiples=(3.0,)
)
"""The primary (the server Sentinel names when the window starts) losing power for three TTLs:
back within Sentinel's down-after (five TTLs), it reloads what its append-only file had synced
and the replica copies that. (The holder's lease-aware shape lands on the primary too, since
:meth:`RedisSystem.record_targets` names it; drawn among both servers, as it was before, 64 of 242
power losses over seeds 1-20 landed on ``r2``, whose loss drops nothing the primary lacks.)"""

BUG_SWITCHES: Final = switch_table(
    BugSwitch(
        client.RANDOM_VALUE_TOKEN,
        "the lock's random value is the token (redis-py's Lock, Redlock): grants carry "
        "numbers in no order, which the fenced store compares",
        PAUSE_PAST_LEASE,
        ("grant-regression",),
    ),
    BugSwitch(
        _NO_AOF,
        "Redis with its default persistence (appendonly no, RDB save points not reached): "
        "a SIGKILL and restart forgets the epoch counter, the lock and the sinks' data",
        # The primary back within Sentinel's down-after: its replica copies the empty data.
        Exposure(faults=("kill",), targets=("lock-leader",), ttl_multiples=(3.0,)),
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
    BugSwitch(
        _ASYNC_FAILOVER,
        "replication is asynchronous (no WAIT): cut off from the primary, the replica "
        "falls behind while the primary grants on; Sentinel promotes it and the holders "
        "follow, so the epoch counter goes back",
        # Cut off longer than Sentinel's down-after (5 s), so that it promotes r2.
        Exposure(faults=("partition",), targets=("r2",), ttl_multiples=(8.0,)),
        ("grant-regression", "epoch-reuse"),
    ),
    BugSwitch(
        _EVERYSEC,
        "appendfsync everysec (Redis's default with appendonly): an INCR of the epoch counter "
        "is acknowledged before its append-only file is fsynced, which happens once a second; "
        "a kill keeps it (the page cache does), a power loss drops the last second",
        _POWER_LOSS_OF_PRIMARY,
        ("grant-regression", "epoch-reuse", "lost-write", "stale-write"),
        ("store",),
    ),
    BugSwitch(
        _FSYNC_NO,
        "appendfsync no: Redis never fsyncs its append-only file and leaves it to the OS; a "
        "kill keeps everything, a power loss drops every change since the file was last "
        "rewritten",
        _POWER_LOSS_OF_PRIMARY,
        ("grant-regression", "epoch-reuse", "lost-write", "stale-write"),
        ("store",),
    ),
    BugSwitch(
        client.OWNED_TRUSTS_LEASE,
        "the owned sink appends without checking the lock: it relies on the lease (a holder "
        "writes only while its own timer says it holds it). Redis expires the lock key on its "
        "own wall clock, so a step forward or a fast clock on the primary frees the lock under "
        "its holder, and both holders' writes land (only a clock fault shows it)",
        # Holders that keep their lease many writes long are mid-lease when the primary's wall
        # clock moves; a fast rate (2x or 4x, drawn for the lock) shrinks the lease too. The
        # stale holder goes on until the store, which compares epochs, refuses it.
        Exposure(
            faults=("clock-step", "clock-rate"),
            targets=("lock-leader",),
            workload="sinks",
            ttl_multiples=(3.0,),
            writes_per_lease=50,
        ),
        ("stale-write",),
        ("owned",),
    ),
)
"""The system's bug switches."""


@dataclass(eq=False)
class RedisSystem(PackagesBeside, SwitchTable):
    """Redis 7 as lock service and sinks (see :mod:`systems.redis`).

    ``ready_timeout`` bounds the wait for Redis after a start; ``client_timeout`` is how long a
    holder waits for Redis to answer before it reports an outcome as unknown; ``down_after_ttls``
    is how long, in lease TTLs, the primary must be silent before Sentinel promotes the replica
    (longer than the kills that expose ``no-aof``, so a restarted primary is back before it;
    shorter than the partitions that expose ``async-failover``); ``wait_ms`` how long a holder
    waits for the replica to acknowledge a change.
    """

    CONTRACT = 2  # the adapter contract this was written for (systems.base.CONTRACT)
    name = "redis"
    switches = BUG_SWITCHES

    port: int = 6379
    sentinel_port: int = 26379
    data_dir: str = f"{deploy.DATA_DIR}/redis"
    ready_timeout: float = 20.0
    client_timeout: float = 5.0
    down_after_ttls: float = 5.0
    wait_ms: int = 1000

    def request_framing(self) -> Mapping[str, tuple[str, str]]:
        """RESP; a fenced write is one of the client's scripts (``EVALSHA``)."""
        return {"lock": ("resp", "EVALSHA")}

    def clock_roles(self) -> Mapping[str, str]:
        """Both Redis servers, wall clock only, under fencecheck's clock shim (not libfaketime).

        Measured in the system image: Debian bookworm's redis-server 7.0 does not start under
        libfaketime 0.9.10. It links jemalloc, whose initialisation reads the clock;
        libfaketime's clock_gettime then looks its real functions up with dlsym, which allocates
        through jemalloc again (wolfcw/libfaketime#130, open; #327, #478). It hangs or exits with
        "Cannot recover from unexpected recursive calls to clock_gettime()" with and without a
        control file, with FAKETIME_DONT_FAKE_MONOTONIC=1, FAKETIME_FORCE_MONOTONIC_FIX=0,
        FAKETIME_DONT_RESET=1 or MALLOC_CONF=background_thread:false; preloading glibc ahead of
        jemalloc makes it segfault. The shim (:data:`harness.nodeside.clock.SHIM`) reads the same
        control file through raw system calls; Redis ``TIME`` confirms each change. Wall only:
        Redis expires keys (and times ``WAIT``) on the wall clock, which an NTP step moves; its
        event loop's timers stay on the real monotonic clock. Sentinel keeps the real clock.
        """
        return {"lock": ""}

    def describe(self) -> str:
        """What the system is."""
        return (
            "Redis 7 (Debian, appendonly, a replica and Sentinel): SET NX PX + INCR in one "
            "script, WAIT for the replica, Lua-fenced store and owned sinks, an unfenced log"
        )

    def roles(self) -> Mapping[str, RoleSpec]:
        """Redis servers ``r1`` (the first primary) and ``r2`` (its replica, with Sentinel): the
        lock service and the sinks; workers ``w1..``."""
        return {"lock": RoleSpec(2, "r"), "worker": RoleSpec(1, "w")}

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """``store`` and ``owned`` fenced (each reports ``seq``; ``owned`` relies on the lease
        instead with ``owned-trusts-lease``), ``log`` unfenced."""
        return (
            Sink(
                "store",
                fenced=True,
                mitigation="none",
                description="a list per key in Redis; one Lua script compares the epoch with "
                "the lock's highest seen (numerically), appends, and takes seq from a counter",
                seq=True,
            ),
            self._owned(config),
            Sink(
                "log",
                fenced=False,
                mitigation="none",
                description="a plain RPUSH to a list per key: accepts every write",
            ),
        )

    def _owned(self, config: SystemConfig) -> Sink:
        """The owned sink: fenced by ownership, or with ``owned-trusts-lease`` a sink that relies
        on the lease (the careful holder confirms its lease before a write late in it)."""
        if client.OWNED_TRUSTS_LEASE in config.bugs:
            return Sink(
                "owned",
                fenced=False,
                mitigation="lock-delay",
                description="a list per key in Redis; one Lua script appends with no check (it "
                "relies on the lease; no lock-delay) and takes seq from its own counter",
                seq=True,
            )
        return Sink(
            "owned",
            fenced=True,
            mitigation="none",
            description="a list per key in Redis; one Lua script appends only while the lock "
            "key still holds this grant's value (seq from its own counter)",
            seq=True,
        )

    def server_argv(self, config: SystemConfig) -> list[str]:
        """Redis's command line under ``config`` (the restart after a kill reuses it). Its config
        file comes first: the password (``requirepass``, ``masterauth``: only the run may use the
        server, and the password never shows in a command line) and, on the replica,
        ``replicaof``; Sentinel rewrites the file when it changes a server's role."""
        argv = ["redis-server", self._config_file]
        argv += [
            *("--bind", "0.0.0.0", "--port", str(self.port), "--protected-mode", "no"),
            *("--dir", self.aof_dir, "--logfile", ""),
            # A replica back from a kill or partition copies the primary at once, not after the
            # default 5 s spent waiting for other replicas: nothing counts until it has.
            *("--repl-diskless-sync-delay", "0"),
        ]
        if _NO_AOF not in config.bugs:
            fsync = next((_APPENDFSYNC[b] for b in sorted(config.bugs) if b in _APPENDFSYNC), None)
            argv += ["--appendonly", "yes", "--appendfsync", fsync or "always"]
        return argv

    def sentinel_argv(self) -> list[str]:
        """Sentinel's command line: its config file, which it rewrites as it learns."""
        return [_SENTINEL, self._sentinel_file]

    @property
    def aof_dir(self) -> str:
        """Where Redis keeps its append-only file (``--dir``): a directory of its own under
        :attr:`data_dir`, so that the lazy file system of the disk faults sits under the data
        alone; the config files Sentinel rewrites stay beside it, on the node's own disk."""
        return f"{self.data_dir}/data"

    def disk_dirs(self) -> Mapping[str, str]:
        """The lock service's data: each Redis server's append-only file."""
        return {"lock": self.aof_dir}

    def record_targets(self) -> Mapping[str, str]:
        """The lock service's data of record is the primary's (``lock-leader``, the server
        Sentinel names): the replica copies it, and its own power loss drops nothing the
        primary lacks, so a power loss aimed at the holder lands on the primary."""
        return {"lock": "lock-leader"}

    @property
    def _config_file(self) -> str:
        return f"{self.data_dir}/redis.conf"

    @property
    def _sentinel_file(self) -> str:
        return f"{self.data_dir}/sentinel.conf"

    def _cli(self, node: Node, port: int, command: str) -> str:
        """A ``redis-cli`` call on ``node`` authenticated (``REDISCLI_AUTH``, which no command line
        shows) with the password of the node's config file, if there is one."""
        conf = shlex.quote(self._config_file)
        password = f"$(sed -n 's/^requirepass //p' {conf} 2>/dev/null | tr -d '\"')"
        return f'REDISCLI_AUTH="{password}" redis-cli -h {node.ip} -p {port} {command}'

    def _ready(self, node: Node) -> CommandSucceeds:
        """Ready when ``redis-cli ping`` answers ``PONG``."""
        probe = self._cli(node, self.port, "ping")
        return CommandSucceeds(
            f"{probe} | grep -qx PONG", timeout=self.ready_timeout, interval=0.05
        )

    def _replicating(self, node: Node) -> CommandSucceeds:
        """Ready when the replica's link to its primary is up (its first copy is loaded)."""
        probe = self._cli(node, self.port, "info replication")
        return CommandSucceeds(
            f"{probe} | grep -q '^master_link_status:up'", timeout=self.ready_timeout
        )

    def _watching(self, node: Node) -> CommandSucceeds:
        """Ready when the Sentinel of ``node`` knows the replica there, which it would promote."""
        probe = self._cli(node, self.sentinel_port, f"sentinel replicas {_SERVICE}")
        return CommandSucceeds(
            f"{probe} | grep -qx {shlex.quote(node.ip)}", timeout=self.ready_timeout
        )

    def _server_conf(self, secret: str | None, primary: Node | None) -> bytes:
        lines = [f"requirepass {secret}", f"masterauth {secret}"] if secret else []
        if primary is not None:
            lines.append(f"replicaof {primary.ip} {self.port}")
        return "".join(f"{line}\n" for line in lines).encode()

    def down_after_ms(self, config: SystemConfig) -> int:
        """How long Sentinel waits for a silent primary before it promotes the replica."""
        return round(self.down_after_ttls * self.lease_ttl(config) * 1000)

    def _sentinel_conf(self, secret: str | None, primary: Node, down_after_ms: int) -> bytes:
        lines = [
            f"port {self.sentinel_port}",
            "bind 0.0.0.0",
            "protected-mode no",
            f"dir {self.data_dir}",
            'logfile ""',
            f"sentinel monitor {_SERVICE} {primary.ip} {self.port} 1",
            f"sentinel down-after-milliseconds {_SERVICE} {down_after_ms}",
            f"sentinel failover-timeout {_SERVICE} {2 * down_after_ms}",
        ]
        if secret:
            lines += [f"requirepass {secret}", f"sentinel auth-pass {_SERVICE} {secret}"]
        return "".join(f"{line}\n" for line in lines).encode()

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Start the primary on ``r1``, then its replica and Sentinel on ``r2``, from empty data
        directories, and wait until the replica has its copy and Sentinel knows it."""
        with setting_up(self, nodes, config):
            primary, replica = nodes_with_role(nodes, "lock")
            secret = None
            if config.secret_file:
                secret = primary.get_file(config.secret_file).decode().strip()
            for node, source in ((primary, None), (replica, primary)):
                deploy.fresh_dir(node, self.data_dir)
                deploy.data_dir(node, self.aof_dir, config.lazy_disks)
                node.put_file(self._config_file, self._server_conf(secret, source), 0o600)
                self._start_server(node, config)
            wait_for(replica, self._replicating(replica))
            replica.put_file(
                self._sentinel_file,
                self._sentinel_conf(secret, primary, self.down_after_ms(config)),
                0o600,
            )
            self.daemons.start(replica, _SENTINEL, self.sentinel_argv())
        return Deployment(
            client=HolderClientCode(
                client,
                {
                    "sentinels": [[replica.ip, self.sentinel_port]],
                    "service": _SERVICE,
                    "timeout": self.client_timeout,
                    "replica_acks": 0 if _ASYNC_FAILOVER in config.bugs else 1,
                    "wait_ms": self.wait_ms,
                    "bugs": sorted(config.bugs),
                    "secret_file": config.secret_file,
                },
            ),
            targets=self.daemons.targets(nodes),
            lease_ttl=self.lease_ttl(config),
        )

    def _start_server(self, node: Node, config: SystemConfig) -> Daemon:
        """Start Redis on ``node``; in a run with clock faults under the clock shim, wall clock
        only, read back with ``TIME`` (authenticated with the run's secret, if any)."""
        ready = self.daemons.entry(_DAEMON).ready(node)
        ask = f"redis:{node.ip}:{self.port}" + (
            f":{config.secret_file}" if config.secret_file else ""
        )
        argv = self.server_argv(config)
        return deploy.start_clocked(
            node, _DAEMON, argv, ready, ask, config.clocked, wall_only=True, mover="shim"
        )

    @property
    def daemons(self) -> DaemonTable:
        """Redis on both lock nodes, ready when it answers ``PONG``; Sentinel (beside the
        replica; faults do not aim at it), ready when it knows the replica it would promote, and
        after a restart when it answers ``PONG``."""
        return DaemonTable(
            self.name,
            DaemonEntry(_DAEMON, "lock", self._ready),
            DaemonEntry(
                _SENTINEL, "lock", self._watching, ready_again=self._sentinel_up, targeted=False
            ),
        )

    def _sentinel_up(self, node: Node) -> CommandSucceeds:
        probe = self._cli(node, self.sentinel_port, "ping")
        return CommandSucceeds(f"{probe} | grep -qx PONG", timeout=self.ready_timeout)

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL Redis and Sentinel (the data directories stay for inspection)."""
        self.daemons.tear_down(nodes)

    def restart(self, node: Node, daemon: str) -> Daemon:
        """Start the killed Redis (or Sentinel) again with its last command line (same data
        directory) and wait until it answers: Redis reloads its append-only file, if it keeps
        one, in the role its config file last had."""
        return self.daemons.restart(node, daemon)

    def lock_leader(self, nodes: Mapping[str, Node]) -> str | None:
        """The Redis node Sentinel names as the primary (``None`` if it names none we know)."""
        servers = nodes_with_role(nodes, "lock")
        command = self._cli(servers[-1], self.sentinel_port, "sentinel get-master-addr-by-name")
        try:
            answer = servers[-1].run(f"{command} {_SERVICE}", timeout=5.0, check=True)
        except NodeError as problem:
            raise AdapterError(f"asking Sentinel for the primary failed: {problem}") from None
        lines = answer.stdout.split()
        return next((node.name for node in servers if lines and node.ip == lines[0]), None)
