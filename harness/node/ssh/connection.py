"""One kept-open SSH connection to a host (paramiko), with ``TCP_NODELAY`` and ``sudo -n``.

Nagle's algorithm against the host's delayed ACK costs about 45 ms per command; ``TCP_NODELAY``
brings a command on a new channel down to a few milliseconds. Commands without input go faster
still through one persistent remote shell per connection that answers each command with a
sentinel line (no channel to open, no process to log in): that is what makes a pause confirmable
within milliseconds. When the shell is busy with another thread's command, or a command has input,
it gets a channel of its own on the same transport, so nemeses on several threads never queue.
A login user other than root runs every command through ``sudo -n`` (never a password prompt).
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import paramiko

from harness.node import NodeError
from harness.node.ssh.hosts import HostsFile, HostSpec

__all__ = ["ControlEndpoint", "Output", "SshConnection"]

_CONNECT_TIMEOUT_S: Final = 10.0
_KEEPALIVE_S: Final = 5


@dataclass(frozen=True, slots=True)
class Output:
    """A finished remote command: exit code and raw output."""

    exit_code: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True, slots=True)
class ControlEndpoint:
    """The controller's SSH connection as the host sees it (from ``$SSH_CONNECTION``)."""

    controller_ip: str
    host_ip: str
    host_port: int


class SshConnection:
    """A logged-in SSH transport to one host; :meth:`close` ends it."""

    def __init__(self, spec: HostSpec, hosts: HostsFile) -> None:
        """Connect and log in with the host's key, verifying its host key as ``hosts`` says."""
        self.spec = spec
        """The host this connection reaches."""
        self.sudo = spec.user != "root"
        """Whether commands run through ``sudo -n``."""
        self._client = paramiko.SSHClient()
        known = hosts.known_hosts or Path("~/.ssh/known_hosts").expanduser()
        self._known = known
        if known.exists():
            _load_known_hosts(self._client, known)
        self._client.set_missing_host_key_policy(
            _RecordNew(known) if hosts.accept_new else paramiko.RejectPolicy()
        )
        where = f"{spec.name} ({spec.user}@{spec.address}:{spec.port})"
        try:
            self._client.connect(
                spec.address,
                port=spec.port,
                username=spec.user,
                key_filename=str(spec.key) if spec.key else None,
                timeout=_CONNECT_TIMEOUT_S,
                banner_timeout=_CONNECT_TIMEOUT_S,
                auth_timeout=_CONNECT_TIMEOUT_S,
                allow_agent=spec.key is None,
                look_for_keys=spec.key is None,
            )
        except paramiko.BadHostKeyException as changed:
            raise NodeError(_changed_host_key(where, spec, known, changed)) from None
        except paramiko.SSHException as problem:
            if "not found in known_hosts" in str(problem):
                raise NodeError(
                    f"{where}: host key unknown (not in {known}); add it with "
                    f"`ssh-keyscan -p {spec.port} {spec.address} >> {known}` or set "
                    "accept_new = true under [ssh] in the hosts file"
                ) from None
            raise NodeError(f"{where}: SSH login failed: {problem}; check user and key") from None
        except OSError as problem:
            raise NodeError(
                f"{where}: cannot connect: {problem}; is sshd running and the port open?"
            ) from None
        transport = self._client.get_transport()
        if transport is None:
            raise NodeError(f"{where}: SSH connected but has no transport")
        self._transport = transport
        # Without this each command waits for the host's delayed ACK (~45 ms).
        # (A ProxyCommand transport has no TCP socket of its own to tune.)
        if isinstance(transport.sock, socket.socket):
            transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_keepalive(_KEEPALIVE_S)
        self._sftp_lock = threading.Lock()
        self._sftp: paramiko.SFTPClient | None = None
        self.where = where
        """``name (user@address:port)``, for messages."""
        self._shell_lock = threading.Lock()
        self._shell: _Shell | None = None
        self._lost: str | None = None
        """Why the host counts as lost (no answer in time, a failed connection), once it does."""

    def exec(
        self, command: str, *, stdin: bytes | None = None, timeout: float | None = None
    ) -> Output:
        """Run the shell ``command`` on the host (through ``sudo -n`` unless root): in the
        persistent shell when it is free and there is no input, else on a channel of its own.

        A host that does not answer within ``timeout`` (or whose connection fails) is lost:
        this command and every later one raise :class:`NodeError` at once naming it, so a run
        whose host dropped heals the others and ends instead of waiting on it command by
        command.
        """
        if self._lost is not None:
            raise NodeError(self._lost)
        try:
            if stdin is None and self._shell_lock.acquire(blocking=False):
                try:
                    return self._in_shell(command, timeout)
                finally:
                    self._shell_lock.release()
            return self._on_channel(command, stdin, timeout)
        except _HostLost as lost:
            self._lost = (
                f"{self.where}: the host stopped answering ({lost}); it is left as it was: once "
                "it answers, `fencecheck hosts heal HOSTS_FILE` undoes what the run left on it"
            )
            raise NodeError(self._lost) from None

    def _in_shell(self, command: str, timeout: float | None) -> Output:
        if self._shell is None:
            self._shell = _Shell(self._transport, self.sudo, self.where)
        try:
            return self._shell.run(command, timeout)
        except (NodeError, _HostLost):
            # A broken or timed-out shell is dropped; the next command starts a fresh one.
            self._shell.close()
            self._shell = None
            raise

    def _on_channel(self, command: str, stdin: bytes | None, timeout: float | None) -> Output:
        wrapped = f"sudo -n sh -c {shlex.quote(command)}" if self.sudo else command
        try:
            with self._transport.open_session() as channel:
                channel.exec_command(wrapped)
                if stdin:
                    channel.sendall(stdin)
                channel.shutdown_write()
                stdout, stderr = _drain(channel, timeout, self.where)
                code = channel.recv_exit_status()
        except (paramiko.SSHException, OSError, EOFError) as problem:
            raise _HostLost(f"the SSH connection failed: {problem}") from None
        return Output(code, stdout, stderr)

    def control_endpoint(self) -> ControlEndpoint | None:
        """Where this connection comes from and goes to, as the host sees it (None if unknown)."""
        # Asked of the login shell itself: `sudo` would drop $SSH_CONNECTION.
        try:
            with self._transport.open_session() as channel:
                channel.exec_command('echo "$SSH_CONNECTION"')
                channel.shutdown_write()
                out, _ = _drain(channel, _CONNECT_TIMEOUT_S, self.where)
        except (paramiko.SSHException, OSError, EOFError):
            return None
        fields = out.decode(errors="replace").split()
        if len(fields) != 4 or not fields[3].isdigit():
            return None
        return ControlEndpoint(fields[0], fields[2], int(fields[3]))

    def sftp(self) -> paramiko.SFTPClient:
        """The connection's SFTP session (opened on first use)."""
        with self._sftp_lock:
            if self._sftp is None:
                try:
                    self._sftp = self._client.open_sftp()
                except (paramiko.SSHException, OSError, EOFError) as problem:
                    raise NodeError(
                        f"{self.where}: cannot open SFTP ({problem}); sshd needs its sftp "
                        "subsystem enabled"
                    ) from None
            return self._sftp

    @property
    def alive(self) -> bool:
        """Whether the transport is still up."""
        return self._transport.is_active()

    def close(self) -> None:
        """End the persistent shell, the SFTP session and the connection."""
        with self._shell_lock:
            if self._shell is not None:
                self._shell.close()
                self._shell = None
        with self._sftp_lock:
            if self._sftp is not None:
                self._sftp.close()
                self._sftp = None
        self._client.close()


def _drain(channel: paramiko.Channel, timeout: float | None, where: str) -> tuple[bytes, bytes]:
    """Read stdout, then stderr, to their ends (raises :class:`NodeError` on timeout)."""
    channel.settimeout(timeout)
    try:
        return channel.makefile("rb").read(), channel.makefile_stderr("rb").read()
    except TimeoutError:
        raise _HostLost(f"no answer within {timeout:g} s") from None


class _HostLost(Exception):
    """The host did not answer in time, or its connection failed (:meth:`SshConnection.exec`)."""


class _Shell:
    """One long-lived remote ``sh`` reading commands on its stdin.

    Each command runs in a subshell (so ``exit`` or ``cd`` cannot end or change the shell) with
    stdin from ``/dev/null`` and stderr to a file of the shell's; then the shell prints a random
    token with the exit code, the captured stderr, and the token again: the answer's end.
    """

    def __init__(self, transport: paramiko.Transport, sudo: bool, where: str) -> None:
        self._where = where
        self._token = f"__fencecheck_{secrets.token_hex(8)}_"
        self._errors = f"/tmp/.fencecheck-shell-{secrets.token_hex(8)}"
        try:
            self._channel = transport.open_session()
            self._channel.exec_command("sudo -n sh" if sudo else "sh")
        except (paramiko.SSHException, OSError, EOFError) as problem:
            raise NodeError(f"{where}: cannot start a remote shell: {problem}") from None
        self._buffer = b""

    def run(self, command: str, timeout: float | None) -> Output:
        """Run ``command`` and return its exit code, stdout and stderr."""
        token = self._token
        script = (
            f"(\n{command}\n) </dev/null 2>{self._errors}; printf '%s%d\\n' {token} $?; "
            f"[ -s {self._errors} ] && cat {self._errors}; printf '%sE\\n' {token}\n"
        )
        end = f"{token}E\n".encode()
        self._channel.settimeout(timeout)
        try:
            self._channel.sendall(script.encode())
            while end not in self._buffer:
                chunk = self._channel.recv(65536)
                if not chunk:
                    raise NodeError(f"{self._where}: the remote shell ended; check the host")
                self._buffer += chunk
        except TimeoutError:
            raise _HostLost(f"no answer within {timeout:g} s") from None
        except (paramiko.SSHException, OSError) as problem:
            raise _HostLost(f"the remote shell failed: {problem}") from None
        answer, _, self._buffer = self._buffer.partition(end)
        stdout, _, rest = answer.partition(token.encode())
        code, _, stderr = rest.partition(b"\n")
        if not code.isdigit():
            raise NodeError(f"{self._where}: the remote shell answered garbage: {answer[-200:]!r}")
        return Output(int(code), stdout, stderr)

    def close(self) -> None:
        """End the shell (and remove its stderr file)."""
        with contextlib.suppress(paramiko.SSHException, OSError):
            self._channel.sendall(f"rm -f {self._errors}; exit\n".encode())
        self._channel.close()


def _load_known_hosts(client: paramiko.SSHClient, known: Path) -> None:
    """Load ``known`` into ``client``; a line paramiko cannot read is a :class:`NodeError` naming
    the file, the line and the fix (paramiko raises its own exception type, which no caller
    expects)."""
    try:
        client.load_host_keys(str(known))
    except paramiko.hostkeys.InvalidHostKey as bad:
        raise NodeError(
            f"{known} line {_line_of(known, bad.line)}: not a known-hosts entry ({bad.exc}): "
            "fix or delete that line (`ssh-keygen -R HOST -f FILE` removes a host's entries)"
        ) from None
    except (UnicodeDecodeError, OSError) as problem:
        raise NodeError(
            f"{known} cannot be read as a known-hosts file ({problem}): point known_hosts under "
            "[ssh] in the hosts file at a text file of `host keytype key` lines"
        ) from None


def _line_of(known: Path, line: str) -> str:
    """The number of ``line`` in ``known`` (``?`` when it cannot be found again)."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for number, text in enumerate(known.read_text().splitlines(), 1):
            if text.strip() == line.strip():
                return str(number)
    return "?"


def _changed_host_key(
    where: str, spec: HostSpec, known: Path, changed: paramiko.BadHostKeyException
) -> str:
    """Why a host whose key differs from the recorded one is refused, and what to do."""
    # The host's name as known-hosts files write it (OpenSSH: [address]:port off port 22).
    name = spec.address if spec.port == 22 else f"[{spec.address}]:{spec.port}"
    lines = []
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for number, text in enumerate(known.read_text().splitlines(), 1):
            if name in text.split(" ", 1)[0].split(","):
                lines.append(str(number))
    at = f" line {', '.join(lines)}" if lines else ""
    return (
        f"{where}: the host key changed: it offered {changed.key.get_name()} "
        f"{changed.key.fingerprint}, but {known}{at} records {changed.expected_key.get_name()} "
        f"{changed.expected_key.fingerprint} for {name}. Someone may be intercepting the "
        "connection (man-in-the-middle); nothing was sent. If the host was reinstalled, remove "
        f"its old key with `ssh-keygen -R '{name}' -f {known}` and connect again"
    )


class _RecordNew(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host key and append it to the known-hosts file (trust on first use)."""

    def __init__(self, known: Path) -> None:
        self._known = known
        self._lock = threading.Lock()

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        """Record ``key`` for ``hostname`` in the client and in the known-hosts file."""
        client.get_host_keys().add(hostname, key.get_name(), key)
        with self._lock:
            self._known.parent.mkdir(parents=True, exist_ok=True)
            with self._known.open("a") as handle:
                handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
