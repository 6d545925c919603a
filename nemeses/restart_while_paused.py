"""Restart while paused: the shape that exposes a sink or lock service that forgets on restart.

A holder is paused past its lease; while it sleeps, another holder takes over and writes with a
higher epoch; and the store (or the lock service) is killed and started again while the first
holder is still paused. Where the restart lands inside the pause is drawn per window
(``restart_at``), so that a schedule overlaps the two faults in the shapes restart bugs need:

- ``resume``: at the pause's end; the holder is continued the moment the restarted process serves
  again. A store that kept its highest-seen epoch refuses the old holder's write; one that forgot
  it (``store-forgets``) accepts it after the newer write: a stale write. Two plain faults in
  sequence cannot make this shape, because the new holder's next write would re-teach a
  forgetful store the mark before the old holder wakes.
- ``takeover``: right after another holder took the lease, once it had 1-3 writes accepted, then
  the holder is continued as the process serves again: a store that saved its mark only every few
  writes (``lazy-mark``) has lost the new one. A run's first window of this kind is always one.
- ``inside``: at a random moment inside the pause (10-90 % of it); the holder is continued at the
  pause's scheduled end. A lock service restarting then, with its counter in memory, grants the
  next holder an old epoch.

The moments are window parameters (:data:`nemeses.schedule.STEP_AT_NS`,
:data:`nemeses.schedule.END_AFTER_WRITES`), so a replay plays them again.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any, Final

from harness.node import Node, NodeError
from nemeses._observe import observe
from nemeses.kill import KillNemesis
from nemeses.kinds import END_AFTER_WRITES, STEP_AT_NS, Draw, FaultKind
from nemeses.pause import PauseNemesis
from nemeses.processes import (
    ChecksServing,
    Locator,
    ProcessImage,
    Restarter,
    recorded_daemons,
    restart,
)
from nemeses.protocol import Fault, FaultKey, HealReport, NemesisError, fault_fs, step_f

__all__ = ["KIND", "RESTART_AT", "RESTART_WHILE_PAUSED", "RestartWhilePausedNemesis"]

RESTART_WHILE_PAUSED: Final = "restart-while-paused"
"""The fault kind: ``params`` has ``process`` (paused), ``restart`` (a node name),
``restart_process`` (the daemon killed and restarted there) and ``restart_at``."""

RESTART_AT: Final[tuple[str, ...]] = ("resume", "takeover", "inside")
"""Where a window's restart lands (see the module documentation)."""
_RESTART_AT_WEIGHTS: Final = (1, 3, 1)
_FIRST_RESTART_AT: Final = "takeover"
# "takeover" is drawn most, and always for a run's first window of the kind: it is the only shape
# that finds a mark saved every few writes, and a lazily saved mark is the restart bug real stores
# have.
_INSIDE: Final = (0.1, 0.9)
"""An inside restart lands within this share of the pause."""
_AFTER_TAKEOVER_WRITES: Final = (1, 3)
"""A takeover restart lands once the new holder had this many writes accepted since its grant:
never before the first (it has written nothing a restart could lose), before many more (a store
that saves its mark every N writes has saved it with a chance of only writes/N)."""
_LISTEN_TIMEOUT_S: Final = 20.0
_RESTARTED_ROLES: Final = ("store", "lock")


class RestartWhilePausedNemesis:
    """Pauses the targets at start; at its step (or at stop, when no step came first) kills and
    restarts ``params["restart"]``'s daemon and waits until it listens again; at stop continues
    the targets."""

    def __init__(
        self,
        locate: Locator = recorded_daemons,
        restarter: Restarter = restart,
        kind: str = RESTART_WHILE_PAUSED,
    ) -> None:
        self._kind = kind  # power-loss plays the same shape with a power loss for the restart
        self._pause = PauseNemesis(locate)
        images: dict[tuple[str, str], ProcessImage] = {}
        self._kill = KillNemesis(locate, images=images)
        # An inside restart leaves the holder paused, so it may wait for the system's readiness
        # (``restarter``, which knows how the system's daemons start): nobody races it.
        self._kill_ready = KillNemesis(locate, restarter=restarter, images=images)
        # The system's own readiness check, where the run has one: a daemon that listens may
        # still refuse to serve (a database in crash recovery), and the holder must meet it
        # serving.
        self._serves = restarter.serves if isinstance(restarter, ChecksServing) else None
        self._nodes: dict[str, Node] = {}
        self._restarted: set[FaultKey] = set()
        self._ports: dict[str, set[int]] = {}  # by node: a system's ports do not move

    @property
    def fs(self) -> frozenset[str]:
        """``start-``, ``step-`` and ``stop-restart-while-paused`` (or of the kind it plays)."""
        return fault_fs(self._kind) | {step_f(self._kind)}

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Set both halves up on ``nodes``, and read what a restart of a store or lock node
        needs (its ports, its daemons' images) now: a window aimed inside a holder's write must
        pause it within a millisecond, not after the commands that read them on a busy node."""
        self._nodes = dict(nodes)
        self._pause.setup(nodes)
        self._kill.setup(nodes)
        self._kill_ready.setup(nodes)
        for node in nodes.values():
            if node.role in _RESTARTED_ROLES:
                try:
                    self._ports_of(node)
                    self._kill.capture(node)
                except (NodeError, NemesisError):
                    # Only a head start: a window's start reads them again and reports why not.
                    continue

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Start: pause the targets. Step: restart the other process. Stop: restart it unless the
        step did, then continue the targets."""
        if f not in self.fs:
            raise NemesisError(f"{self._kind} does not perform {f!r}")
        paused = Fault("pause", fault.targets, {"process": fault.params.get("process")})
        if f.startswith("start-"):
            self._restarted.discard(fault.key)
            # Everything the restart needs to know is read first (slow on a busy node): then the
            # restart is a signal away, and the pause begins when it is recorded to.
            node, victim = self._victim(fault)
            self._ports_of(node)
            self._killer(fault).prepare(victim)
            return self._pause.invoke("start-pause", paused)
        if f.startswith("step-"):
            return self._restart(fault)
        try:
            facts = {} if fault.key in self._restarted else self._restart(fault)
        finally:
            # Whatever happened to the restart, the paused holder must run again.
            self._restarted.discard(fault.key)
            self._pause.invoke("stop-pause", paused)
        return facts

    def _ports_of(self, node: Node) -> set[int]:
        if node.name not in self._ports:
            self._ports[node.name] = _listening_ports(node)
        return self._ports[node.name]

    def _killer(self, fault: Fault) -> KillNemesis:
        return self._kill_ready if fault.params.get("restart_at") == "inside" else self._kill

    def _victim(self, fault: Fault) -> tuple[Node, Fault]:
        """The node restarted, and the kill fault that restarts it."""
        restarted_node = str(fault.params.get("restart", ""))
        node = self._nodes.get(restarted_node)
        if node is None:
            raise NemesisError(f"{self._kind}: no node {restarted_node!r} to restart")
        return node, Fault(
            "kill", (restarted_node,), {"process": fault.params.get("restart_process")}
        )

    def _restart(self, fault: Fault) -> dict[str, Any]:
        """Kill ``params["restart"]``'s daemon, start it again and wait until it serves by the
        system's readiness check (until it listens, for a system without one)."""
        node, victim = self._victim(fault)
        ports = self._ports_of(node)
        facts = self.restart_node(node, self._killer(fault), victim)
        self._restarted.add(fault.key)
        daemon = victim.params.get("process")
        serves = self._serves
        if serves is not None and isinstance(daemon, str) and serves(node, daemon) is not None:
            observe(
                lambda: serves(node, daemon) is True,
                f"{daemon} on {node.name} serving again (its readiness check)",
                _LISTEN_TIMEOUT_S,
            )
            return {**facts, "served_by": "readiness check"}
        for port in ports:
            _await_port(node.ip, port)
        return {**facts, "served_by": "listening port"}

    def restart_node(self, node: Node, kill: KillNemesis, victim: Fault) -> dict[str, Any]:
        """Kill ``victim``'s daemons on ``node`` and start them again; the facts to record."""
        killed = kill.invoke("start-kill", victim)
        restarted = kill.invoke("stop-kill", victim)
        return {"killed_pids": killed["pids"], "restarted_pids": restarted["pids"]}

    def heal(self) -> HealReport:
        """Restart what was killed, then continue what was paused."""
        return self._kill.heal().merge(self._kill_ready.heal()).merge(self._pause.heal())

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
    """The holder (or target) paused; where the restart lands (``restart_at``); the node
    restarted: for an inside restart a store or a lock node, else a store by preference."""
    rng = draw.rng
    restart_at = (
        _FIRST_RESTART_AT
        if draw.earlier == 0
        else rng.choices(RESTART_AT, weights=_RESTART_AT_WEIGHTS)[0]
    )
    roles = {
        role: others
        for role in _RESTARTED_ROLES
        if (others := [name for name in draw.of_role(role) if name != draw.target])
    }
    if not roles:
        raise NemesisError(
            f"{RESTART_WHILE_PAUSED} needs a store or lock node besides {draw.target!r}"
        )
    restart_role = rng.choice(sorted(roles)) if restart_at == "inside" else next(iter(roles))
    compound: dict[str, Any] = {
        "restart": rng.choice(roles[restart_role]),
        "restart_at": restart_at,
    }
    if restart_at == "inside":
        compound[STEP_AT_NS] = round(draw.duration_ns * rng.uniform(*_INSIDE))
    elif restart_at == "takeover":
        compound[END_AFTER_WRITES] = rng.randint(*_AFTER_TAKEOVER_WRITES)
    for key, of_role in (("process", draw.role), ("restart_process", restart_role)):
        if draw.processes.get(of_role) is not None:
            compound[key] = draw.processes[of_role]
    return (draw.target,), compound


KIND = FaultKind(
    name=RESTART_WHILE_PAUSED,
    summary="pause the holder past its lease and kill and restart the store or lock service "
    "meanwhile: inside the pause, right after the takeover, or as the holder resumes",
    verb="paused while a store was restarted",
    colour="#7a4fd6",
    heal_rank=0,
    # Its relaunch stays the plain one but inside the pause: the paused holder must run again the
    # instant the store listens, before a system's readiness wait lets others re-teach the mark.
    build=RestartWhilePausedNemesis,
    draw=_draw,
    outlives_lease=True,
    parts=("pause", "kill"),
    restarts=True,
    touched=lambda params: (str(params["restart"]),) if "restart" in params else (),
    stops_holder=True,
    kills="service",
    restarted=lambda targets, params: (str(params["restart"]),) if "restart" in params else (),
)
"""The restart-while-paused fault kind's registry entry (a compound: no manual command; its
parts are the pause and kill commands)."""
