"""Putting node-side programs on nodes, starting them, and waiting until they serve.

Shared by adapters and by the harness (which starts the agents); uses only the
:class:`harness.node.Node` protocol. Node-side programs are stdlib-only Python files under
:data:`INSTALL_DIR`, with :mod:`harness.nodeside` (``wire`` and ``client``) copied beside them as a
package of its own; their data lives under :data:`DATA_DIR`. Readiness is a
:class:`harness.node.wait.WaitStrategy` the adapter chooses: a TCP port that accepts
(:class:`~harness.node.wait.PortOpen`), a command that exits 0
(:class:`~harness.node.wait.CommandSucceeds`), a log line (:class:`~harness.node.wait.LogLine`),
fencecheck's own ``ping`` (:class:`Pings`) or one of its own.
"""

from __future__ import annotations

import importlib.util
import secrets
import shlex
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Final, Literal, TypeVar

from harness import nodeside
from harness.node import Daemon, Node, NodeError, clocks
from harness.node.wait import WaitStrategy
from harness.nodeside import client, clock, clockprobe, lazyfs, wire
from systems.base import AdapterError

__all__ = [
    "DATA_DIR",
    "INSTALL_DIR",
    "LAZYFS_PROGRAM",
    "SECRET_FILE",
    "Mover",
    "Pings",
    "clock_probe_ask",
    "clock_shim",
    "clocked_argv",
    "data_dir",
    "fresh_dir",
    "install",
    "install_secret",
    "kill_daemons",
    "nodeside_files",
    "on_each",
    "restart_daemon",
    "source_of",
    "start_and_wait",
    "start_clock_probe",
    "start_clocked",
    "tear_down",
]

INSTALL_DIR: Final = "/opt/fencecheck"
DATA_DIR: Final = "/var/lib/fencecheck"
SECRET_FILE: Final = f"{INSTALL_DIR}/run-secret"
"""Where every node keeps the run's secret by default (mode 0600, root): node programs given
``--secret-file`` (see :mod:`harness.nodeside.wire`) refuse requests without it."""

LAZYFS_PROGRAM: Final = f"{INSTALL_DIR}/lazyfs.py"
"""Where a node keeps the lazy file system's program (:mod:`harness.nodeside.lazyfs`)."""
_LAZYFS_PACKAGE: Final = "python3-pyfuse3"
_MOUNT_TIMEOUT_S: Final = 120.0  # a data dir made before the mount is copied into it first

_COMPILE_TIMEOUT_S: Final = 120.0  # gcc on a loaded 2-core machine

Mover = Literal["libfaketime", "shim", "itself"]
"""What moves a clock-faultable daemon's clock: libfaketime preloaded; fencecheck's own clock
shim preloaded (:func:`clock_shim`), for a daemon libfaketime cannot start; or the process itself
(a Python program that calls :func:`harness.nodeside.clock.follow_control_file`: the holders'
agents, whose timed lock waits libfaketime breaks). :mod:`harness.nodeside.clock` says who needs
which."""

T = TypeVar("T")
_LOG_TAIL_CHARS: Final = 3000


@dataclass(frozen=True, slots=True)
class Pings:
    """Ready when the program answers fencecheck's ``{"op":"ping"}`` with ``ok`` on ``port`` of
    the node's address (every :mod:`harness.nodeside.wire` server does)."""

    port: int
    timeout: float = 20.0
    interval: float = 0.05

    def describe(self) -> str:
        """What is awaited."""
        return f"a ping on port {self.port} is answered"

    def attempt(self, node: Node) -> bool:
        """One ping (1 s at most)."""
        try:
            return bool(wire.call((node.ip, self.port), {"op": "ping"}, 1.0).get("ok"))
        except (TimeoutError, OSError):
            return False


def source_of(module: ModuleType | str) -> bytes:
    """The source file of ``module``, to ship to a node: an imported module, or a dotted module
    name, found without running it (so a holder client that imports what only the nodes have,
    e.g. ``psycopg2``, is never imported on the controller; its package is imported, as any
    import of ``a.b`` would)."""
    if isinstance(module, str):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as problem:
            raise AdapterError(f"cannot find module {module!r} to ship: {problem}") from None
        origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(".py"):
            raise AdapterError(f"module {module!r} has no Python source file to ship")
        return Path(origin).read_bytes()
    if module.__file__ is None:
        raise AdapterError(f"module {module.__name__} has no source file to ship")
    return Path(module.__file__).read_bytes()


def nodeside_files(install_dir: str = INSTALL_DIR) -> dict[str, bytes]:
    """:mod:`harness.nodeside` (``wire``, ``client`` and ``clock``) as a package of its own beside
    the node programs that import it."""
    # An empty top-level __init__: the controller's imports modules that need more than stdlib.
    return {
        f"{install_dir}/harness/__init__.py": b"",
        f"{install_dir}/harness/nodeside/__init__.py": source_of(nodeside),
        f"{install_dir}/harness/nodeside/wire.py": source_of(wire),
        f"{install_dir}/harness/nodeside/client.py": source_of(client),
        f"{install_dir}/harness/nodeside/clock.py": source_of(clock),
    }


def install(node: Node, files: Mapping[str, bytes]) -> None:
    """Write each file (absolute path -> contents) onto ``node``."""
    for path, data in files.items():
        node.put_file(path, data)


def install_secret(nodes: Mapping[str, Node], path: str = SECRET_FILE) -> str:
    """Draw a new run secret and write it to ``path`` on every node; returns it.

    A file readable by root only, so the secret never shows in a command line (``ps``), and
    another user's process on the host can neither take a lease nor write into the run.
    """
    token = secrets.token_hex(32)
    on_each(list(nodes.values()), lambda node: node.put_file(path, token.encode(), 0o600))
    return token


def fresh_dir(node: Node, path: str) -> None:
    """Make ``path`` an empty directory on ``node`` (a run never inherits an earlier run's data)."""
    node.run(f"rm -rf {shlex.quote(path)} && mkdir -p {shlex.quote(path)}", check=True)


def data_dir(node: Node, path: str, lazy: bool) -> None:
    """Make ``path`` an empty data directory on ``node`` (:func:`fresh_dir`); when ``lazy``
    (:attr:`systems.base.SystemConfig.lazy_disks`) with the lazy file system mounted over it, so
    that the disk fault kinds can drop what its daemons never fsynced. Raises
    :class:`AdapterError` when the node cannot mount one (no ``/dev/fuse``, no pyfuse3)."""
    node.run(["umount", "-l", path])  # an earlier run's lazy file system, if any
    fresh_dir(node, path)
    if not lazy:
        return
    probe = node.run(["python3", "-c", "import os, pyfuse3; os.stat('/dev/fuse')"])
    if not probe.ok:
        raise AdapterError(
            f"{node.name} cannot mount the lazy file system the disk fault kinds need: it needs "
            f"/dev/fuse, CAP_SYS_ADMIN and Debian's {_LAZYFS_PACKAGE} (in the system's "
            "packages.txt; Docker nodes get the device with these kinds, an SSH host must "
            f"have it); {probe.stderr.strip()[-300:]}"
        )
    install(node, {LAZYFS_PROGRAM: source_of(lazyfs)})
    mounted = node.run(["python3", LAZYFS_PROGRAM, "mount", path], timeout=_MOUNT_TIMEOUT_S)
    if not mounted.ok:
        raise AdapterError(
            f"{node.name}: cannot mount the lazy file system on {path}: "
            f"{(mounted.stderr or mounted.stdout).strip()[-500:]}"
        )


def start_and_wait(node: Node, name: str, argv: Sequence[str], ready: WaitStrategy) -> Daemon:
    """Start daemon ``name`` and return once ``ready`` holds; raise :class:`AdapterError` with
    the daemon's log if it exits first or ``ready.timeout`` passes."""
    daemon = node.start_daemon(name, argv)
    _wait_ready(node, daemon, ready)
    return daemon


def start_clocked(
    node: Node,
    name: str,
    argv: Sequence[str],
    ready: WaitStrategy,
    ask: str,
    clocked: bool = True,
    wall_only: bool = False,
    mover: Mover = "libfaketime",
) -> Daemon:
    """:func:`start_and_wait` under libfaketime, so that the clock faults can move the daemon's
    clock (:func:`harness.nodeside.clock.preloaded`; ``ask`` is how to read its clock back;
    ``wall_only``: its wall clock alone), when ``clocked``
    (:attr:`systems.base.SystemConfig.clocked`); a plain start otherwise. ``mover``: what moves
    the clock (:data:`Mover`).

    A control file left by an earlier run is removed first: a daemon starts on the real clock.
    """
    return start_and_wait(
        node, name, clocked_argv(node, name, argv, ask, clocked, wall_only, mover), ready
    )


def clocked_argv(
    node: Node,
    name: str,
    argv: Sequence[str],
    ask: str,
    clocked: bool = True,
    wall_only: bool = False,
    mover: Mover = "libfaketime",
) -> list[str]:
    """The command line :func:`start_clocked` starts daemon ``name`` with (``argv`` itself when
    not ``clocked``), for a daemon started without waiting (members that wait for each other);
    a control file left by an earlier run is removed first."""
    if not clocked:
        return list(argv)
    library: str | None = clock.PRELOAD
    if mover == "shim":
        library = clock_shim(node)
    elif mover == "itself":
        library = None
    node.run(["rm", "-f", clock.control_file(name)], check=True)
    return clock.preloaded(name, argv, ask, wall_only, library)


def start_clock_probe(
    node: Node, name: str, port: int, secret_file: str | None, install_dir: str = INSTALL_DIR
) -> Daemon:
    """Start a clock probe (:mod:`harness.nodeside.clockprobe`) as daemon ``name-clock`` on
    ``node``, under libfaketime with daemon ``name``'s control file, and wait until it answers;
    daemon ``name`` is started with the probe's ``wire:HOST:PORT`` as its ``ask``
    (:func:`clock_probe_ask`), for a daemon that reports no clock of its own."""
    program = f"{install_dir}/clockprobe.py"
    install(node, {program: source_of(clockprobe), **nodeside_files(install_dir)})
    argv = ["python3", program, "--host", node.ip, "--port", str(port)]
    argv += ["--secret-file", secret_file] if secret_file else []
    preloaded = clock.preloaded(name, argv, clock_probe_ask(node, port))
    return start_and_wait(node, f"{name}-clock", preloaded, Pings(port))


def clock_probe_ask(node: Node, port: int) -> str:
    """How to read the clock of a daemon through the clock probe on ``port`` of ``node``."""
    return f"wire:{node.ip}:{port}"


def clock_shim(node: Node) -> str:
    """Compile fencecheck's clock shim (``harness/nodeside/fakeclock.c``) on ``node`` unless the
    library there was compiled from this very source; its path (:data:`clock.SHIM`). Raises
    :class:`AdapterError` when the node cannot compile it (no C compiler)."""
    source = clock.SHIM.removesuffix(".so") + ".c"
    node.put_file(f"{source}.new", clocks.SHIM_SOURCE)
    # Compiled once per source: a node keeps the library across runs and restarts.
    built = node.run(
        f"cmp -s {source}.new {source} && test -e {clock.SHIM} || "
        f"{{ {clocks.shim_compile(f'{source}.new', f'{clock.SHIM}.new')} && "
        f"mv {clock.SHIM}.new {clock.SHIM} && mv {source}.new {source}; }}",
        timeout=_COMPILE_TIMEOUT_S,
    )
    if not built.ok:
        raise AdapterError(
            f"{node.name} cannot compile fencecheck's clock shim ({source}): "
            f"{(built.stderr or built.stdout).strip()[-500:]}; it needs gcc and libc6-dev "
            "(Debian's; in the system's packages.txt)"
        )
    return clock.SHIM


def _wait_ready(node: Node, daemon: Daemon, ready: WaitStrategy) -> None:
    deadline = time.monotonic() + ready.timeout
    while True:
        # Liveness first: a port someone else holds must not pass for a daemon that died.
        if not _alive(node, daemon):
            _fail(node, daemon, "exited", ready)
        try:
            if ready.attempt(node) and _alive(node, daemon):
                return
        except NodeError:
            pass  # not yet: the strategy's own failures count as "not ready"
        if time.monotonic() >= deadline:
            _fail(node, daemon, f"was not ready within {ready.timeout:g}s", ready)
        time.sleep(ready.interval)


def _fail(node: Node, daemon: Daemon, why: str, ready: WaitStrategy) -> None:
    try:
        log = node.get_file(daemon.log_path).decode("utf-8", "replace")[-_LOG_TAIL_CHARS:]
    except NodeError as problem:
        log = f"(log unreadable: {problem})"
    raise AdapterError(
        f"{daemon.name} on {node.name} {why} (waiting until {ready.describe()}); "
        f"{daemon.log_path} ends with:\n{log}"
    )


def kill_daemons(node: Node, names: Sequence[str]) -> None:
    """SIGKILL every running daemon of ``node`` named in ``names`` (a stopped one too)."""
    for daemon in node.daemons():
        if daemon.name in names and _alive(node, daemon):
            node.signal(daemon, signal.SIGKILL)


def tear_down(system: str, nodes: Iterable[Node], names: Sequence[str]) -> None:
    """SIGKILL the daemons ``names`` of ``system`` on every node of ``nodes`` (their data stays
    for collection); one :class:`AdapterError` naming each node that failed."""
    problems = []
    for node in nodes:
        try:
            kill_daemons(node, names)
        except NodeError as problem:
            problems.append(f"{node.name}: {problem}")
    if problems:
        raise AdapterError(f"tearing down the {system} system failed:\n" + "\n".join(problems))


def _alive(node: Node, daemon: Daemon) -> bool:
    state = node.process_state(daemon)
    return state is not None and state not in ("Z", "X")


def restart_daemon(node: Node, name: str, ready: WaitStrategy) -> Daemon:
    """Start the killed daemon ``name`` with its last command line (same data: the restart model)
    and wait until ``ready`` holds."""
    try:
        daemon = node.daemon(name)
    except NodeError as problem:
        raise AdapterError(str(problem)) from None
    if _alive(node, daemon):
        raise AdapterError(
            f"{name} on {node.name} (pid {daemon.pid}) is still running; "
            "kill it before restarting it"
        )
    return start_and_wait(node, daemon.name, daemon.argv, ready)


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
