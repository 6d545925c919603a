"""Pause: SIGSTOP a process, later SIGCONT it. The process notices nothing (docs/design.md §7).

Confirmed from outside: the process state in ``/proc/PID/stat`` is ``T`` (stopped), then not.
"""

from __future__ import annotations

import signal
from typing import Any, Final

from harness.node import Daemon, Node, NodeError
from nemeses._base import ProcessNemesis
from nemeses._observe import observe
from nemeses.kinds import Draw, FaultKind, Leftovers, ManualCommand, ManualOption
from nemeses.processes import continue_stopped, is_gone
from nemeses.protocol import Fault, FaultKey, HealReport, NemesisError, fault_fs

__all__ = ["KIND", "PauseNemesis", "draw_process", "process_command", "process_params"]

_STOPPED: Final = "T"
_RETRY: Final[FaultKey] = ("", (), "continue failed")


class PauseNemesis(ProcessNemesis[tuple[Node, Daemon]]):
    """Stops the target nodes' daemons at ``start-pause``, continues them at ``stop-pause``."""

    @property
    def fs(self) -> frozenset[str]:
        """``start-pause`` and ``stop-pause``."""
        return fault_fs("pause")

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Stop (start-pause) or continue (stop-pause) the targets' daemons, confirmed by state."""
        starting = self.starts(f)
        if starting:
            stopped = self.on_targets(fault, lambda node: self._stop(fault, node))
            return {"pids": {name: pids for name, pids in stopped}}
        with self.lock:
            paused = self.held.pop(fault.key, None)
        if paused is None:
            # A stop without a start in this process (a manual heal): find the daemons again.
            paused = []
            for name in fault.targets:
                node = self.node(name)
                paused.extend((node, d) for d in self.daemons_of(node, fault))
        report = self._continue_all(paused)
        if not report.ok:
            raise NemesisError("; ".join(report.errors))
        return {}

    def _stop(self, fault: Fault, node: Node) -> tuple[str, list[int]]:
        daemons = self.daemons_of(node, fault)
        with self.lock:
            self.held.setdefault(fault.key, []).extend((node, d) for d in daemons)
        for daemon in daemons:
            node.signal(daemon, signal.SIGSTOP)
        for daemon in daemons:
            self._await_state(node, daemon, stopped=True)
        return node.name, [daemon.pid for daemon in daemons]

    def _await_state(self, node: Node, daemon: Daemon, *, stopped: bool) -> None:
        observe(
            lambda: (node.process_state(daemon) == _STOPPED) == stopped,
            f"{node.name}: {daemon.name} (pid {daemon.pid}) {'stopped' if stopped else 'running'}",
            self._timeout,
        )

    def _continue(self, node: Node, daemon: Daemon) -> bool:
        """SIGCONT one daemon; False when it had already gone (nothing left to continue)."""
        if is_gone(node.process_state(daemon)):
            return False
        try:
            node.signal(daemon, signal.SIGCONT)
        except NodeError:
            if is_gone(node.process_state(daemon)):
                return False
            raise
        self._await_state(node, daemon, stopped=False)
        return True

    def _continue_all(self, paused: list[tuple[Node, Daemon]]) -> HealReport:
        report = HealReport()
        for node, daemon in paused:
            try:
                continued = self._continue(node, daemon)
            except (NodeError, NemesisError) as problem:
                report.errors.append(f"{node.name}: cannot continue {daemon.name}: {problem}")
                with self.lock:
                    # Kept so that a later heal tries again.
                    self.held.setdefault(_RETRY, []).append((node, daemon))
                continue
            gone = "" if continued else " (it had exited)"
            report.healed.append(f"continued {node.name}:{daemon.name} pid {daemon.pid}{gone}")
        return report

    def heal(self) -> HealReport:
        """Continue every daemon still stopped by this nemesis."""
        with self.lock:
            paused = [pair for pairs in self.held.values() for pair in pairs]
            self.held.clear()
        return self._continue_all(paused)


_PROCESS_OPTION = ManualOption(
    "process", "Daemon name, or a command-line pattern as for pgrep -f (default: every daemon)."
)


def process_command(kind: str, help: str) -> ManualCommand:
    """The manual command of a process fault: node names and ``--process``."""
    return ManualCommand(
        help=help,
        fault=lambda nodes, values, roles: Fault(
            kind, nodes, process_params(values.get("process"))
        ),
        options=(_PROCESS_OPTION,),
    )


def process_params(process: str | None) -> dict[str, Any]:
    """A process fault's parameters: the daemon aimed at, when one is named."""
    return {} if process is None else {"process": process}


def draw_process(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A process fault aims at its role's daemon (every daemon when the role names none)."""
    return (draw.target,), process_params(draw.processes.get(draw.role))


def _recover(node: Node, leftovers: Leftovers) -> list[int]:
    return continue_stopped(node)


KIND = FaultKind(
    name="pause",
    summary="SIGSTOP a process, SIGCONT it later; confirmed by its /proc state",
    verb="paused",
    colour="#5b8def",
    heal_rank=4,
    stops_holder=True,
    build=lambda locate, restarter: PauseNemesis(locate),
    draw=draw_process,
    recover=_recover,
    manual=process_command(
        "pause",
        "SIGSTOP the daemons on NODES (names, or comma-separated); SIGCONT them after --for.",
    ),
)
"""The pause fault kind's registry entry."""
