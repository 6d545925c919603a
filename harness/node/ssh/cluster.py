"""The hosts of a hosts file, connected for one run: opened together, healed and cleaned up on exit.

Unlike containers, real hosts outlive the run, so the run must leave them as it found them:
on the way out (also on Ctrl-C, SIGTERM or an exception) every host is thawed, uncapped and its
stopped daemons continued (:meth:`SshNode` faults that a nemesis did not undo), then, unless
``keep``, every daemon the harness started is killed and every file it wrote is removed. The same
clean-up also runs on the way in, for whatever a crashed controller left behind.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Final, TypeVar

from harness.node import NodeError
from harness.node.interrupts import interrupts_deferred
from harness.node.ssh.connection import SshConnection
from harness.node.ssh.hosts import HostsFile, HostSpec
from harness.node.ssh.node import DAEMON_LOG_DIR, PID_DIR, SshNode
from harness.node.ssh.packages import missing_packages

__all__ = ["SshCluster", "clean_node", "connect", "heal_node", "on_hosts"]

T = TypeVar("T")
R = TypeVar("R")

# Each pid file holds "pid start-time": act only on a process that still has that start time.
_EACH_DAEMON: Final = (
    f'for f in {PID_DIR}/*.pid; do [ -f "$f" ] || continue; read pid ticks <"$f"; '
    "s=$(cat /proc/$pid/stat 2>/dev/null) || continue; s=${s##*) }; set -- $s; "
    '[ "${20}" = "$ticks" ] || continue; '
)


def on_hosts(items: Sequence[T], action: Callable[[T], R]) -> list[R | NodeError]:
    """``action`` on every item in parallel; each result or the :class:`NodeError` it raised."""

    def attempt(item: T) -> R | NodeError:
        try:
            return action(item)
        except NodeError as problem:
            return problem

    if not items:
        return []
    with ThreadPoolExecutor(len(items), thread_name_prefix="ssh-hosts") as pool:
        return list(pool.map(attempt, items))


def connect(hosts: HostsFile, spec: HostSpec) -> SshNode:
    """Log in to one host of ``hosts`` and probe it."""
    connection = SshConnection(spec, hosts)
    try:
        return SshNode(connection)
    except NodeError:
        connection.close()
        raise


def heal_node(node: SshNode) -> list[str]:
    """Undo the faults the backend can see on ``node``: thaw, uncap, continue stopped daemons.

    Returns what was done. Partition rules are the partition nemesis's to remove
    (:func:`nemeses.partition.remove_rules`).
    """
    # Creating our cgroups is idempotent and lets a first heal thaw and uncap unconditionally.
    node.run(node.cgroups.prepare_script(), check=True)
    done = []
    if node.cgroups.freezer is not None:
        node.thaw()
        done.append("thawed")
    if node.cgroups.cpu is not None:
        node.set_cpu_quota(None, 100_000)
        done.append("CPU cap removed")
    out = node.run(f"{_EACH_DAEMON}kill -CONT $pid && echo $pid; done", check=True)
    continued = out.stdout.split()
    if continued:
        done.append(f"continued pids {', '.join(continued)}")
    return done


def clean_node(node: SshNode) -> list[str]:
    """Kill every daemon the harness started on ``node`` and remove what it wrote there:
    uploaded files, daemon logs, pid files and our cgroups. Returns what was done."""
    killed = node.run(f"{_EACH_DAEMON}kill -KILL $pid && echo $pid; done", check=True)
    written = " ".join(shlex.quote(path) for path in node.written())
    node.run(f"rm -rf {DAEMON_LOG_DIR} {PID_DIR} {written}", check=True)
    # A killed process leaves its cgroup a moment later; the clean-up waits briefly for that.
    node.run(f"for i in 1 2 3 4 5; do ({node.cgroups.cleanup_script()}); sleep 0.1; done")
    pids = killed.stdout.split()
    return [f"killed pids {', '.join(pids)}"] if pids else []


class SshCluster:
    """The nodes of a hosts file for one run; use as a context manager."""

    def __init__(self, hosts: HostsFile, *, keep: bool = False) -> None:
        """Describe the cluster; nothing connects before ``__enter__``.

        ``keep`` leaves the daemons and files on the hosts at exit (faults are healed anyway).
        """
        self.hosts = hosts
        """The loaded hosts file."""
        self.keep = keep
        """Whether ``__exit__`` leaves daemons and files in place."""
        self.nodes: dict[str, SshNode] = {}
        """The connected nodes by name, in file order (empty until ``__enter__``)."""

    def __enter__(self) -> SshCluster:
        results = on_hosts(list(self.hosts.hosts), lambda spec: connect(self.hosts, spec))
        nodes = [r for r in results if isinstance(r, SshNode)]
        problems = [str(r) for r in results if isinstance(r, NodeError)]
        if not problems:
            self.nodes = {node.name: node for node in nodes}
            prepared = on_hosts(nodes, _prepare)
            problems = [str(r) for r in prepared if isinstance(r, NodeError)]
        if problems:
            for node in nodes:
                node.close()
            self.nodes = {}
            raise NodeError("cannot use the hosts:\n" + "\n".join(problems))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with interrupts_deferred():
            nodes = list(self.nodes.values())
            on_hosts(nodes, heal_node)
            if not self.keep:
                on_hosts(nodes, clean_node)
            for node in nodes:
                node.close()
            self.nodes = {}


def _prepare(node: SshNode) -> None:
    """Check the host has what the harness runs, clear what an earlier controller left, then
    create our cgroups afresh."""
    missing = missing_packages(node)
    if missing:
        raise NodeError(
            f"{node.name}: missing {', '.join(missing)}; install them with "
            "`fencecheck hosts install FILE` (apt-get) or the host's package manager"
        )
    heal_node(node)
    clean_node(node)
    node.run(node.cgroups.prepare_script(), check=True)
