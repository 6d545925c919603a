"""Restart while paused: the shape that exposes a sink or lock service that forgets on restart.

A holder is paused past its lease; while it sleeps, another holder takes over and writes with a
higher epoch; then the store (or the lock service) is killed and started again, and the paused
holder is continued the moment the restarted process serves again. A store that kept its
highest-seen epoch refuses the old holder's write; one that forgot it (``store-forgets``) accepts
it after the newer write: a stale write. Two plain faults in sequence cannot make this shape,
because the new holder's next write would re-teach a forgetful store the mark before the old
holder wakes.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any, Final

from harness.node import Node
from nemeses._observe import observe
from nemeses.kill import KillNemesis
from nemeses.kinds import Draw, FaultKind
from nemeses.pause import PauseNemesis
from nemeses.processes import Locator, recorded_daemons
from nemeses.protocol import Fault, HealReport, NemesisError, fault_fs

__all__ = ["KIND", "RESTART_WHILE_PAUSED", "RestartWhilePausedNemesis"]

RESTART_WHILE_PAUSED: Final = "restart-while-paused"
"""The fault kind: ``params`` has ``process`` (paused), ``restart`` (a node name) and
``restart_process`` (the daemon killed and restarted there)."""

_LISTEN_TIMEOUT_S: Final = 20.0


class RestartWhilePausedNemesis:
    """Pauses the targets at start; at stop kills and restarts ``params["restart"]``'s daemon,
    waits until it listens again, then continues the targets."""

    def __init__(self, locate: Locator = recorded_daemons) -> None:
        self._pause = PauseNemesis(locate)
        self._kill = KillNemesis(locate)
        self._nodes: dict[str, Node] = {}

    @property
    def fs(self) -> frozenset[str]:
        """``start-restart-while-paused`` and ``stop-restart-while-paused``."""
        return fault_fs(RESTART_WHILE_PAUSED)

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Set both halves up on ``nodes``."""
        self._nodes = dict(nodes)
        self._pause.setup(nodes)
        self._kill.setup(nodes)

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Start: pause the targets. Stop: restart the other process, then continue them."""
        if f not in self.fs:
            raise NemesisError(f"{RESTART_WHILE_PAUSED} does not perform {f!r}")
        paused = Fault("pause", fault.targets, {"process": fault.params.get("process")})
        if f.startswith("start-"):
            return self._pause.invoke("start-pause", paused)
        restarted_node = str(fault.params.get("restart", ""))
        node = self._nodes.get(restarted_node)
        if node is None:
            raise NemesisError(f"{RESTART_WHILE_PAUSED}: no node {restarted_node!r} to restart")
        victim = Fault("kill", (restarted_node,), {"process": fault.params.get("restart_process")})
        try:
            ports = _listening_ports(node)
            killed = self._kill.invoke("start-kill", victim)
            restarted = self._kill.invoke("stop-kill", victim)
            for port in ports:
                _await_port(node.ip, port)
        finally:
            # Whatever happened to the restart, the paused holder must run again.
            self._pause.invoke("stop-pause", paused)
        return {"killed_pids": killed["pids"], "restarted_pids": restarted["pids"]}

    def heal(self) -> HealReport:
        """Restart what was killed, then continue what was paused."""
        return self._kill.heal().merge(self._pause.heal())

    def teardown(self) -> None:
        """Heal; raise :class:`NemesisError` if anything stayed broken."""
        report = self.heal()
        if not report.ok:
            raise NemesisError("healing failed: " + "; ".join(report.errors))


def _listening_ports(node: Node) -> set[int]:
    """The TCP ports the node listens on (other than loopback-only ones)."""
    result = node.run(["ss", "-Hltn"], timeout=5.0, check=True)
    ports = set()
    for line in result.stdout.splitlines():
        local = line.split()[3] if len(line.split()) > 3 else ""
        host, _, port = local.rpartition(":")
        if port.isdigit() and not host.startswith(("127.", "[::1]")):
            ports.add(int(port))
    return ports


def _await_port(host: str, port: int) -> None:
    """Wait until ``host:port`` accepts a connection, polling tightly: the paused holder must be
    continued before any other holder's write can teach the restarted store its mark again."""

    def answers() -> bool:
        try:
            socket.create_connection((host, port), timeout=0.2).close()
        except OSError:
            return False
        return True

    observe(answers, f"{host}:{port} accepting connections again", _LISTEN_TIMEOUT_S)


def _draw(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The holder (or target) paused; a store by preference, else a lock node, restarted."""
    restart_role, candidates = next(
        (
            (role, others)
            for role in ("store", "lock")
            if (others := [name for name in draw.of_role(role) if name != draw.target])
        ),
        ("", []),
    )
    if not candidates:
        raise NemesisError(
            f"{RESTART_WHILE_PAUSED} needs a store or lock node besides {draw.target!r}"
        )
    compound: dict[str, Any] = {"restart": draw.rng.choice(candidates)}
    for key, of_role in (("process", draw.role), ("restart_process", restart_role)):
        if draw.processes.get(of_role) is not None:
            compound[key] = draw.processes[of_role]
    return (draw.target,), compound


KIND = FaultKind(
    name=RESTART_WHILE_PAUSED,
    summary="pause the holder past its lease, kill and restart the store meanwhile, continue "
    "the holder once the store listens",
    verb="paused while a store was restarted",
    colour="#7a4fd6",
    heal_rank=0,
    # Its relaunch stays the plain one: the paused holder must run again the instant the store
    # listens, before a system's readiness wait lets others re-teach the mark.
    build=lambda locate, restarter: RestartWhilePausedNemesis(locate),
    draw=_draw,
    outlives_lease=True,
    parts=("pause", "kill"),
)
"""The restart-while-paused fault kind's registry entry (a compound: no manual command; its
parts are the pause and kill commands)."""
