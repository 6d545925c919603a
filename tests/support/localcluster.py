"""A reference system deployed as local processes on loopback, for the systems tests.

``LocalNode`` is a test double of :class:`harness.node.Node` that runs everything on this machine:
each node gets its own loopback address (127.x.y.z), so every agent can listen on the same port as
on a real cluster. ``python3`` runs as ``python3 -S`` (no site-packages), so a node-side program
that needs anything beyond the standard library fails here as it would on a bare node.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.node import CommandResult, Daemon, NodeError, NodeIdentity
from harness.nodeside import wire
from harness.run.agents import AGENT_DAEMON, AgentSet, deploy_system, stop_agents
from systems import HOLDER_FLAWS
from systems.base import Deployment, ProcessTarget, SystemConfig
from systems.reference import Ports, ReferenceSystem
from systems.reference.client import Client


class LocalNode(NodeIdentity):
    """A node whose commands and daemons are local processes (test double)."""

    def __init__(self, name: str, role: str, ip: str, log_dir: Path) -> None:
        super().__init__(name, role, ip)
        self._log_dir = log_dir
        self._daemons: dict[str, Daemon] = {}
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    @staticmethod
    def _local(argv: Sequence[str] | str) -> list[str]:
        if isinstance(argv, str):
            return ["sh", "-c", argv]
        if argv and argv[0] == "python3":
            return [sys.executable, "-S", *argv[1:]]
        return list(argv)

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        timeout: float | None = None,
        check: bool = False,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        started = time.monotonic()
        done = subprocess.run(
            self._local(argv),
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, **env} if env else None,
        )
        result = CommandResult(
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
            time.monotonic() - started,
        )
        if check and not result.ok:
            raise NodeError(f"{self.name}: {argv!r} exited {result.exit_code}: {result.stderr}")
        return result

    def start_daemon(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Daemon:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self._log_dir / f"{self.name}-{name}.log"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                self._local(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env} if env else None,
                cwd=cwd,
                start_new_session=True,
            )
        self._processes[process.pid] = process
        daemon = Daemon(name, self.name, process.pid, process.pid, tuple(argv), str(log_path))
        self._daemons[name] = daemon
        return daemon

    def daemon(self, name: str) -> Daemon:
        try:
            return self._daemons[name]
        except KeyError:
            raise NodeError(f"{self.name} has no daemon {name!r}") from None

    def daemons(self) -> Sequence[Daemon]:
        return list(self._daemons.values())

    def signal(self, daemon: Daemon, signum: int) -> None:
        try:
            os.kill(daemon.pid, signum)
        except ProcessLookupError:
            raise NodeError(f"{daemon.name} on {self.name} (pid {daemon.pid}) is gone") from None

    def process_state(self, daemon: Daemon) -> str | None:
        if self._processes[daemon.pid].poll() is not None:
            return None
        try:
            stat = Path(f"/proc/{daemon.pid}/stat").read_text()
        except OSError:
            return None
        return stat.rpartition(")")[2].split()[0]

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Nodes of this double share one filesystem: write beside and rename, so a program being
        # started from the same path by another "node" never reads half a file.
        partial = target.with_name(f".{target.name}.{self.name}.partial")
        partial.write_bytes(data)
        partial.chmod(mode)
        partial.replace(target)

    def get_file(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as problem:
            raise NodeError(f"{self.name}: cannot read {path}: {problem}") from None

    def logs(self) -> dict[str, bytes]:
        return {d.name: Path(d.log_path).read_bytes() for d in self._daemons.values()}

    def close(self) -> None:
        """Kill and reap every process this node started."""
        for process in self._processes.values():
            if process.poll() is None:
                process.kill()
            process.wait()


def wait_until(condition: Callable[[], bool], what: str, limit: float = 30.0) -> None:
    """Poll ``condition`` until true; fail the test (not flakily: the limit is generous) if not."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


def wait_dead(node: LocalNode, daemon: Daemon) -> None:
    """Wait until ``daemon`` has exited."""
    wait_until(lambda: node.process_state(daemon) is None, f"{daemon.name} on {node.name} to exit")


@dataclass
class LocalCluster:
    """A reference system on local nodes with the harness's agents, with helpers to drive and
    break it."""

    system: ReferenceSystem
    nodes: dict[str, LocalNode]
    deployment: Deployment
    agents: AgentSet

    def agent(self, name: str, request: dict[str, Any], timeout: float = 60.0) -> dict[str, Any]:
        """One request to the agent on worker ``name``."""
        endpoint = self.agents.endpoints[name]
        return wire.call((endpoint.host, endpoint.port), request, timeout, self.agents.token)

    def client(self, owner: str = "test") -> Client:
        """A reference client talking straight to the lock server and store (with the run's
        secret, as the agents' clients have it)."""
        config = self.deployment.client.config
        return Client({**config, "node": owner, "timeout": 30.0, "token": self.agents.token})

    def lock_status(self, lock: str) -> dict[str, Any]:
        """The lock server's view of ``lock``."""
        address = wire.parse_address(str(self.deployment.client.config["lock"]))
        return wire.call(address, {"op": "status", "lock": lock}, 30.0, self.agents.token)

    def target(self, node: str) -> ProcessTarget:
        """The process target on ``node`` (a worker's is the harness's agent)."""
        found = [t for t in self.deployment.targets if t.node == node]
        return found[0] if found else ProcessTarget("worker", node, AGENT_DAEMON)

    def signal(self, node: str, signum: int) -> None:
        """Send ``signum`` to the system's process on ``node``."""
        local = self.nodes[node]
        local.signal(local.daemon(self.target(node).daemon), signum)

    def kill_and_restart(self, node: str) -> None:
        """SIGKILL the process on ``node``, then restart it as the kill nemesis would: through the
        adapter (or the agent set, for an agent)."""
        local = self.nodes[node]
        daemon = local.daemon(self.target(node).daemon)
        local.signal(daemon, signal.SIGKILL)
        wait_dead(local, daemon)
        if local.role == "worker":
            self.agents.restart(local)
        else:
            self.system.restart(local, daemon.name)


def log_lines(cluster: LocalCluster, node: str) -> list[str]:
    """The log of the system's process on ``node``."""
    local = cluster.nodes[node]
    return Path(local.daemon(cluster.target(node).daemon).log_path).read_text().splitlines()


def entries(reply: dict[str, Any]) -> list[tuple[str, int]]:
    """A read reply's entries as (id, epoch) pairs."""
    assert reply["ok"], reply
    return [(e["id"], e["epoch"]) for e in reply["entries"]]


def free_ports(count: int) -> list[int]:
    """``count`` TCP ports free on this machine right now."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


MakeCluster = Callable[..., LocalCluster]


def local_nodes(root: Path, index: int, workers: int) -> dict[str, LocalNode]:
    """``l1``, ``s1`` and ``w1..wN`` on loopback addresses of their own (``index`` keeps apart
    several clusters of one test)."""
    base = f"127.{os.getpid() % 250 + 1}.{index + 1}"
    roles = [("l1", "lock"), ("s1", "store")]
    roles += [(f"w{i}", "worker") for i in range(1, 1 + workers)]
    return {
        name: LocalNode(name, role, f"{base}.{10 + n}", root / f"logs{index}")
        for n, (name, role) in enumerate(roles)
    }


def local_system(root: Path, index: int, ports: Ports, client_timeout: float) -> ReferenceSystem:
    """A reference system installing into ``root`` instead of /opt and /var/lib."""
    return ReferenceSystem(
        ports=ports,
        install_dir=str(root / f"opt{index}"),
        data_dir=str(root / f"data{index}"),
        client_timeout=client_timeout,
    )


def build_cluster(
    root: Path,
    index: int,
    workers: int = 1,
    lease_ttl: float = 0.5,
    lock_delay: float = 0.0,
    bugs: Sequence[str] = (),
    client_timeout: float = 10.0,
) -> LocalCluster:
    """Set the reference system up on fresh local nodes under ``root``."""
    nodes = local_nodes(root, index, workers)
    lock_port, store_port, agent_port = free_ports(3)
    system = local_system(root, index, Ports(lock_port, store_port), client_timeout)
    flaws = [bug for bug in bugs if bug in HOLDER_FLAWS]
    config = SystemConfig(
        lease_ttl=lease_ttl,
        lock_delay=lock_delay,
        bugs=frozenset(bug for bug in bugs if bug not in HOLDER_FLAWS),
    )
    try:
        deployment, agents = deploy_system(
            system,
            nodes,
            config,
            flaws,
            secret_file=str(root / f"secret{index}"),
            port=agent_port,
            install_dir=system.install_dir,
        )
        return LocalCluster(system, nodes, deployment, agents)
    except BaseException:
        for node in nodes.values():
            node.close()
        raise


def stop_cluster(cluster: LocalCluster) -> None:
    """Tear the system down and reap every process, whatever state a test left it in."""
    for name in cluster.nodes:
        # A test may leave a process stopped; SIGCONT so it dies and is reaped at once.
        with contextlib.suppress(NodeError):
            cluster.signal(name, signal.SIGCONT)
    stop_agents(cluster.nodes)
    cluster.system.teardown(cluster.nodes)
    for node in cluster.nodes.values():
        node.close()
