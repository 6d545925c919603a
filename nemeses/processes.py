"""Finding, describing and restarting the processes that pause and kill faults aim at.

Inside a run the controller knows its daemons (:meth:`Node.daemons`); a later ``fencecheck
nemesis`` command does not, so it finds them by looking at the node's processes: a daemon started
by :meth:`Node.start_daemon` has its output in ``/var/log/fencecheck/<name>.log``, which names it.
The looking is done by a short stdlib Python script run on the node (the node image has python3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

from harness.node import Daemon, Node, NodeError
from harness.nodeside import procscan
from nemeses._observe import observe
from nemeses.protocol import NemesisError

__all__ = [
    "DAEMON_LOG_DIR",
    "ChecksServing",
    "Locator",
    "ProcessImage",
    "Restarter",
    "continue_stopped",
    "is_gone",
    "lost_daemons",
    "recorded_daemons",
    "restart",
    "run_script",
    "running_daemons",
    "snapshot",
]

DAEMON_LOG_DIR: Final = "/var/log/fencecheck/"
"""Where :meth:`Node.start_daemon` sends a daemon's output (``<dir><name>.log``)."""

Locator = Callable[[Node, str | None], list[Daemon]]
"""Finds the daemons a fault aims at on a node: all of them (``None``) or those named."""

_GONE_STATES: Final = frozenset({None, "Z", "X"})
_SCAN_TIMEOUT_S: Final = 20.0

# Sent whole, so that nodes need no file of ours (a manual command may meet a bare node).
_SCAN: Final = Path(procscan.__file__).read_text()


@dataclass(frozen=True, slots=True)
class ProcessImage:
    """Enough of a process to start it again as it was: name, command, environment, directory."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = "/"

    def to_json(self) -> dict[str, Any]:
        """The image as JSON data."""
        return {"name": self.name, "argv": list(self.argv), "env": dict(self.env), "cwd": self.cwd}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessImage:
        """Rebuild an image from :meth:`to_json` output."""
        return cls(str(data["name"]), tuple(data["argv"]), dict(data["env"]), str(data["cwd"]))


Restarter = Callable[[Node, "ProcessImage"], Daemon]
"""Starts a killed daemon again from its image and returns once it runs (or serves): the plain
:func:`restart` by default; a run passes one that goes through the system's own restart."""


@runtime_checkable
class ChecksServing(Protocol):
    """A :data:`Restarter` that can also tell, by the system's readiness check, whether a
    daemon serves again (the run's, for a system that has such a check)."""

    def __call__(self, node: Node, image: ProcessImage) -> Daemon:
        """Start the killed daemon of ``image`` again."""
        ...

    def serves(self, node: Node, daemon: str) -> bool | None:
        """True once ``daemon`` on ``node`` serves, False while not, ``None``: no check."""
        ...


def is_gone(state: str | None) -> bool:
    """True for the process state of a process that no longer runs (absent, zombie, dead)."""
    return state in _GONE_STATES


def lost_daemons(node: Node) -> list[str]:
    """The daemons that ran on ``node`` (they left a log in :data:`DAEMON_LOG_DIR`) and run no
    more: what a node whose container stopped and was started again has lost."""
    try:
        listed = node.run(["ls", DAEMON_LOG_DIR], timeout=_SCAN_TIMEOUT_S)
    except NodeError as problem:
        raise NemesisError(f"{node.name}: cannot list its daemons' logs: {problem}") from None
    logged = {name.removesuffix(".log") for name in listed.stdout.split() if name.endswith(".log")}
    running = {entry["name"] for entry in _scan(node, "daemons", "")}
    return sorted(logged - running)


def recorded_daemons(node: Node, process: str | None) -> list[Daemon]:
    """The daemons this controller started on ``node``: the one named ``process``, or all."""
    if process is not None:
        try:
            return [node.daemon(process)]
        except NodeError as problem:
            raise NemesisError(str(problem)) from None
    found = list(node.daemons())
    if not found:
        raise NemesisError(
            f"{node.name}: no daemons were started on this node; name the process to aim at"
        )
    return found


def running_daemons(node: Node, process: str | None) -> list[Daemon]:
    """The daemons found running on ``node`` by looking at its processes.

    ``process`` is a daemon name (its log is ``/var/log/fencecheck/<name>.log``); when no daemon
    has that name it is tried as a regular expression on command lines, like ``pgrep -f``. ``None``
    means every daemon. A daemon's children that share its log are left out: the fault aims at
    the process that was started. Raises :class:`NemesisError` when nothing matches.
    """
    found = _scan(node, "daemons", process or "")
    if not found and process is not None:
        found = _scan(node, "pattern", process)
    if not found:
        wanted = f"no process named or matching {process!r}" if process else "no daemon"
        raise NemesisError(
            f"{node.name}: found {wanted}; list the node's processes with "
            f"`docker exec <container> ps -ef` and pass --process NAME or a command-line pattern"
        )
    pids = {entry["pid"] for entry in found}
    return [
        Daemon(
            name=entry["name"] or _name_from(entry["argv"], process),
            node=node.name,
            pid=entry["pid"],
            host_pid=None,
            argv=tuple(entry["argv"]),
            log_path=f"{DAEMON_LOG_DIR}{entry['name']}.log" if entry["name"] else "",
        )
        for entry in found
        if not (entry["name"] and entry["ppid"] in pids)
    ]


def snapshot(node: Node, daemon: Daemon) -> ProcessImage:
    """Capture how ``daemon`` was started (its argv, environment, working directory)."""
    found = _scan(node, "pid", str(daemon.pid))
    if not found:
        raise NemesisError(f"{node.name}: daemon {daemon.name!r} (pid {daemon.pid}) is not running")
    entry = found[0]
    argv = daemon.argv or tuple(entry["argv"])
    return ProcessImage(daemon.name, argv, entry["env"], entry["cwd"])


def restart(node: Node, image: ProcessImage) -> Daemon:
    """Start ``image`` again under its name and return once the new process runs."""
    try:
        daemon = node.start_daemon(image.name, image.argv, env=image.env, cwd=image.cwd)
    except NodeError as problem:
        raise NemesisError(f"{node.name}: cannot restart {image.name!r}: {problem}") from None
    observe(
        lambda: not is_gone(node.process_state(daemon)),
        f"{node.name}: restarted {image.name!r} running",
    )
    return daemon


def continue_stopped(node: Node) -> list[int]:
    """Send SIGCONT to every stopped process of ``node``; returns their pids."""
    return [entry["pid"] for entry in _scan(node, "continue", "")]


def _scan(node: Node, mode: str, arg: str) -> list[dict[str, Any]]:
    if mode == "pattern":
        try:
            re.compile(arg)
        except re.error as problem:
            raise NemesisError(
                f"process pattern {arg!r} is not a regular expression: {problem}"
            ) from None
    found: list[dict[str, Any]] = run_script(
        node, _SCAN, [mode, arg, DAEMON_LOG_DIR], "list processes", _SCAN_TIMEOUT_S
    )
    return found


def run_script(node: Node, source: str, args: list[str], what: str, timeout: float) -> Any:
    """Run the stdlib Python ``source`` on ``node`` (sent whole: nodes need no file of ours) with
    ``args``; its JSON output, or :class:`NemesisError` saying it could not ``what``."""
    try:
        result = node.run(["python3", "-c", source, *args], timeout=timeout)
    except NodeError as problem:
        raise NemesisError(f"{node.name}: cannot {what}: {problem}") from None
    if not result.ok:
        raise NemesisError(
            f"{node.name}: cannot {what} (exit {result.exit_code}): "
            f"{result.stderr.strip()[-500:]}; the node needs python3"
        )
    return json.loads(result.stdout)


def _name_from(argv: list[str], process: str | None) -> str:
    """A daemon name for a process that was not started as a daemon: its program's file name."""
    program = argv[0].rsplit("/", 1)[-1] if argv else ""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", program).lstrip(".") or (process or "process")
