"""Kill and restart: SIGKILL a daemon, later start it again exactly as it was started.

Tests that epochs and highest-seen marks survive restarts (docs/design.md §7). Before the kill the
daemon's command line, environment and working directory are captured, so the restart runs the same
program on the same data (the restart model). The restart goes through a :data:`Restarter`: in a
run, the system's own restart (which waits until the daemon serves) where it has one. Confirmed
from outside: the process is gone (or a zombie), then the new one runs.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any

from harness.node import Daemon, Node, NodeError
from nemeses._base import ProcessNemesis
from nemeses._observe import CONFIRM_TIMEOUT_S, observe
from nemeses.kinds import FaultKind, Leftovers
from nemeses.pause import draw_process, process_command
from nemeses.processes import (
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
        report = self._restart_all(fault.key, images, pids)
        if not report.ok:
            raise NemesisError("; ".join(report.errors))
        return {"pids": pids}

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
        self, key: FaultKey, images: list[tuple[str, ProcessImage]], pids: dict[str, list[int]]
    ) -> HealReport:
        """Restart ``images`` (node name, image), noting new pids by node in ``pids``."""
        report = HealReport()
        for name, image in images:
            try:
                daemon = self._restarter(self.node(name), image)
            except NemesisError as problem:
                report.errors.append(str(problem))
                with self.lock:
                    # Kept so that a later heal tries again.
                    self.held.setdefault(key, []).append((name, image))
                continue
            pids.setdefault(name, []).append(daemon.pid)
            report.healed.append(f"restarted {name}:{image.name} as pid {daemon.pid}")
        return report

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
