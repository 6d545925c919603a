"""One kept-open SSH connection to a host (paramiko), with ``TCP_NODELAY`` and ``sudo -n``.

Every command is a new channel on the same transport: paramiko multiplexes channels, so nemeses
on several threads share one connection. Nagle's algorithm against the host's delayed ACK costs
about 45 ms per command; ``TCP_NODELAY`` brings a command down to a few milliseconds. A login user
other than root runs every command through ``sudo -n`` (never a password prompt).
"""

from __future__ import annotations

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
            self._client.load_host_keys(str(known))
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

    def exec(
        self, command: str, *, stdin: bytes | None = None, timeout: float | None = None
    ) -> Output:
        """Run the shell ``command`` on the host (through ``sudo -n`` unless root)."""
        wrapped = f"sudo -n sh -c {shlex.quote(command)}" if self.sudo else command
        try:
            channel = self._transport.open_session()
        except (paramiko.SSHException, OSError, EOFError) as problem:
            raise NodeError(
                f"{self.where}: the SSH connection is gone ({problem}); check the host is up"
            ) from None
        with channel:
            channel.exec_command(wrapped)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            stdout, stderr = _drain(channel, timeout, self.where)
            code = channel.recv_exit_status()
        return Output(code, stdout, stderr)

    def control_endpoint(self) -> ControlEndpoint | None:
        """Where this connection comes from and goes to, as the host sees it (None if unknown)."""
        # Asked of the login shell itself: `sudo` would drop $SSH_CONNECTION.
        channel = self._transport.open_session()
        with channel:
            channel.exec_command('echo "$SSH_CONNECTION"')
            channel.shutdown_write()
            out, _ = _drain(channel, _CONNECT_TIMEOUT_S, self.where)
        fields = out.decode(errors="replace").split()
        if len(fields) != 4 or not fields[3].isdigit():
            return None
        return ControlEndpoint(fields[0], fields[2], int(fields[3]))

    def sftp(self) -> paramiko.SFTPClient:
        """The connection's SFTP session (opened on first use)."""
        with self._sftp_lock:
            if self._sftp is None:
                self._sftp = self._client.open_sftp()
            return self._sftp

    @property
    def alive(self) -> bool:
        """Whether the transport is still up."""
        return self._transport.is_active()

    def close(self) -> None:
        """End the SFTP session and the connection."""
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
        raise NodeError(f"{where}: no answer from the command within {timeout:g} s") from None


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
