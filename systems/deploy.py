"""Putting node-side programs on nodes, starting them, and waiting until they answer.

Shared by adapters; uses only the :class:`harness.node.Node` protocol. Node-side programs are
stdlib-only Python files under :data:`INSTALL_DIR`, with :mod:`harness.nodeside.wire` copied beside
them as ``harness/wire.py`` (the only module they import that is not in the standard library);
their data lives under :data:`DATA_DIR`.
"""

from __future__ import annotations

import json
import shlex
import signal
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, Final, TypeVar

from harness import nodeside
from harness.node import Daemon, Node, NodeError
from harness.nodeside import agent, wire
from systems.base import AdapterError, Endpoint, ProcessTarget

__all__ = [
    "AGENT_DAEMON",
    "DATA_DIR",
    "INSTALL_DIR",
    "agent_argv",
    "agent_files",
    "fresh_dir",
    "install",
    "kill_daemons",
    "on_each",
    "restart_target",
    "source_of",
    "start_and_wait",
    "wire_files",
]

INSTALL_DIR: Final = "/opt/fencecheck"
DATA_DIR: Final = "/var/lib/fencecheck"
AGENT_DAEMON: Final = "agent"

T = TypeVar("T")

# Runs on the node: connect to the daemon and ping it until it answers, it dies, or time runs out.
_PROBE: Final = """
import json, socket, sys, time
host, port, pid, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
deadline = time.monotonic() + limit
while True:
    try:
        with socket.create_connection((host, port), timeout=1.0) as conn:
            conn.sendall(b'{"op":"ping"}\\n')
            if json.loads(conn.makefile("rb").readline()).get("ok"):
                sys.exit(0)
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rpartition(")")[2].split()[0] in "ZX":
                sys.exit(3)
    except OSError:
        sys.exit(3)
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.05)
"""
_DIED: Final = 3


def source_of(module: ModuleType) -> bytes:
    """The source file of ``module``, to ship to a node."""
    if module.__file__ is None:
        raise AdapterError(f"module {module.__name__} has no source file to ship")
    return Path(module.__file__).read_bytes()


def wire_files(install_dir: str = INSTALL_DIR) -> dict[str, bytes]:
    """:mod:`harness.nodeside` as a package of its own beside the node programs that import it."""
    # An empty top-level __init__: the controller's imports modules that need more than stdlib.
    return {
        f"{install_dir}/harness/__init__.py": b"",
        f"{install_dir}/harness/nodeside/__init__.py": source_of(nodeside),
        f"{install_dir}/harness/nodeside/wire.py": source_of(wire),
    }


def agent_files(install_dir: str = INSTALL_DIR) -> dict[str, bytes]:
    """The agent program and what it imports (the system adds its client module)."""
    return {f"{install_dir}/agent.py": source_of(agent), **wire_files(install_dir)}


def agent_argv(
    install_dir: str,
    listen: Endpoint,
    node: str,
    client_path: str,
    ttl: float,
    retry_on_reject: bool,
    client_config: Mapping[str, Any],
) -> list[str]:
    """The command line that starts an agent (see :mod:`harness.nodeside.agent`)."""
    config = {"ttl": ttl, "retry_on_reject": retry_on_reject, "client": dict(client_config)}
    return [
        "python3",
        f"{install_dir}/agent.py",
        "--host",
        listen.host,
        "--port",
        str(listen.port),
        "--node",
        node,
        "--client",
        client_path,
        "--config",
        json.dumps(config, sort_keys=True),
    ]


def install(node: Node, files: Mapping[str, bytes]) -> None:
    """Write each file (absolute path -> contents) onto ``node``."""
    for path, data in files.items():
        node.put_file(path, data)


def fresh_dir(node: Node, path: str) -> None:
    """Make ``path`` an empty directory on ``node`` (a run never inherits an earlier run's data)."""
    node.run(f"rm -rf {shlex.quote(path)} && mkdir -p {shlex.quote(path)}", check=True)


def start_and_wait(
    node: Node, name: str, argv: Sequence[str], listen: Endpoint, timeout: float
) -> Daemon:
    """Start daemon ``name`` and return once it answers a ping on ``listen``."""
    daemon = node.start_daemon(name, argv)
    _wait_ready(node, daemon, listen, timeout)
    return daemon


def _wait_ready(node: Node, daemon: Daemon, listen: Endpoint, timeout: float) -> None:
    probe = ["python3", "-c", _PROBE, listen.host, str(listen.port), str(daemon.pid), str(timeout)]
    result = node.run(probe, timeout=timeout + 30)
    if result.ok:
        return
    why = "exited" if result.exit_code == _DIED else f"did not answer within {timeout:g}s"
    try:
        log = node.get_file(daemon.log_path).decode("utf-8", "replace")[-3000:]
    except NodeError as problem:
        log = f"(log unreadable: {problem})"
    raise AdapterError(
        f"{daemon.name} on {node.name} {why} at {listen} (probe exit {result.exit_code}, "
        f"{result.stderr.strip() or 'no stderr'}); {daemon.log_path} ends with:\n{log}"
    )


def kill_daemons(node: Node, names: Sequence[str]) -> None:
    """SIGKILL every running daemon of ``node`` named in ``names`` (a stopped one too)."""
    for daemon in node.daemons():
        if daemon.name in names and _alive(node, daemon):
            node.signal(daemon, signal.SIGKILL)


def _alive(node: Node, daemon: Daemon) -> bool:
    state = node.process_state(daemon)
    return state is not None and state not in ("Z", "X")


def restart_target(node: Node, target: ProcessTarget, listen: Endpoint, timeout: float) -> Daemon:
    """Start a killed target with its last argv and wait until it answers on ``listen``."""
    if target.node != node.name:
        raise AdapterError(f"target {target.daemon}@{target.node} is not on node {node.name}")
    daemon = node.daemon(target.daemon)
    if _alive(node, daemon):
        raise AdapterError(
            f"{target.daemon} on {node.name} (pid {daemon.pid}) is still running; "
            "kill it before restarting it"
        )
    return start_and_wait(node, daemon.name, daemon.argv, listen, timeout)


def on_each(nodes: Sequence[Node], action: Callable[[Node], T]) -> list[T]:
    """Run ``action`` on every node at once; raise one :class:`AdapterError` naming each failure."""
    if not nodes:
        return []
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = [pool.submit(action, node) for node in nodes]
    failures = []
    results = []
    for node, future in zip(nodes, futures, strict=True):
        problem = future.exception()
        if problem is None:
            results.append(future.result())
        else:
            failures.append(f"{node.name}: {problem}")
    if failures:
        raise AdapterError("\n".join(failures))
    return results
