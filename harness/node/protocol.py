"""The node interface: what nemeses and system adapters may do to a host.

A node is a container (the Docker backend, :mod:`harness.node.docker`) or, with another backend, a
real host. Everything above the cluster
backend talks to nodes only through these protocols, so backends stay swappable. Core abilities are
in :class:`Node`; abilities only some backends have are separate one- or two-method protocols
(:class:`Freezable`, :class:`Throttleable`), checked with ``isinstance`` when a nemesis loads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "CommandResult",
    "Daemon",
    "Freezable",
    "NetnsRunner",
    "Node",
    "NodeError",
    "NodeIdentity",
    "Throttleable",
]


class NodeError(RuntimeError):
    """A node operation failed; the message names the node and what to check."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """The outcome of :meth:`Node.run`."""

    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        """True when the command exited 0."""
        return self.exit_code == 0


@dataclass(frozen=True, slots=True)
class Daemon:
    """A long-running process started by :meth:`Node.start_daemon`.

    ``pid`` is the process id as the node sees it (inside the container's pid namespace).
    ``host_pid`` is the same process as the controller's host sees it, when the backend can
    signal it directly (Docker engine on this host, controller running as root), else ``None``.
    """

    name: str
    node: str
    pid: int
    host_pid: int | None
    argv: tuple[str, ...]
    log_path: str


class NodeIdentity:
    """The name, role and address every node implementation carries, for reuse by them."""

    def __init__(self, name: str, role: str, ip: str) -> None:
        self._name = name
        self._role = role
        self._ip = ip

    @property
    def name(self) -> str:
        """Stable hostname, e.g. ``w1``; other nodes resolve it."""
        return self._name

    @property
    def role(self) -> str:
        """``lock``, ``store`` or ``worker``."""
        return self._role

    @property
    def ip(self) -> str:
        """The node's address on the run's private network."""
        return self._ip


class Node(Protocol):
    """One host of the cluster, with a stable name (``l1``, ``s1``, ``w1``…) and a role."""

    @property
    def name(self) -> str:
        """Stable hostname, e.g. ``w1``; other nodes resolve it."""
        ...

    @property
    def role(self) -> str:
        """``lock``, ``store`` or ``worker``."""
        ...

    @property
    def ip(self) -> str:
        """The node's address on the run's private network."""
        ...

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        timeout: float | None = None,
        check: bool = False,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run a command to completion (a string goes through ``sh -c``).

        With ``check=True`` a non-zero exit raises :class:`NodeError` showing the output.
        """
        ...

    def start_daemon(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Daemon:
        """Start ``argv`` in the background, its output to ``/var/log/fencecheck/<name>.log``.

        ``name`` is unique on the node; starting a name again replaces the record (used for
        restarts). Returns once the process exists.
        """
        ...

    def daemon(self, name: str) -> Daemon:
        """The daemon last started under ``name`` (raises :class:`NodeError` if none)."""
        ...

    def daemons(self) -> Sequence[Daemon]:
        """Every daemon started on this node, latest record per name."""
        ...

    def signal(self, daemon: Daemon, signum: int) -> None:
        """Send ``signum`` to the daemon's process by the fastest correct path."""
        ...

    def process_state(self, daemon: Daemon) -> str | None:
        """The one-letter state from ``/proc/PID/stat`` (``R``, ``S``, ``T``…), ``None`` if gone."""
        ...

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` on the node, creating parent directories."""
        ...

    def get_file(self, path: str) -> bytes:
        """Read a file from the node."""
        ...

    def logs(self) -> dict[str, bytes]:
        """Every log this node has: the container's output and each daemon's log, by name."""
        ...


@runtime_checkable
class Freezable(Protocol):
    """A node whose whole process tree can be frozen (cgroup freezer)."""

    def freeze(self) -> None:
        """Freeze every process of the node; returns once frozen."""
        ...

    def thaw(self) -> None:
        """Undo :meth:`freeze`."""
        ...


@runtime_checkable
class Throttleable(Protocol):
    """A node whose CPU share can be capped (cgroup CPU quota)."""

    def set_cpu_quota(self, quota_us: int | None, period_us: int = 10_000) -> None:
        """Cap the node to ``quota_us`` of CPU per ``period_us``; ``None`` removes the cap."""
        ...


@runtime_checkable
class NetnsRunner(Protocol):
    """A node whose network namespace the controller can enter directly (``nsenter -n``).

    Faster than :meth:`Node.run` for iptables, which needs nothing from the node's filesystem.
    """

    def run_in_netns(self, argv: Sequence[str], *, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` from the controller's host inside the node's network namespace."""
        ...
