"""The reference system's adapter: our lock server, fenced store and audit sink, with bug switches.

Layout on the nodes: programs under ``/opt/fencecheck``, data under ``/var/lib/fencecheck``; the
lock server listens on 7001 on the lock node, the store (all three sinks) on 7002 on the store
node, an agent on 7000 on each worker. Each listens on its node's address on the run's network,
and agents reach the lock server and store by those addresses.
"""

from __future__ import annotations

import secrets
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from harness.node import Daemon, Node, NodeError
from systems import deploy
from systems.base import (
    AdapterError,
    BugSwitch,
    ConfigError,
    Deployment,
    Endpoint,
    ProcessTarget,
    Sink,
    SystemConfig,
    check_bugs,
    check_roles,
    nodes_with_role,
)
from systems.reference import client, lock_server, store_server

__all__ = ["BUG_SWITCHES", "Ports", "ReferenceSystem"]

_LOCK_DAEMON: Final = "lock-server"
_STORE_DAEMON: Final = "store"
_LONG_TTL_FACTOR: Final = 5.0
_SHORT_DELAY_FACTOR: Final = 0.1

BUG_SWITCHES: Final[Mapping[str, BugSwitch]] = types.MappingProxyType(
    {
        switch.name: switch
        for switch in (
            BugSwitch(
                "no-store-check",
                "the holder checks its own lease before writing; the store accepts any epoch",
                "--nemesis pause (also freeze, throttle): the holder frozen past its lease TTL",
                "stale-write on store and store-batch",
            ),
            BugSwitch(
                "epoch-in-memory",
                "the lock service keeps its epoch counters in memory only: a restart starts at 1",
                "--nemesis kill --target lock: the lock server killed and restarted",
                "grant-regression, epoch-reuse",
            ),
            BugSwitch(
                "store-forgets",
                "the store keeps its highest-seen epochs in memory only (its log is durable)",
                "--nemesis restart-while-paused: the store restarted while a stale holder sleeps",
                "stale-write on store",
            ),
            BugSwitch(
                "retry-on-reject",
                "a holder re-sends a write refused as stale with the same epoch (the runner "
                "re-sends; the agent keeps the lease and skips its lease check for the retry)",
                "--nemesis pause: any refusal after the holder outlived its lease",
                "retry-after-reject",
            ),
            BugSwitch(
                "reacquire-no-reread",
                "after re-acquiring, the read-modify-write workload writes again from its old "
                "read (the runner's rmw workload; nothing changes on the nodes)",
                "--workload rmw --nemesis pause: the holder loses and re-acquires its lease",
                "lost-update",
            ),
            BugSwitch(
                "unfenced-path",
                "the bulk endpoint store-batch accepts any epoch, though the inventory says fenced",
                "--workload sinks --nemesis pause: a stale unit reaches store-batch",
                "stale-write on store-batch",
            ),
            BugSwitch(
                "long-ttl-no-fence",
                f"a lease TTL {_LONG_TTL_FACTOR:g}x the configured one instead of fencing: the "
                "store accepts any epoch",
                f"--nemesis pause: pauses drawn from the {_LONG_TTL_FACTOR:g}x TTL outlive it",
                "stale-write on store",
            ),
            BugSwitch(
                "short-lock-delay",
                f"the lock service waits {_SHORT_DELAY_FACTOR:g}x the TTL after an expiry instead "
                "of the configured lock-delay; the audit sink relies on it",
                "--workload sinks --lock-delay 3 --nemesis pause: a stale unit reaches audit",
                "stale-write on audit (mitigation lock-delay)",
            ),
        )
    }
)

_STORE_BUGS: Final = {
    "no-store-check": store_server.NO_STORE_CHECK,
    "long-ttl-no-fence": store_server.NO_STORE_CHECK,
    "store-forgets": store_server.STORE_FORGETS,
    "unfenced-path": store_server.UNFENCED_PATH,
}


@dataclass(frozen=True, slots=True)
class Ports:
    """The TCP port of each program (the same on every node of its role)."""

    lock: int = 7001
    store: int = 7002
    agent: int = 7000


class ReferenceSystem:
    """fencecheck's own system under test (see :mod:`systems.reference`).

    ``ready_timeout`` bounds the wait for each program to answer after a start; ``client_timeout``
    is how long an agent waits for the lock server or the store to answer before it reports the
    operation's outcome as unknown.
    """

    name: Final = "reference"

    def __init__(
        self,
        ports: Ports | None = None,
        install_dir: str = deploy.INSTALL_DIR,
        data_dir: str = deploy.DATA_DIR,
        ready_timeout: float = 20.0,
        client_timeout: float = 10.0,
    ) -> None:
        self.ports = ports or Ports()
        self.install_dir = install_dir
        self.data_dir = data_dir
        self.ready_timeout = ready_timeout
        self.client_timeout = client_timeout

    def roles(self) -> Mapping[str, int]:
        """One lock node, one store node, at least one worker."""
        return {"lock": 1, "store": 1, "worker": 1}

    def bug_switches(self) -> Mapping[str, BugSwitch]:
        """The eight mistakes of DESIGN.md §1 (see :data:`BUG_SWITCHES`)."""
        return BUG_SWITCHES

    def validate(self, config: SystemConfig) -> None:
        """Reject unknown switches, and ``short-lock-delay`` without a lock-delay to shorten."""
        check_bugs(self.name, list(BUG_SWITCHES), config)
        if "short-lock-delay" in config.bugs and config.lock_delay <= 0:
            raise ConfigError(
                "bug switch 'short-lock-delay' shortens the lock-delay, but lock_delay is 0: "
                "pass --lock-delay (lock_delay in a spec), e.g. 3 x the lease TTL"
            )

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """store and store-batch fenced; audit unfenced, protected by lock-delay if configured."""
        return (
            Sink(
                "store",
                fenced=True,
                mitigation="none",
                description="append-only log per key; refuses an epoch below the highest "
                "accepted for its lock",
            ),
            Sink(
                "store-batch",
                fenced=True,
                mitigation="none",
                description="bulk endpoint of the same store, checked against the same "
                "highest-seen epochs",
            ),
            Sink(
                "audit",
                fenced=False,
                mitigation="lock-delay" if config.lock_delay > 0 else "none",
                description="recording sink (a payment API or printer): accepts every write, "
                "records arrival order and epoch",
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
        """Install and start the lock server, the store and one agent per worker."""
        self.validate(config)
        check_roles(self.name, self.roles(), nodes)
        (lock_node,) = nodes_with_role(nodes, "lock")
        (store_node,) = nodes_with_role(nodes, "store")
        workers = nodes_with_role(nodes, "worker")
        lock_at = Endpoint(lock_node.ip, self.ports.lock)
        store_at = Endpoint(store_node.ip, self.ports.store)
        ttl = self.lease_ttl(config)
        delay = self._lock_delay(config)
        # One secret per run: nothing outside it (another user's process) can write into it.
        token = secrets.token_hex(32)

        def start_lock(node: Node) -> Daemon:
            data = f"{self.data_dir}/lock"
            argv = [*self._server(lock_server, lock_at, data), "--lock-delay", repr(delay)]
            if "epoch-in-memory" in config.bugs:
                argv += ["--bug", lock_server.EPOCH_IN_MEMORY]
            files = self._program(lock_server)
            return self._launch(node, files, data, _LOCK_DAEMON, argv, lock_at, token)

        def start_store(node: Node) -> Daemon:
            data = f"{self.data_dir}/store"
            argv = self._server(store_server, store_at, data)
            for bug in sorted({_STORE_BUGS[b] for b in config.bugs if b in _STORE_BUGS}):
                argv += ["--bug", bug]
            files = self._program(store_server)
            return self._launch(node, files, data, _STORE_DAEMON, argv, store_at, token)

        def start_agent(node: Node) -> Daemon:
            listen = Endpoint(node.ip, self.ports.agent)
            files = {**self._program(client), **deploy.agent_files(self.install_dir)}
            argv = deploy.agent_argv(
                self.install_dir,
                listen,
                node.name,
                self._path(client),
                ttl,
                "retry-on-reject" in config.bugs,
                {"lock": str(lock_at), "store": str(store_at), "timeout": self.client_timeout},
            )
            return self._launch(node, files, None, deploy.AGENT_DAEMON, argv, listen, token)

        starters = {"lock": start_lock, "store": start_store, "worker": start_agent}
        every = [lock_node, store_node, *workers]
        try:
            deploy.on_each(every, lambda node: starters[node.role](node))
        except AdapterError as problem:
            self.teardown(nodes)
            raise AdapterError(f"setting up system {self.name!r} failed:\n{problem}") from None
        return Deployment(
            system=self.name,
            config=config,
            lease_ttl=ttl,
            agents={node.name: Endpoint(node.ip, self.ports.agent, token) for node in workers},
            targets=(
                ProcessTarget("lock", lock_node.name, _LOCK_DAEMON, self.ports.lock),
                ProcessTarget("store", store_node.name, _STORE_DAEMON, self.ports.store),
                *(
                    ProcessTarget("worker", node.name, deploy.AGENT_DAEMON, self.ports.agent)
                    for node in workers
                ),
            ),
            inventory=self.inventory(config),
        )

    def _path(self, module: types.ModuleType) -> str:
        """Where ``module`` goes on a node: the install dir, under its own file name."""
        return f"{self.install_dir}/{module.__name__.rpartition('.')[2]}.py"

    def _program(self, module: types.ModuleType) -> dict[str, bytes]:
        return {self._path(module): deploy.source_of(module)}

    def _server(self, module: types.ModuleType, listen: Endpoint, data: str) -> list[str]:
        address = ["--host", listen.host, "--port", str(listen.port)]
        return ["python3", self._path(module), *address, "--data-dir", data]

    def _launch(
        self,
        node: Node,
        files: Mapping[str, bytes],
        data: str | None,
        name: str,
        argv: list[str],
        listen: Endpoint,
        token: str,
    ) -> Daemon:
        deploy.install(node, {**files, **deploy.wire_files(self.install_dir)})
        # A file readable by root only, so the secret never shows in a command line (ps).
        secret_file = f"{self.install_dir}/run-secret"
        node.put_file(secret_file, token.encode(), mode=0o600)
        argv = [*argv, "--secret-file", secret_file]
        if data is not None:
            deploy.fresh_dir(node, data)
        return deploy.start_and_wait(node, name, argv, listen, self.ready_timeout)

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL the lock server, the store and the agents (their data stays for collection)."""
        names = (_LOCK_DAEMON, _STORE_DAEMON, deploy.AGENT_DAEMON)
        problems = []
        for node in nodes.values():
            try:
                deploy.kill_daemons(node, names)
            except NodeError as problem:
                problems.append(f"{node.name}: {problem}")
        if problems:
            raise AdapterError("tearing down the reference system failed:\n" + "\n".join(problems))

    def restart(self, node: Node, target: ProcessTarget) -> Daemon:
        """Start a killed target again; the servers recover their state from the data dir."""
        return deploy.restart_target(
            node, target, Endpoint(node.ip, target.port), self.ready_timeout
        )

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
