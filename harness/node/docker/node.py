"""A cluster node that is a Docker container, behind the :class:`harness.node.Node` interface.

Commands go through the engine's exec API. When the controller runs as root on the engine's own
host (the normal case), the hot paths skip the engine entirely: signals go to the daemon's host pid
through a pidfd (no pid-reuse race), process states are read from the host's ``/proc``, and
``run_in_netns`` enters the container's network namespace with ``nsenter``. Each call's duration is
recorded in :attr:`DockerNode.stats` so benches and nemeses can see what a fault costs.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import signal as signals
import socket
import statistics
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import docker.errors
from docker.models.containers import Container
from docker.utils.socket import consume_socket_output, demux_adaptor, frames_iter

from harness.node import CommandResult, Daemon, NodeError, NodeIdentity
from harness.node.commands import absolute_file, failure, live_state, shown, stat_fields, text

__all__ = ["DAEMON_LOG_DIR", "CallStats", "DockerNode", "HostView"]

DAEMON_LOG_DIR: Final = "/var/log/fencecheck"
DAEMON_PID_DIR: Final = "/run/fencecheck"
"""Where each daemon's pid is also left, for when the engine loses an exec's output."""
# coreutils `timeout` exits 124 when it had to stop the command.
_TIMEOUT_EXIT: Final = 124
# The CFS scheduler refuses quotas under 1 ms and periods outside 1 ms..1 s.
_MIN_QUOTA_US: Final = 1_000
_MAX_PERIOD_US: Final = 1_000_000
_CONFIRM_TIMEOUT_S: Final = 5.0


class CallStats:
    """How long each kind of node call took: operation name -> durations in seconds.

    Thread-safe; fast-path and fallback variants are recorded under different names
    (``signal`` vs ``signal:exec``) so a bench can tell which path ran.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[str, list[float]] = {}

    def add(self, op: str, seconds: float) -> None:
        """Record one call of ``op`` that took ``seconds``."""
        with self._lock:
            self._seconds.setdefault(op, []).append(seconds)

    @contextlib.contextmanager
    def timed(self, op: str) -> Iterator[None]:
        """Record the duration of the ``with`` block under ``op`` (also when it raises)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(op, time.perf_counter() - start)

    def seconds(self, op: str) -> list[float]:
        """A copy of the durations recorded for ``op`` (empty if none)."""
        with self._lock:
            return list(self._seconds.get(op, ()))

    def ops(self) -> list[str]:
        """The operation names recorded so far, sorted."""
        with self._lock:
            return sorted(self._seconds)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per operation: ``count``, ``median`` and ``p99`` in seconds."""
        result: dict[str, dict[str, float]] = {}
        for op in self.ops():
            values = sorted(self.seconds(op))
            result[op] = {
                "count": float(len(values)),
                "median": statistics.median(values),
                "p99": values[min(len(values) - 1, int(0.99 * len(values)))],
            }
        return result

    def clear(self) -> None:
        """Forget every recorded duration."""
        with self._lock:
            self._seconds.clear()


@dataclass(frozen=True, slots=True)
class HostView:
    """What the controller can see of a container from the engine's host.

    Present only when the controller is root in the engine's pid namespace: then ``init_pid`` is
    the container's init as this host sees it, and ``cgroup_procs`` lists the container's
    processes (or is ``None`` when the cgroup file could not be located).
    """

    init_pid: int
    pid_namespace: int
    cgroup_procs: Path | None

    @classmethod
    def probe(cls, init_pid: int) -> HostView | None:
        """The host view of the container whose init has host pid ``init_pid``, if visible."""
        if init_pid <= 0 or os.geteuid() != 0:
            return None
        try:
            # In the engine's pid namespace this pid is the container's init, which is pid 1
            # inside; anywhere else (remote engine, nested namespaces) the numbers do not line up.
            if _namespace_pids(init_pid)[-1:] != [1]:
                return None
            pid_namespace = os.stat(f"/proc/{init_pid}/ns/pid").st_ino
        except (OSError, ValueError):
            return None
        if pid_namespace == os.stat("/proc/self/ns/pid").st_ino:
            return None
        return cls(init_pid, pid_namespace, _cgroup_procs_file(init_pid))

    def host_pid(self, pid: int) -> int | None:
        """The host pid of the process that is ``pid`` inside the container, if it is alive."""
        candidates: list[int]
        try:
            if self.cgroup_procs is not None:
                candidates = [int(x) for x in self.cgroup_procs.read_text().split()]
            else:
                candidates = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
        except OSError:
            return None
        for host_pid in candidates:
            try:
                if (
                    _namespace_pids(host_pid)[-1:] == [pid]
                    and os.stat(f"/proc/{host_pid}/ns/pid").st_ino == self.pid_namespace
                ):
                    return host_pid
            except (OSError, ValueError):
                continue
        return None


def _namespace_pids(host_pid: int) -> list[int]:
    """The ``NSpid`` line of a process: its pid in each nested pid namespace, outermost first."""
    with open(f"/proc/{host_pid}/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    return []


def _cgroup_procs_file(init_pid: int) -> Path | None:
    """The ``cgroup.procs`` file listing the container's processes (cgroup v1 or v2)."""
    try:
        lines = Path(f"/proc/{init_pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/pids") / path.lstrip("/") / "cgroup.procs"
        elif controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / "cgroup.procs"
        else:
            continue
        if candidate.exists():
            return candidate
    return None


def _stat_fields(path: str) -> list[str] | None:
    """The fields of the ``stat`` file at ``path`` after the command name (state first), or None
    if it is gone."""
    try:
        with open(path, encoding="ascii", errors="replace") as stat:
            return stat_fields(stat.read())
    except OSError:
        return None


def _group_state(host_pid: int, leader: str) -> str:
    """``leader``'s state, or, when the leader is a zombie, that of a thread still exiting."""
    if leader != "Z":
        return leader
    try:
        tasks = os.listdir(f"/proc/{host_pid}/task")
    except OSError:
        return leader
    threads = (_stat_fields(f"/proc/{host_pid}/task/{task}/stat") for task in tasks)
    return live_state([leader, *(fields[0] for fields in threads if fields)])


@dataclass(slots=True)
class _Tracked:
    """Host-side handles of a daemon: its host pid, a pidfd for race-free signals, and its
    start time (to tell it from a later process that reuses the pid)."""

    host_pid: int | None
    pidfd: int | None
    start_ticks: str | None


class DockerNode(NodeIdentity):
    """One container of a :class:`harness.node.docker.cluster.Cluster`, implementing
    :class:`harness.node.Node`, :class:`~harness.node.Freezable`,
    :class:`~harness.node.Throttleable` and :class:`~harness.node.NetnsRunner`.
    """

    def __init__(
        self, container: Container, *, name: str, role: str, ip: str, fast_paths: bool = True
    ) -> None:
        """Wrap a started ``container``; ``ip`` is its address on the run's network.

        ``fast_paths=False`` forces every call through the engine (exec), as when the controller
        cannot see the engine host's processes; benches and tests use it to compare the paths.
        """
        if container.client is None:
            raise NodeError(f"{name}: the container object is not bound to an engine client")
        self._container = container
        self._id = str(container.id)
        self._api = container.client.api
        super().__init__(name, role, ip)
        self._host = HostView.probe(int(container.attrs["State"]["Pid"])) if fast_paths else None
        self._lock = threading.Lock()
        self._daemons: dict[str, Daemon] = {}
        self._tracked: dict[str, _Tracked] = {}
        self.stats = CallStats()
        """Durations of this node's calls, by operation name."""

    def __repr__(self) -> str:
        return f"DockerNode({self._name!r}, role={self._role!r}, ip={self._ip!r})"

    @property
    def container_id(self) -> str:
        """The Docker container id (for tools that need the engine's view)."""
        return self._id

    @property
    def host_view(self) -> HostView | None:
        """The host-side view used by the fast paths, or ``None`` when they are unavailable."""
        return self._host

    # -- commands ---------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        timeout: float | None = None,
        check: bool = False,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        """Run a command to completion in the container (a string goes through ``sh -c``).

        ``timeout`` kills the command (SIGTERM, then SIGKILL a second later) and raises
        :class:`NodeError`. With ``check=True`` a non-zero exit raises :class:`NodeError`
        showing the output.
        """
        command = ["sh", "-c", argv] if isinstance(argv, str) else list(argv)
        if timeout is not None:
            command = ["timeout", "--kill-after=1", f"{timeout:g}", *command]
        start = time.perf_counter()
        with self.stats.timed("run"):
            code, out, err = self._exec(command, env=env, stdin=stdin)
        result = CommandResult(code, out, err, time.perf_counter() - start)
        if timeout is not None and code == _TIMEOUT_EXIT:
            raise NodeError(f"{self._name}: {shown(argv)} timed out after {timeout:g} s")
        if check and not result.ok:
            raise NodeError(failure(self._name, argv, result))
        return result

    def _exec(
        self,
        command: list[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> tuple[int, str, str]:
        try:
            exec_id = self._api.exec_create(
                self._id,
                command,
                stdin=stdin is not None,
                environment=dict(env) if env else None,
            )["Id"]
            if stdin is None:
                out, err = self._api.exec_start(exec_id, demux=True)
            else:
                out, err = self._exec_with_stdin(exec_id, stdin)
            code = self._api.exec_inspect(exec_id)["ExitCode"]
        except docker.errors.APIError as problem:
            raise NodeError(
                f"{self._name}: cannot run {shown(command)}: {problem.explanation or problem}; "
                f"check the container with `fencecheck cluster status`"
            ) from problem
        return int(code), text(out), text(err)

    def _exec_with_stdin(self, exec_id: str, stdin: bytes) -> tuple[bytes | None, bytes | None]:
        stream = self._api.exec_start(exec_id, socket=True)
        # The hijacked HTTP connection: stdin goes straight to its socket.
        raw: socket.socket = cast(Any, stream)._sock
        try:
            raw.sendall(stdin)
            # Half-close so the command sees end of input; the engine forwards it.
            raw.shutdown(socket.SHUT_WR)
            # docker's socket helpers are untyped; they parse the engine's multiplexed stream.
            frames = (
                demux_adaptor(*frame)
                for frame in frames_iter(stream, tty=False)  # type: ignore[no-untyped-call]
            )
            out, err = consume_socket_output(frames, demux=True)
        finally:
            stream.close()
        return out, err

    # -- daemons ----------------------------------------------------------------------------

    def start_daemon(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Daemon:
        """Start ``argv`` in the background, its output to ``/var/log/fencecheck/<name>.log``.

        Starting a name again replaces the record (restarts). Returns once the process exists;
        ``host_pid`` is filled in when the controller can see the container's processes.
        """
        if not name or "/" in name or name.startswith("."):
            raise NodeError(f"{self._name}: bad daemon name {name!r}; use a plain file name")
        if not argv:
            raise NodeError(f"{self._name}: daemon {name!r} needs a command")
        log_path = f"{DAEMON_LOG_DIR}/{name}.log"
        pid_path = f"{DAEMON_PID_DIR}/{name}.pid"
        script = (
            f"mkdir -p {DAEMON_LOG_DIR} {DAEMON_PID_DIR} || exit 97\n"
            f"cd {shlex.quote(cwd or '/')} || exit 97\n"
            f"exec {shlex.join(argv)} >>{shlex.quote(log_path)} 2>&1 </dev/null &\n"
            f"echo $! >{shlex.quote(pid_path)}\n"
            "echo $!\n"
        )
        with self.stats.timed("start_daemon"):
            code, out, err = self._exec(["sh", "-c", script], env=env)
            if code == 0 and not out.strip():
                # Under heavy load the engine sometimes ends an exec's attach before it copied
                # the output (exit 0, nothing printed). Starting again would run the daemon
                # twice, so the pid is read back from where the script also left it.
                code, out, err = self._exec(["cat", pid_path])
            if code != 0 or not out.strip().isdigit():
                raise NodeError(
                    f"{self._name}: daemon {name!r} did not start (exit {code}): "
                    f"{(err or out).strip() or 'no output'}; is {cwd or '/'} a directory?"
                )
            pid = int(out.strip())
            tracked = self._track(pid)
        daemon = Daemon(name, self._name, pid, tracked.host_pid, tuple(argv), log_path)
        with self._lock:
            old = self._tracked.pop(name, None)
            self._daemons[name] = daemon
            self._tracked[name] = tracked
        if old is not None and old.pidfd is not None:
            os.close(old.pidfd)
        return daemon

    def _track(self, pid: int) -> _Tracked:
        untracked = _Tracked(None, None, None)
        host_pid = None if self._host is None else self._host.host_pid(pid)
        if self._host is None or host_pid is None:
            return untracked
        try:
            pidfd = os.pidfd_open(host_pid)
        except OSError:
            return untracked
        fields = _stat_fields(f"/proc/{host_pid}/stat")
        # Checked again once the pidfd exists: had the daemon died and its host pid been reused
        # in between, the pidfd would hold the wrong process.
        if fields is None or self._host.host_pid(pid) != host_pid:
            os.close(pidfd)
            return untracked
        return _Tracked(host_pid, pidfd, fields[19])

    def daemon(self, name: str) -> Daemon:
        """The daemon last started under ``name`` (raises :class:`NodeError` if none)."""
        with self._lock:
            found = self._daemons.get(name)
            known = sorted(self._daemons)
        if found is None:
            raise NodeError(f"{self._name}: no daemon named {name!r} (known: {known or 'none'})")
        return found

    def daemons(self) -> list[Daemon]:
        """Every daemon started on this node, latest record per name."""
        with self._lock:
            return list(self._daemons.values())

    def signal(self, daemon: Daemon, signum: int) -> None:
        """Send ``signum`` to the daemon: by pidfd from the host when possible, else by exec.

        Raises :class:`NodeError` when the process no longer exists.
        """
        tracked = self._tracked_for(daemon)
        if tracked is not None and tracked.pidfd is not None:
            with self.stats.timed("signal"):
                try:
                    signals.pidfd_send_signal(tracked.pidfd, signum)
                except ProcessLookupError:
                    raise NodeError(
                        f"{self._name}: daemon {daemon.name!r} (pid {daemon.pid}) has exited; "
                        f"see its log {daemon.log_path}"
                    ) from None
            return
        with self.stats.timed("signal:exec"):
            code, out, err = self._exec(["kill", f"-{int(signum)}", str(daemon.pid)])
        if code != 0:
            raise NodeError(
                f"{self._name}: cannot signal daemon {daemon.name!r} (pid {daemon.pid}): "
                f"{(err or out).strip()}; see its log {daemon.log_path}"
            )

    def process_state(self, daemon: Daemon) -> str | None:
        """The one-letter state from ``/proc/PID/stat`` (``R``, ``S``, ``T``…), None if gone."""
        tracked = self._tracked_for(daemon)
        if tracked is not None and tracked.host_pid is not None:
            with self.stats.timed("process_state"):
                fields = _stat_fields(f"/proc/{tracked.host_pid}/stat")
            if fields is None or fields[19] != tracked.start_ticks:
                return None
            return _group_state(tracked.host_pid, fields[0])
        with self.stats.timed("process_state:exec"):
            # The leader's state first, then its threads' (see live_state); a thread that ends
            # meanwhile is no failure, a leader that cannot be read is gone.
            pid = daemon.pid
            script = (
                f"cat /proc/{pid}/stat || exit 1; cat /proc/{pid}/task/*/stat 2>/dev/null; exit 0"
            )
            try:
                code, out, _ = self._exec(["sh", "-c", script])
            except NodeError:
                if self._stopped():
                    # Killing the container's main process stops the container with it.
                    return None
                raise
        if code != 0:
            return None
        # Inside the container the pid may have been reused too, but no other process is
        # started there by us; the state of whatever holds the pid is the best answer available.
        states = [stat_fields(line) for line in out.splitlines() if ")" in line]
        return live_state([fields[0] for fields in states if fields]) if states else None

    def _stopped(self) -> bool:
        """Whether the container no longer runs (the engine's word, asked afresh)."""
        try:
            self._container.reload()
        except docker.errors.APIError:
            return True
        return self._container.status not in ("running", "paused")

    def _tracked_for(self, daemon: Daemon) -> _Tracked | None:
        with self._lock:
            if self._daemons.get(daemon.name) is not daemon:
                # An older record of a restarted daemon: its pidfd is closed; go by exec.
                return None
            return self._tracked.get(daemon.name)

    # -- files and logs ---------------------------------------------------------------------

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to the absolute ``path`` on the node, creating parent directories."""
        target = absolute_file(self._name, path)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            info = tarfile.TarInfo(target.lstrip("/"))
            info.size = len(data)
            info.mode = mode
            info.mtime = int(time.time())
            archive.addfile(info, io.BytesIO(data))
        with self.stats.timed("put_file"):
            try:
                # The engine creates missing parent directories when it unpacks at "/".
                self._container.put_archive("/", buffer.getvalue())
            except docker.errors.APIError as problem:
                raise NodeError(
                    f"{self._name}: cannot write {target}: {problem.explanation or problem}"
                ) from problem

    def get_file(self, path: str) -> bytes:
        """Read the regular file ``path`` from the node."""
        target = absolute_file(self._name, path)
        with self.stats.timed("get_file"):
            members = self._get_tree(target)
        if members is None:
            raise NodeError(f"{self._name}: no file {target}")
        if len(members) != 1:
            raise NodeError(f"{self._name}: {target} is a directory, not a file")
        return next(iter(members.values()))

    def _get_tree(self, path: str) -> dict[str, bytes] | None:
        """Regular files under ``path`` (itself if a file) by relative name; None if missing."""
        try:
            chunks, _ = self._container.get_archive(path)
            blob = b"".join(chunks)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as problem:
            raise NodeError(
                f"{self._name}: cannot read {path}: {problem.explanation or problem}"
            ) from problem
        files: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(blob)) as archive:
            for member in archive:
                extracted = archive.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    files[member.name] = extracted.read()
        return files

    def logs(self) -> dict[str, bytes]:
        """The container's output (``container``) and each daemon log, by daemon name."""
        with self.stats.timed("logs"):
            result = {"container": bytes(self._container.logs(stdout=True, stderr=True))}
            for member, data in (self._get_tree(DAEMON_LOG_DIR) or {}).items():
                # Files come back as "fencecheck/<name>.log": key them by daemon name.
                result[Path(member).name.removesuffix(".log")] = data
        return result

    # -- capabilities: freeze, throttle, netns ----------------------------------------------

    def freeze(self) -> None:
        """Freeze the whole container (cgroup freezer); returns once the engine reports it."""
        with self.stats.timed("freeze"):
            self._container.pause()
            self._confirm_paused(True)

    def thaw(self) -> None:
        """Undo :meth:`freeze`; returns once the engine reports the container running.

        Thawing a node that is not frozen does nothing, so healing can thaw blindly.
        """
        with self.stats.timed("thaw"):
            if not self._api.inspect_container(self._id)["State"]["Paused"]:
                return
            self._container.unpause()
            self._confirm_paused(False)

    def _confirm_paused(self, paused: bool) -> None:
        deadline = time.monotonic() + _CONFIRM_TIMEOUT_S
        while bool(self._api.inspect_container(self._id)["State"]["Paused"]) != paused:
            if time.monotonic() > deadline:
                raise NodeError(
                    f"{self._name}: the engine never reported the container "
                    f"{'paused' if paused else 'running'}; check `docker inspect`"
                )
            time.sleep(0.005)

    def set_cpu_quota(self, quota_us: int | None, period_us: int = 10_000) -> None:
        """Cap the node to ``quota_us`` of CPU per ``period_us``; ``None`` removes the cap."""
        if not _MIN_QUOTA_US <= period_us <= _MAX_PERIOD_US:
            raise NodeError(f"{self._name}: CPU period {period_us} us is outside 1000..1000000 us")
        if quota_us is not None and quota_us < _MIN_QUOTA_US:
            raise NodeError(
                f"{self._name}: CPU quota {quota_us} us is below the kernel's minimum of "
                f"{_MIN_QUOTA_US} us; raise the quota or lengthen the period"
            )
        with self.stats.timed("set_cpu_quota"):
            try:
                # -1 is the kernel's "no limit".
                self._container.update(
                    cpu_quota=-1 if quota_us is None else quota_us, cpu_period=period_us
                )
            except docker.errors.APIError as problem:
                raise NodeError(
                    f"{self._name}: cannot set the CPU quota: {problem.explanation or problem}"
                ) from problem

    def run_in_netns(self, argv: Sequence[str], *, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` in the node's network namespace: ``nsenter`` from the host when root on
        the engine's host (no exec round trip), else inside the container."""
        if self._host is None:
            with self.stats.timed("run_in_netns:exec"):
                return self.run(list(argv), stdin=stdin)
        start = time.perf_counter()
        with self.stats.timed("run_in_netns"):
            done = subprocess.run(
                ["nsenter", "-t", str(self._host.init_pid), "-n", *argv],
                input=stdin if stdin is not None else b"",
                capture_output=True,
                check=False,
            )
        return CommandResult(
            done.returncode,
            text(done.stdout),
            text(done.stderr),
            time.perf_counter() - start,
        )

    def close(self) -> None:
        """Release host-side handles (pidfds); the node record stays readable."""
        with self._lock:
            tracked = list(self._tracked.values())
            self._tracked.clear()
        for handles in tracked:
            if handles.pidfd is not None:
                os.close(handles.pidfd)
