"""The reference system's adapter: our lock server, fenced store and audit sink, with bug switches.

Layout on the nodes: programs under ``/opt/fencecheck``, data under ``/var/lib/fencecheck``; the
lock server listens on 7001 on the lock node ``l1``, the store (all three sinks) on 7002 on the
store node ``s1``. Each listens on its node's address on the run's network; the holder client
(:mod:`systems.reference.client`, shipped to the workers by the harness) reaches them there.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from systems import (
    PAUSE_PAST_LEASE,
    BugSwitch,
    ConfigError,
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
)
from systems.reference import lock_server, store_server

__all__ = ["BUG_SWITCHES", "Ports", "ReferenceSystem"]

_LOCK_DAEMON: Final = "lock-server"
_STORE_DAEMON: Final = "store"
_LONG_TTL_FACTOR: Final = 5.0
_SHORT_DELAY_FACTOR: Final = 0.1

_POWER_LOSS_AT_TAKEOVER: Final = Exposure(
    faults=("power-loss",), targets=("holder", "store"), ttl_multiples=(3.0,)
)
"""Power losses at the holder (paused three TTLs, the store or lock node losing power right
after the takeover, nemeses.disk: what the takeover taught it, if unsynced, is lost) and at the
store (whatever it acknowledged unsynced is lost)."""
_LOCK_POWER_LOSS: Final = Exposure(
    faults=("power-loss",), targets=("holder", "lock"), ttl_multiples=(3.0,)
)
"""The same for the lock service: its counters, if unsynced, are lost."""

BUG_SWITCHES: Final = switch_table(
    BugSwitch(
        "no-store-check",
        "the holder checks its own lease before writing; the store accepts any epoch",
        PAUSE_PAST_LEASE,
        ("stale-write",),
        ("store", "store-batch"),
    ),
    BugSwitch(
        "epoch-in-memory",
        "the lock service keeps its epoch counters in memory only: a restart starts at 1",
        Exposure(faults=("kill",), targets=("lock",)),
        ("grant-regression", "epoch-reuse"),
    ),
    BugSwitch(
        "token-before-lease",
        "the lock service draws a request's epoch when it arrives, before the lease is won: "
        "two waiting holders may win in the other order, the later lease with the lower epoch",
        # Holders paused past their lease let the lease expire with others waiting, who then
        # race for it; the fence keeps the superseded holder writing.
        PAUSE_PAST_LEASE,
        ("stale-holder-accepted", "current-holder-refused", "grant-regression"),
    ),
    BugSwitch(
        lock_server.TIMESTAMP_TOKEN,
        "the lock service makes each epoch its wall clock in milliseconds: a clock that steps "
        "back gives a later grant a lower epoch (only a clock fault shows it)",
        Exposure(faults=("clock-step",), targets=("lock",), ttl_multiples=(1.1, 3.0)),
        ("grant-regression",),
    ),
    BugSwitch(
        lock_server.WALL_CLOCK_EXPIRY,
        "the lock service measures leases and lock-delay on its wall clock, not the monotonic "
        "one (as Redis expires keys: redis/redis#416): a step forward or a fast wall clock ends "
        "live leases early; the audit sink relies on them (only a clock fault shows it)",
        # Holders that keep their lease many writes long are mid-lease when the lock's wall
        # clock moves; the lock-delay makes the audit sink one that relies on the lease.
        Exposure(
            faults=("clock-step", "clock-rate"),
            targets=("lock",),
            workload="sinks",
            ttl_multiples=(3.0,),
            lock_delay=0.2,
            writes_per_lease=50,
        ),
        ("stale-write",),
        ("audit",),
    ),
    BugSwitch(
        "grant-to-expired-waiter",
        "the lock service grants a waiter whose own session expired while it waited "
        "(etcd-io/etcd#11456): the holder's session had already been told its lease ended",
        # A worker paused while it waits, past its session's TTL: its keepalives stop, the
        # service ends its session, and grants it the lock anyway. Aimed at a waiter, not at any
        # worker: a pause of the holder (a third of the workers) shows nothing here. Three TTLs,
        # so the session surely ends before the waiter's turn comes (a 1.5 TTL pause lets it win
        # the next release first about half the time).
        Exposure(faults=("pause",), targets=("waiter",), ttl_multiples=(3.0,)),
        ("grant-after-expiry",),
    ),
    BugSwitch(
        "store-forgets",
        "the store keeps its highest-seen epochs in memory only (its log is durable)",
        Exposure(faults=("restart-while-paused",)),
        ("stale-write",),
        ("store",),
    ),
    BugSwitch(
        "lazy-mark",
        "the store saves its highest-seen epochs only every "
        f"{store_server.MARK_EVERY} writes (its log of entries is durable): a restart "
        "soon after a takeover forgets the new holder's epoch",
        # The defaults (harness.record.spec.TestSpec, nemeses.DEFAULT_NEMESES) catch it: a
        # test keeps the two in step, since this layer cannot import the harness's.
        Exposure(faults=("pause", "restart-while-paused")),
        ("stale-write",),
        ("store",),
    ),
    BugSwitch(
        store_server.MARK_NO_FSYNC,
        "the store appends accepted writes and its highest-seen epochs to its log without "
        "fsync: every kill keeps them (the page cache does), a power loss drops them",
        _POWER_LOSS_AT_TAKEOVER,
        ("lost-write", "stale-write"),
        ("store",),
    ),
    BugSwitch(
        store_server.ACK_BEFORE_FSYNC,
        "the store acknowledges a write before its record is fsynced (a flusher fsyncs the log "
        f"every {store_server.FLUSH_EVERY_S:g} s): a power loss drops the last writes it "
        "acknowledged",
        _POWER_LOSS_AT_TAKEOVER,
        ("lost-write", "stale-write"),
        ("store",),
    ),
    BugSwitch(
        lock_server.COUNTER_NO_FSYNC,
        "the lock service saves its epoch counters with write and rename but no fsync of the "
        "file or its directory: a kill keeps them, a power loss starts every lock at 1 again",
        _LOCK_POWER_LOSS,
        ("grant-regression", "epoch-reuse"),
    ),
    BugSwitch(
        store_server.EQUAL_EPOCH_ANY_HOLDER,
        "the store admits an epoch equal to its mark from any holder (>= on the epoch alone, "
        "where a holder other than the mark's needs a higher one): when a lock service hands "
        "one epoch to two holders, both holders' writes are accepted; shows only beside such a "
        f"lock service ({lock_server.COUNTER_NO_FSYNC}, which the run plants with it)",
        _LOCK_POWER_LOSS,
        ("epoch-reuse",),
        ("store",),
        beside=(lock_server.COUNTER_NO_FSYNC,),
    ),
    BugSwitch(
        "unfenced-path",
        "the bulk endpoint store-batch accepts any epoch, though the inventory says fenced",
        Exposure(faults=("pause",), workload="sinks", ttl_multiples=(3.0,)),
        ("stale-write",),
        ("store-batch",),
    ),
    BugSwitch(
        store_server.MARK_PER_KEY,
        "the store keeps its highest-seen epoch per key instead of per lock: a stale write "
        "to a key the new holder has not written yet is accepted",
        # Shows with more keys than a lease writes (the default spec's); a stale write lands on
        # a key of its own, so only the store's seq order across keys tells it stale.
        PAUSE_PAST_LEASE,
        ("stale-write",),
        ("store",),
    ),
    BugSwitch(
        store_server.FENCE_PER_CONNECTION,
        "the store checks a connection's first fenced write and trusts the connection after "
        "(a session authenticated once): a write held on the old holder's connection passes",
        # The hold keeps the holder's write (on its pooled connection) until the next holder's
        # first write is in; then it arrives on a connection the store already trusts.
        Exposure(faults=("hold",)),
        ("stale-write",),
        ("store",),
    ),
    BugSwitch(
        store_server.NON_IDEMPOTENT,
        "the store appends a write it already holds again (same id and epoch): a request the "
        "network delivers twice, or a client's retry, is applied twice (only replay shows it)",
        Exposure(faults=("replay",)),
        ("duplicate-write",),
        ("store",),
    ),
    BugSwitch(
        "long-ttl-no-fence",
        f"a lease TTL {_LONG_TTL_FACTOR:g}x the configured one instead of fencing: the "
        "store accepts any epoch",
        PAUSE_PAST_LEASE,
        ("stale-write",),
        ("store",),
    ),
    BugSwitch(
        "short-lock-delay",
        f"the lock service waits {_SHORT_DELAY_FACTOR:g}x the TTL after an expiry instead "
        "of the configured lock-delay; the audit sink relies on it",
        Exposure(faults=("pause",), workload="sinks", ttl_multiples=(3.0,), lock_delay=3.0),
        ("stale-write",),
        ("audit",),
    ),
)
"""The system's bug switches (the holder flaws are the harness's: :mod:`systems.holder_flaws`)."""

_STORE_BUGS: Final = {
    "no-store-check": store_server.NO_STORE_CHECK,
    "long-ttl-no-fence": store_server.NO_STORE_CHECK,
    "store-forgets": store_server.STORE_FORGETS,
    "lazy-mark": store_server.LAZY_MARK,
    "unfenced-path": store_server.UNFENCED_PATH,
    store_server.MARK_PER_KEY: store_server.MARK_PER_KEY,
    store_server.FENCE_PER_CONNECTION: store_server.FENCE_PER_CONNECTION,
    store_server.NON_IDEMPOTENT: store_server.NON_IDEMPOTENT,
    store_server.MARK_NO_FSYNC: store_server.MARK_NO_FSYNC,
    store_server.ACK_BEFORE_FSYNC: store_server.ACK_BEFORE_FSYNC,
    store_server.EQUAL_EPOCH_ANY_HOLDER: store_server.EQUAL_EPOCH_ANY_HOLDER,
}


@dataclass(frozen=True, slots=True)
class Ports:
    """The TCP port of each program (the same on every node of its role)."""

    lock: int = 7001
    store: int = 7002


@dataclass(eq=False)
class ReferenceSystem(PackagesBeside, SwitchTable):
    """fencecheck's own system under test (see :mod:`systems.reference`).

    ``ready_timeout`` bounds the wait for each program to answer after a start; ``client_timeout``
    is how long the holder client waits for the lock server or the store to answer before it
    reports the operation's outcome as unknown.
    """

    CONTRACT = 2  # the adapter contract this was written for (systems.base.CONTRACT)
    name = "reference"
    switches = BUG_SWITCHES

    ports: Ports = field(default_factory=Ports)
    install_dir: str = deploy.INSTALL_DIR
    data_dir: str = deploy.DATA_DIR
    ready_timeout: float = 20.0
    client_timeout: float = 10.0

    def describe(self) -> str:
        """What the system is."""
        return (
            "fencecheck's own lock server with durable epochs, a fenced store (store, "
            "store-batch) and an unfenced audit sink"
        )

    def roles(self) -> Mapping[str, RoleSpec]:
        """One lock node ``l1``, one store node ``s1``, workers ``w1..``."""
        return {"lock": RoleSpec(1, "l"), "store": RoleSpec(1, "s"), "worker": RoleSpec(1, "w")}

    def validate(self, config: SystemConfig) -> None:
        """Reject unknown switches, and ``short-lock-delay`` without a lock-delay to shorten."""
        super().validate(config)
        if "short-lock-delay" in config.bugs and config.lock_delay <= 0:
            raise ConfigError(
                "bug switch 'short-lock-delay' shortens the lock-delay, but lock_delay is 0: "
                "pass --lock-delay (lock_delay in a spec), e.g. 3 x the lease TTL"
            )

    def clock_roles(self) -> Mapping[str, str]:
        """Both servers run under libfaketime (stdlib Python, which it reaches); the lock
        server's faults move its wall clock only, the one an NTP step moves (it measures leases
        on the monotonic one, unless ``wall-clock-expiry``)."""
        return {"lock": "", "store": ""}

    def request_framing(self) -> Mapping[str, tuple[str, str]]:
        """Both servers speak newline-delimited JSON; a write's op begins with ``write``
        (``write`` and ``write-batch``)."""
        return {"lock": ("lines", '"op":"write'), "store": ("lines", '"op":"write')}

    def disk_dirs(self) -> Mapping[str, str]:
        """Each server keeps its data (epochs, the store's log) in its own data dir."""
        return {"lock": f"{self.data_dir}/lock", "store": f"{self.data_dir}/store"}

    def spanning_sinks(self) -> tuple[str, ...]:
        """Every sink: the store appends a write's items to their keys under one lock and fsync."""
        return (store_server.STORE, store_server.BATCH, store_server.AUDIT)

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """store and store-batch fenced; audit unfenced, protected by lock-delay if configured;
        all three report ``seq``."""
        # The store numbers every write it accepts, across keys and both endpoints: seq.
        return (
            Sink(
                "store",
                fenced=True,
                mitigation="none",
                description="append-only log per key; refuses an epoch below the highest "
                "accepted for its lock",
                seq=True,
            ),
            Sink(
                "store-batch",
                fenced=True,
                mitigation="none",
                description="bulk endpoint of the same store, checked against the same "
                "highest-seen epochs",
                seq=True,
            ),
            Sink(
                "audit",
                fenced=False,
                mitigation="lock-delay" if config.lock_delay > 0 else "none",
                description="recording sink (a payment API or printer): accepts every write, "
                "records arrival order and epoch",
                seq=True,
            ),
        )

    def lease_ttl(self, config: SystemConfig) -> float:
        """The TTL the holders actually use under ``config``."""
        factor = _LONG_TTL_FACTOR if "long-ttl-no-fence" in config.bugs else 1.0
        return config.lease_ttl * factor

    def _lock_delay(self, config: SystemConfig) -> float:
        if "short-lock-delay" in config.bugs:
            return min(config.lock_delay, _SHORT_DELAY_FACTOR * self.lease_ttl(config))
        return config.lock_delay

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Install and start the lock server and the store; name the holder client."""
        with setting_up(self, nodes, config):
            (lock_node,) = nodes_with_role(nodes, "lock")
            (store_node,) = nodes_with_role(nodes, "store")
            starters = {"lock": self._start_lock, "store": self._start_store}
            deploy.on_each([lock_node, store_node], lambda node: starters[node.role](node, config))
        return Deployment(
            # Named, not imported: the controller only ships it.
            client=HolderClientCode(
                "systems.reference.client",
                {
                    "lock": f"{lock_node.ip}:{self.ports.lock}",
                    "store": f"{store_node.ip}:{self.ports.store}",
                    "timeout": self.client_timeout,
                },
            ),
            targets=self.daemons.targets(nodes),
            lease_ttl=self.lease_ttl(config),
        )

    def _start_lock(self, node: Node, config: SystemConfig) -> Daemon:
        data = self.disk_dirs()["lock"]
        argv = self._server(lock_server, node, self.ports.lock, data, config)
        argv += ["--lock-delay", repr(self._lock_delay(config))]
        for bug in (
            lock_server.EPOCH_IN_MEMORY,
            lock_server.TOKEN_BEFORE_LEASE,
            lock_server.TIMESTAMP_TOKEN,
            lock_server.GRANT_TO_EXPIRED_WAITER,
            lock_server.WALL_CLOCK_EXPIRY,
            lock_server.COUNTER_NO_FSYNC,
        ):
            if bug in config.bugs:
                argv += ["--bug", bug]
        return self._launch(
            node, lock_server, data, _LOCK_DAEMON, argv, self.ports.lock, config, wall_only=True
        )

    def _start_store(self, node: Node, config: SystemConfig) -> Daemon:
        data = self.disk_dirs()["store"]
        argv = self._server(store_server, node, self.ports.store, data, config)
        for bug in sorted({_STORE_BUGS[b] for b in config.bugs if b in _STORE_BUGS}):
            argv += ["--bug", bug]
        return self._launch(node, store_server, data, _STORE_DAEMON, argv, self.ports.store, config)

    def _path(self, module: types.ModuleType) -> str:
        """Where ``module`` goes on a node: the install dir, under its own file name."""
        return f"{self.install_dir}/{module.__name__.rpartition('.')[2]}.py"

    def _server(
        self, module: types.ModuleType, node: Node, port: int, data: str, config: SystemConfig
    ) -> list[str]:
        address = ["--host", node.ip, "--port", str(port)]
        # The harness wrote the run's secret there before setup: only the run may write to us.
        secret = ["--secret-file", config.secret_file] if config.secret_file else []
        return ["python3", self._path(module), *address, "--data-dir", data, *secret]

    def _launch(
        self,
        node: Node,
        program: types.ModuleType,
        data: str,
        name: str,
        argv: list[str],
        port: int,
        config: SystemConfig,
        wall_only: bool = False,
    ) -> Daemon:
        files = {self._path(program): deploy.source_of(program)}
        deploy.install(node, {**files, **deploy.nodeside_files(self.install_dir)})
        deploy.data_dir(node, data, config.lazy_disks)
        # Both servers answer for their own clock (every wire server does).
        ready = self.daemons.entry(name).ready(node)
        ask = f"wire:{node.ip}:{port}"
        return deploy.start_clocked(node, name, argv, ready, ask, config.clocked, wall_only)

    @property
    def daemons(self) -> DaemonTable:
        """The lock server on the lock node and the store on the store node, each ready once
        it answers a ping on its port."""
        return DaemonTable(
            self.name,
            DaemonEntry(
                _LOCK_DAEMON, "lock", lambda _: deploy.Pings(self.ports.lock, self.ready_timeout)
            ),
            DaemonEntry(
                _STORE_DAEMON, "store", lambda _: deploy.Pings(self.ports.store, self.ready_timeout)
            ),
        )

    def _pings(self, port: int) -> deploy.Pings:
        return deploy.Pings(port, self.ready_timeout)

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL the lock server and the store (their data stays for collection)."""
        self.daemons.tear_down(nodes)

    def restart(self, node: Node, daemon: str) -> Daemon:
        """Start a killed server again; it recovers its state from its data dir."""
        return self.daemons.restart(node, daemon)

    def serves(self, node: Node, daemon: str) -> bool | None:
        """One ping of the server ``daemon`` (its readiness check); ``None`` for another."""
        return self.daemons.serves(node, daemon)

    def collect(self, nodes: Mapping[str, Node]) -> dict[str, dict[str, bytes]]:
        """The lock server's epoch file and the store's log of accepted writes."""
        wanted = {
            "lock": f"{self.data_dir}/lock/epochs.json",
            "store": f"{self.data_dir}/store/store.log",
        }
        found: dict[str, dict[str, bytes]] = {}
        for node in nodes.values():
            path = wanted.get(node.role)
            if path is None:
                continue
            try:
                found[node.name] = {path.rpartition("/")[2]: node.get_file(path)}
            except NodeError:
                continue  # epoch-in-memory keeps no file; a node may be gone
        return found
