"""A cluster node that is a real host reached over SSH, behind the :class:`harness.node.Node`
interface, with the same optional capabilities as a container (freeze, throttle, netns runner).

Daemons are fully detached (``setsid nohup``: otherwise the SSH channel never closes), each in a
cgroup of its own (:mod:`harness.node.ssh.cgroups`), with a pid file ``/run/fencecheck/<name>.pid``
holding ``pid start-time`` so that a heal or a later controller finds them. Signals and process
states check the start time too, so a reused pid is never signalled. Every partition script gets
rules that let the controller's SSH connection through first, so a fault never cuts the control
channel.
"""

from __future__ import annotations

import io
import os
import secrets
import shlex
import tarfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from harness.node import CommandResult, Daemon, NodeError, NodeIdentity
from harness.node.commands import absolute_file, failure, live_state, shown, stat_fields, text
from harness.node.ssh.cgroups import PROBE, CgroupLayout, parse_probe
from harness.node.ssh.connection import ControlEndpoint, SshConnection

__all__ = ["DAEMON_LOG_DIR", "PID_DIR", "SshNode", "exempt_control"]

DAEMON_LOG_DIR: Final = "/var/log/fencecheck"
PID_DIR: Final = "/run/fencecheck"
# coreutils `timeout` exits 124 when it had to stop the command.
_TIMEOUT_EXIT: Final = 124
_GONE_EXIT: Final = 3
_BUILTIN_CHAINS: Final = frozenset({"INPUT", "OUTPUT", "FORWARD", "PREROUTING", "POSTROUTING"})
_DEFAULT_GUARD_S: Final = 120.0
"""A command given no timeout still must not hang the controller: a host that does not answer
one in this long (``FENCECHECK_SSH_TIMEOUT`` to change it) is lost (see ``SshConnection``)."""


def _guard() -> float:
    try:
        seconds = float(os.environ.get("FENCECHECK_SSH_TIMEOUT", _DEFAULT_GUARD_S))
    except ValueError:
        return _DEFAULT_GUARD_S
    return seconds if seconds > 0 else _DEFAULT_GUARD_S


_CONFIRM_S: Final = 5


@dataclass(frozen=True, slots=True)
class _Started:
    """A daemon record plus the start time that tells it from a later process with its pid."""

    daemon: Daemon
    ticks: str


class SshNode(NodeIdentity):
    """One host of a hosts file, implementing :class:`harness.node.Node`,
    :class:`~harness.node.Freezable`, :class:`~harness.node.Throttleable` and
    :class:`~harness.node.NetnsRunner` over one kept-open SSH connection."""

    def __init__(self, connection: SshConnection) -> None:
        """Wrap a logged-in ``connection``; probes the host's cgroups and control endpoint."""
        spec = connection.spec
        super().__init__(spec.name, spec.role, spec.ip)
        self.connection = connection
        """The SSH connection every call goes through."""
        self._lock = threading.Lock()
        self._daemons: dict[str, _Started] = {}
        self._written: set[str] = set()
        self.cgroups: CgroupLayout = parse_probe(self._checked(PROBE, "probe cgroups").decode())
        """Where this host's cgroups are and which controllers we can use."""
        self.control: ControlEndpoint | None = connection.control_endpoint()
        """The controller's connection as the host sees it: partitions always let it through."""

    def __repr__(self) -> str:
        return f"SshNode({self._name!r}, role={self._role!r}, ip={self._ip!r})"

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
        """Run a command to completion on the host (a string goes through ``sh -c``).

        ``timeout`` kills the command (SIGTERM, then SIGKILL a second later) and raises
        :class:`NodeError`; ``check=True`` raises on a non-zero exit, showing the output.
        """
        command = argv if isinstance(argv, str) else shlex.join(argv)
        if env:
            command = f"{_env_prefix(env)} sh -c {shlex.quote(command)}"
        if timeout is not None:
            command = f"timeout --kill-after=1 {timeout:g} sh -c {shlex.quote(command)}"
        started = time.perf_counter()
        out = self.connection.exec(
            command, stdin=stdin, timeout=(timeout + 5) if timeout else _guard()
        )
        result = CommandResult(
            out.exit_code, text(out.stdout), text(out.stderr), time.perf_counter() - started
        )
        if timeout is not None and out.exit_code == _TIMEOUT_EXIT:
            raise NodeError(f"{self._name}: {shown(argv)} timed out after {timeout:g} s")
        if check and not result.ok:
            raise NodeError(failure(self._name, argv, result))
        return result

    def _checked(self, command: str, what: str, stdin: bytes | None = None) -> bytes:
        out = self.connection.exec(command, stdin=stdin, timeout=_guard())
        if out.exit_code != 0:
            raise NodeError(
                f"{self._name}: cannot {what} (exit {out.exit_code}): "
                f"{text(out.stderr or out.stdout).strip()[-500:]}; "
                f"check with `fencecheck hosts check`"
            )
        return out.stdout

    # -- daemons ----------------------------------------------------------------------------

    def start_daemon(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Daemon:
        """Start ``argv`` detached in its own cgroup, output to ``/var/log/fencecheck/<name>.log``.

        Starting a name again replaces the record (restarts). Returns once the process exists.
        """
        if not name or "/" in name or name.startswith("."):
            raise NodeError(f"{self._name}: bad daemon name {name!r}; use a plain file name")
        if not argv:
            raise NodeError(f"{self._name}: daemon {name!r} needs a command")
        log_path = f"{DAEMON_LOG_DIR}/{name}.log"
        groups = self.cgroups.daemon_dirs(name)
        # The child joins its cgroups, then becomes the daemon (same pid) through exec.
        join = "".join(f"echo $$ >{shlex.quote(g)}/cgroup.procs || exit 96; " for g in groups)
        program = f"{_env_prefix(env or {})} {shlex.join(argv)}".strip()
        child = f"{join}exec setsid nohup {program}"
        script = (
            f"mkdir -p {DAEMON_LOG_DIR} {PID_DIR} {' '.join(map(shlex.quote, groups))} "
            f"&& cd {shlex.quote(cwd or '/')} || exit 97\n"
            f"sh -c {shlex.quote(child)} >>{shlex.quote(log_path)} 2>&1 </dev/null &\n"
            "pid=$!\n"
            "s=$(cat /proc/$pid/stat) || exit 98\n"
            "s=${s##*) }; set -- $s\n"
            f'echo "$pid ${{20}}" >{PID_DIR}/{name}.pid\n'
            'echo "$pid ${20}"\n'
        )
        out = self.connection.exec(script, timeout=_guard())
        fields = text(out.stdout).split()
        if out.exit_code != 0 or len(fields) != 2 or not fields[0].isdigit():
            raise NodeError(
                f"{self._name}: daemon {name!r} did not start (exit {out.exit_code}): "
                f"{text(out.stderr or out.stdout).strip() or 'no output'}; "
                f"is {cwd or '/'} a directory and are the cgroups writable (`fencecheck hosts "
                "check`)?"
            )
        daemon = Daemon(name, self._name, int(fields[0]), None, tuple(argv), log_path)
        with self._lock:
            self._daemons[name] = _Started(daemon, fields[1])
        return daemon

    def daemon(self, name: str) -> Daemon:
        """The daemon last started under ``name`` (raises :class:`NodeError` if none)."""
        with self._lock:
            found = self._daemons.get(name)
            known = sorted(self._daemons)
        if found is None:
            raise NodeError(f"{self._name}: no daemon named {name!r} (known: {known or 'none'})")
        return found.daemon

    def daemons(self) -> list[Daemon]:
        """Every daemon started on this node, latest record per name."""
        with self._lock:
            return [started.daemon for started in self._daemons.values()]

    def _ticks(self, daemon: Daemon) -> str | None:
        with self._lock:
            found = self._daemons.get(daemon.name)
        return found.ticks if found is not None and found.daemon.pid == daemon.pid else None

    def signal(self, daemon: Daemon, signum: int) -> None:
        """Send ``signum`` to the daemon with ``kill``, unless its pid now belongs to another
        process; raises :class:`NodeError` when the daemon no longer exists."""
        ticks = self._ticks(daemon)
        check = (
            f"read -r s </proc/{daemon.pid}/stat || exit {_GONE_EXIT}; "
            f's=${{s##*) }}; set -- $s; [ "${{20}}" = {ticks} ] || exit {_GONE_EXIT}; '
            if ticks
            else ""
        )
        out = self.connection.exec(f"{check}kill -{int(signum)} {daemon.pid}", timeout=_guard())
        if out.exit_code == 0:
            return
        if out.exit_code == _GONE_EXIT:
            raise NodeError(
                f"{self._name}: daemon {daemon.name!r} (pid {daemon.pid}) has exited; "
                f"see its log {daemon.log_path}"
            )
        raise NodeError(
            f"{self._name}: cannot signal daemon {daemon.name!r} (pid {daemon.pid}): "
            f"{text(out.stderr or out.stdout).strip()}; see its log {daemon.log_path}"
        )

    def process_state(self, daemon: Daemon) -> str | None:
        """The one-letter state from ``/proc/PID/stat`` (``R``, ``S``, ``T``…), None if gone."""
        # Shell builtins only (no cat): this is on the hot path of every pause.
        # The leader's stat line, then its threads' (see live_state).
        pid = daemon.pid
        echo = "printf '%s\\n' \"$s\""
        script = (
            f"read -r s </proc/{pid}/stat || exit 1; {echo}; "
            f'for t in /proc/{pid}/task/*/stat; do read -r s <"$t" 2>/dev/null && {echo}; done; '
            "exit 0"
        )
        out = self.connection.exec(script, timeout=_guard())
        if out.exit_code != 0:
            return None
        lines = text(out.stdout).splitlines()
        stats = [stat_fields(line) for line in lines if ")" in line]
        ticks = self._ticks(daemon)
        if not stats or len(stats[0]) < 20 or (ticks is not None and stats[0][19] != ticks):
            return None
        return live_state([fields[0] for fields in stats if fields])

    # -- files and logs ---------------------------------------------------------------------

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to the absolute ``path`` on the host, creating parent directories.

        SFTP writes as the login user, so the file goes to ``/tmp`` first and is moved into
        place with ``install`` (through ``sudo -n`` when not root).
        """
        target = absolute_file(self._name, path)
        staging = f"/tmp/.fencecheck-upload-{secrets.token_hex(8)}"
        try:
            self.connection.sftp().putfo(io.BytesIO(data), staging, confirm=False)
        except OSError as problem:
            raise NodeError(f"{self._name}: cannot upload to {staging}: {problem}") from None
        self._checked(
            f"install -D -m {mode:o} {staging} {shlex.quote(target)}; s=$?; rm -f {staging}; "
            "exit $s",
            f"write {target}",
        )
        with self._lock:
            self._written.add(target)

    def get_file(self, path: str) -> bytes:
        """Read the regular file ``path`` from the host (SFTP as root, else ``sudo -n cat``)."""
        target = absolute_file(self._name, path)
        if not self.connection.sudo:
            try:
                with self.connection.sftp().open(target, "rb") as handle:
                    return bytes(handle.read())
            except OSError as problem:
                raise NodeError(f"{self._name}: cannot read {target}: {problem}") from None
        out = self.connection.exec(f"cat {shlex.quote(target)}", timeout=_guard())
        if out.exit_code != 0:
            raise NodeError(f"{self._name}: no file {target}: {text(out.stderr).strip()}")
        return out.stdout

    def logs(self) -> dict[str, bytes]:
        """Each daemon's log, by daemon name."""
        out = self.connection.exec(
            f"[ -d {DAEMON_LOG_DIR} ] && tar -C {DAEMON_LOG_DIR} -cf - . || true",
            timeout=_guard(),
        )
        result: dict[str, bytes] = {}
        if not out.stdout:
            return result
        with tarfile.open(fileobj=io.BytesIO(out.stdout)) as archive:
            for member in archive:
                extracted = archive.extractfile(member) if member.isfile() else None
                if extracted is not None:
                    result[Path(member.name).name.removesuffix(".log")] = extracted.read()
        return result

    def written(self) -> list[str]:
        """The files :meth:`put_file` wrote, for teardown to remove."""
        with self._lock:
            return sorted(self._written)

    # -- capabilities: freeze, throttle, iptables -------------------------------------------

    def freeze(self) -> None:
        """Freeze every daemon the harness started here; returns once the kernel reports it."""
        self._freeze(True)

    def thaw(self) -> None:
        """Undo :meth:`freeze` (thawing what is not frozen does nothing)."""
        self._freeze(False)

    def _freeze(self, frozen: bool) -> None:
        script = self.cgroups.freeze_script(frozen)
        if script is None:
            raise NodeError(
                f"{self._name}: no writable cgroup freezer ({self.cgroups.describe()}); "
                "mount the freezer (v1) or use cgroup v2, or use the pause nemesis"
            )
        self._checked(
            f"timeout {_CONFIRM_S} sh -c {shlex.quote(script)}",
            "freeze" if frozen else "thaw",
        )

    def set_cpu_quota(self, quota_us: int | None, period_us: int = 10_000) -> None:
        """Cap the harness's daemons here to ``quota_us`` of CPU per ``period_us``; ``None``
        removes the cap. Returns once the cgroup reads back the new values."""
        script = self.cgroups.quota_script(quota_us, period_us)
        if script is None:
            raise NodeError(
                f"{self._name}: no writable cgroup CPU controller ({self.cgroups.describe()}); "
                "enable the cpu controller, or use the pause nemesis"
            )
        shown = text(self._checked(script, "set the CPU quota")).split()
        quotas = {str(quota_us)} if quota_us is not None else {"max", "-1"}
        if len(shown) != 2 or shown[0] not in quotas or shown[1] != str(period_us):
            raise NodeError(
                f"{self._name}: the CPU quota reads back as {' '.join(shown)!r}, "
                f"not {quota_us} per {period_us} us"
            )

    def run_in_netns(self, argv: Sequence[str], *, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` on the host (a real host's commands run in its network namespace).

        ``iptables-restore`` input first gets :func:`exempt_control`'s rules, so no partition
        can cut the controller's SSH connection.
        """
        if argv and argv[0] == "iptables-restore" and stdin and self.control is not None:
            stdin = exempt_control(stdin, self.control)
        if stdin is None:
            return self.run(list(argv))
        # Input as a quoted argument keeps the command on the fast persistent shell.
        return self.run(f"printf %s {shlex.quote(stdin.decode())} | {shlex.join(argv)}")

    def close(self) -> None:
        """End the SSH connection."""
        self.connection.close()


def exempt_control(script: bytes, control: ControlEndpoint) -> bytes:
    """``iptables-restore`` input with ``RETURN`` rules for the controller's SSH connection put
    first in every chain of ours the script (re)declares and keeps.

    A declared chain is flushed, so the rules land before anything the script appends. Chains the
    script deletes (``-X``) are left alone. IPv6 control connections need no rule: partitions are
    IPv4 rules.
    """
    if ":" in control.controller_ip or ":" in control.host_ip:
        return script
    lines = script.decode().splitlines()
    deleted = {
        line.split()[1] for line in lines if line.startswith("-X ") and len(line.split()) > 1
    }
    result = []
    for line in lines:
        result.append(line)
        if not line.startswith(":"):
            continue
        chain = line[1:].split()[0]
        if chain in _BUILTIN_CHAINS or chain in deleted:
            continue
        ctrl, host, port = control.controller_ip, control.host_ip, control.host_port
        result += [
            f"-A {chain} -p tcp -s {ctrl}/32 -d {host}/32 --dport {port} -j RETURN",
            f"-A {chain} -p tcp -s {host}/32 --sport {port} -d {ctrl}/32 -j RETURN",
        ]
    return ("\n".join(result) + "\n").encode()


def _env_prefix(env: Mapping[str, str]) -> str:
    if not env:
        return ""
    return "env " + " ".join(shlex.quote(f"{key}={value}") for key, value in env.items())
