"""Kill and restart: SIGKILL a daemon, later start it again exactly as it was started.

Tests that epochs and highest-seen marks survive restarts (docs/design.md §7). Before the kill the
daemon's command line, environment and working directory are captured, so the restart runs the same
program on the same data (the restart model). The restart goes through a :data:`Restarter`: in a
run, the system's own restart (which waits until the daemon serves) where it has one. Confirmed
from outside: the process is gone (or a zombie), then the new one runs, and a store or lock
daemon's restart is done once it serves again (``served_by``): by the system's readiness check
where it has one, else once the ports its node listened on at setup accept connections. A paused
holder that a restart resumes (``restart-while-paused``) must meet the daemon serving, not down.
"""

from __future__ import annotations

import functools
import signal
import socket
from collections.abc import Callable, Mapping
from typing import Any

from harness.node import Daemon, Node, NodeError
from nemeses._base import ProcessNemesis
from nemeses._fanout import on_each
from nemeses._observe import CONFIRM_TIMEOUT_S, observe
from nemeses.kinds import RESUMES_BASE, FaultKind, Leftovers
from nemeses.pause import draw_process, process_command
from nemeses.processes import (
    ChecksServing,
    Locator,
    ProcessImage,
    Restarter,
    is_gone,
    recorded_daemons,
    restart,
    snapshot,
)
from nemeses.protocol import Fault, FaultKey, HealReport, NemesisError, fault_fs

__all__ = ["KIND", "KillNemesis"]


_SERVICE_ROLES = ("store", "lock")
_SERVES_TIMEOUT_S = 20.0


class KillNemesis(ProcessNemesis[tuple[str, ProcessImage]]):
    """Kills the target nodes' daemons (``params["process"]`` names one; absent means all) at
    ``start-kill`` and restarts them at ``stop-kill`` with ``restarter``."""

    def __init__(
        self,
        locate: Locator = recorded_daemons,
        confirm_timeout: float = CONFIRM_TIMEOUT_S,
        restarter: Restarter = restart,
        images: dict[tuple[str, str], ProcessImage] | None = None,
    ) -> None:
        super().__init__(locate, confirm_timeout)
        self._restarter = restarter
        # By node and daemon name; may be shared by kill nemeses that restart the same daemons.
        self._images = {} if images is None else images
        self._ports: dict[str, set[int]] = {}  # by store or lock node: a system's ports stay

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Remember the nodes, and read the images of the store and lock daemons now: a kill
        aimed at a moment (right after a takeover, inside a holder's pause) must be a signal
        away, not behind the commands that read a daemon's command line on a busy node."""
        super().setup(nodes)
        for node in nodes.values():
            if node.role not in _SERVICE_ROLES:
                continue
            try:
                self.capture(node)
                self._ports[node.name] = _listening_ports(node)
            except (NodeError, NemesisError):
                continue  # only a head start: the kill reads them again and says why not

    def capture(self, node: Node) -> None:
        """Read the images of every daemon of ``node`` now, ahead of any fault."""
        for daemon in self.daemons_of(node, Fault("kill", (node.name,), {})):
            self._image(node, daemon)

    def _image(self, node: Node, daemon: Daemon) -> ProcessImage:
        key = (node.name, daemon.name)
        if key not in self._images:
            self._images[key] = snapshot(node, daemon)
        return self._images[key]

    @property
    def fs(self) -> frozenset[str]:
        """``start-kill`` and ``stop-kill`` (the restart)."""
        return fault_fs("kill")

    def killed(self) -> dict[str, list[ProcessImage]]:
        """The daemons killed and not yet restarted, by node: what a later heal must start."""
        with self.lock:
            pairs = [pair for pairs in self.held.values() for pair in pairs]
        by_node: dict[str, list[ProcessImage]] = {}
        for node, image in pairs:
            by_node.setdefault(node, []).append(image)
        return by_node

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Kill (start-kill) or restart (stop-kill) the targets' daemons, confirmed by state."""
        starting = self.starts(f)
        if starting:
            killed = self.on_targets(fault, lambda node: self._kill(fault, node))
            return {"pids": {name: pids for name, pids in killed}}
        with self.lock:
            images = self.held.pop(fault.key, [])
        if not images:
            raise NemesisError(
                f"stop-kill {fault.describe()}: this controller killed nothing there to restart"
            )
        pids: dict[str, list[int]] = {}
        served: dict[str, str] = {}
        # A restart that resumes a paused holder (``resumes_base``) relaunches the command line
        # and polls the readiness check tightly itself: the system's own restart waits at its
        # own pace, and the next holder's retry reached the store first in 2 of 5 replays.
        prompt = bool(fault.params.get(RESUMES_BASE))
        report = self._restart_all(fault.key, images, pids, served, prompt=prompt)
        if not report.ok:
            raise NemesisError("; ".join(report.errors))
        return {"pids": pids, "served_by": served} if served else {"pids": pids}

    def _kill(self, fault: Fault, node: Node) -> tuple[str, list[int]]:
        daemons = self.daemons_of(node, fault)
        images = [self._image(node, daemon) for daemon in daemons]
        with self.lock:
            self.held.setdefault(fault.key, []).extend((node.name, i) for i in images)
        for daemon in daemons:
            self._kill_one(node, daemon)
        return node.name, [daemon.pid for daemon in daemons]

    def _kill_one(self, node: Node, daemon: Daemon) -> None:
        try:
            node.signal(daemon, signal.SIGKILL)
        except NodeError:
            # Already dead is as good as killed; anything else is a real failure.
            if not is_gone(node.process_state(daemon)):
                raise
        observe(
            lambda: is_gone(node.process_state(daemon)),
            f"{node.name}: {daemon.name} (pid {daemon.pid}) gone",
            self._timeout,
        )

    def _restart_all(
        self,
        key: FaultKey,
        images: list[tuple[str, ProcessImage]],
        pids: dict[str, list[int]],
        served: dict[str, str] | None = None,
        *,
        prompt: bool = False,
    ) -> HealReport:
        """Restart ``images`` (node name, image), noting new pids by node in ``pids`` and, for
        a store or lock node, how it was seen serving again in ``served``; ``prompt``: by the
        plain relaunch, the readiness check polled here. The nodes restart at once, each its
        daemons in order: a member of a replicated service that lost power with the others
        serves only once a quorum of them is back (ZooKeeper's restart waits for its quorum)."""
        by_node: dict[str, list[ProcessImage]] = {}
        for name, image in images:
            by_node.setdefault(name, []).append(image)

        def on_node(name: str) -> HealReport:
            return self._restart_node(key, name, by_node[name], pids, served, prompt)

        parts, failures = on_each(list(by_node), on_node)
        report = HealReport()
        for part in parts:
            report.merge(part)
        report.errors += [f"{name}: restart failed: {problem}" for name, problem in failures]
        return report

    def _restart_node(
        self,
        key: FaultKey,
        name: str,
        images: list[ProcessImage],
        pids: dict[str, list[int]],
        served: dict[str, str] | None,
        prompt: bool,
    ) -> HealReport:
        """Restart ``images`` on node ``name`` in order (see :meth:`_restart_all`)."""
        report = HealReport()
        node = self.node(name)
        for image in images:
            # Asked once, before the restart: whether the daemon has a readiness check to poll.
            serves = self._readiness(node, image.name)
            try:
                plain = (prompt and serves is not None) or self._restarter is restart
                daemon = (restart if plain else self._restarter)(node, image)
            except NemesisError as problem:
                report.errors.append(str(problem))
                with self.lock:
                    # Kept so that a later heal tries again.
                    self.held.setdefault(key, []).append((name, image))
                continue
            with self.lock:
                pids.setdefault(name, []).append(daemon.pid)
            report.healed.append(f"restarted {name}:{image.name} as pid {daemon.pid}")
            try:
                how = self._await_serving(node, image.name, plain, serves)
            except NemesisError as problem:
                report.errors.append(str(problem))
                continue
            if how is not None and served is not None:
                with self.lock:
                    served[name] = how
        return report

    def _readiness(self, node: Node, daemon: str) -> Callable[[Node, str], bool | None] | None:
        """The system's readiness check of ``daemon`` on a store or lock ``node``, or ``None``
        where it has none (one probe tells)."""
        if node.role not in _SERVICE_ROLES or not isinstance(self._restarter, ChecksServing):
            return None
        serves = self._restarter.serves
        return serves if serves(node, daemon) is not None else None

    def _await_serving(
        self,
        node: Node,
        daemon: str,
        plain: bool,
        serves: Callable[[Node, str], bool | None] | None,
    ) -> str | None:
        """Wait until the restarted ``daemon`` of a store or lock ``node`` serves: by its
        readiness check ``serves`` where it has one; after a ``plain`` relaunch without one,
        until its node's ports accept connections (the system's own restart waits by itself: a
        node's ports may include one only a leader opens, as ZooKeeper's 2888); how it was seen
        (``None`` when nothing was checked here)."""
        if serves is not None:
            observe(
                lambda: serves(node, daemon) is True,
                f"{daemon} on {node.name} serving again (its readiness check)",
                _SERVES_TIMEOUT_S,
            )
            return "readiness check"
        ports = self._ports.get(node.name)
        if not plain or not ports:
            return None
        for port in sorted(ports):
            observe(
                functools.partial(_accepts, node.ip, port),
                f"{node.ip}:{port} accepting connections again",
                _SERVES_TIMEOUT_S,
            )
        return "listening port"

    def heal(self) -> HealReport:
        """Restart every daemon this nemesis killed and has not restarted yet."""
        with self.lock:
            pending = list(self.held.items())
            self.held.clear()
        report = HealReport()
        for key, images in pending:
            report.merge(self._restart_all(key, images, {}))
        return report


def _recover(node: Node, leftovers: Leftovers) -> list[str]:
    restarted, failed = [], []
    for image in leftovers.killed:
        try:
            restart(node, image)
        except (NodeError, NemesisError) as problem:
            failed.append(f"{image.name}: {problem}")
        else:
            restarted.append(image.name)
    if failed:
        raise NemesisError("cannot restart " + "; ".join(failed))
    return restarted


KIND = FaultKind(
    name="kill",
    summary="SIGKILL a daemon, then start it again as it was (same argv, env and data)",
    verb="killed",
    colour="#555b66",
    heal_rank=5,
    restarts=True,
    kills="targets",
    build=lambda locate, restarter: KillNemesis(locate, restarter=restarter),
    draw=draw_process,
    recover=_recover,
    manual=process_command(
        "kill",
        "SIGKILL the daemons on NODES; start them again as they were after --for (or at heal).",
    ),
)
"""The kill fault kind's registry entry."""


def _listening_ports(node: Node) -> set[int]:
    """The TCP ports ``node`` listens on (other than loopback-only ones)."""
    result = node.run(["ss", "-Hltn"], timeout=5.0, check=True)
    ports = set()
    for line in result.stdout.splitlines():
        fields = line.split()
        host, _, port = (fields[3] if len(fields) > 3 else "").rpartition(":")
        if port.isdigit() and not host.startswith(("127.", "[::1]")):
            ports.add(int(port))
    return ports


def _accepts(host: str, port: int) -> bool:
    """One tight try: the paused holder must be continued before another holder's write could
    teach the restarted store its mark again."""
    try:
        socket.create_connection((host, port), timeout=0.2).close()
    except OSError:
        return False
    return True
