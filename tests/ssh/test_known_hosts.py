"""A known-hosts file that paramiko cannot read, and a host whose key changed: one clear line
each, naming the file (and the line) and the fix, never "a fencecheck bug" or "login failed"
(issue 22). The host is a paramiko server on loopback: the key check happens before any login."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from harness.node import NodeError
from harness.node.ssh import connect, load_hosts
from harness.node.ssh.containers import write_hosts_file


@pytest.fixture
def host_key() -> paramiko.RSAKey:
    return paramiko.RSAKey.generate(1024)


@pytest.fixture
def sshd(host_key: paramiko.RSAKey) -> Iterator[int]:
    """A loopback server that offers ``host_key`` and lets nobody log in; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    transports: list[paramiko.Transport] = []

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            transport = paramiko.Transport(sock)
            transport.add_server_key(host_key)
            transports.append(transport)
            transport.start_server(server=paramiko.ServerInterface())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for transport in transports:
            transport.close()
        listener.close()


def _hosts(tmp_path: Path, known: Path, port: int) -> Path:
    key = tmp_path / "id_rsa"
    paramiko.RSAKey.generate(1024).write_private_key_file(str(key))
    path = write_hosts_file(tmp_path / "hosts.toml", ["127.0.0.1"], ("worker",), key, known)
    path.write_text(
        path.read_text()
        .replace("port = 22", f"port = {port}")
        .replace("accept_new = true", "accept_new = false")
    )
    return path


def test_a_bad_known_hosts_line_is_named_with_its_file_and_line(tmp_path: Path, sshd: int) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("# a comment\n[127.0.0.1]:22 ssh-ed25519 AAAA!!!notbase64\n")
    hosts = load_hosts(_hosts(tmp_path, known, sshd))
    with pytest.raises(NodeError) as refused:
        connect(hosts, hosts.hosts[0])
    said = str(refused.value)
    assert f"{known} line 2: not a known-hosts entry" in said
    assert "fix or delete that line" in said


def test_a_known_hosts_file_that_is_no_text_is_named(tmp_path: Path, sshd: int) -> None:
    known = tmp_path / "known_hosts"
    known.write_bytes(b"\xff\xfe\x00binary\n")
    hosts = load_hosts(_hosts(tmp_path, known, sshd))
    with pytest.raises(NodeError, match="cannot be read as a known-hosts file"):
        connect(hosts, hosts.hosts[0])


def test_a_changed_host_key_is_a_possible_man_in_the_middle(
    tmp_path: Path, sshd: int, host_key: paramiko.RSAKey
) -> None:
    known = tmp_path / "known_hosts"
    recorded = paramiko.RSAKey.generate(1024)  # what the host offered before it "changed"
    name = f"[127.0.0.1]:{sshd}"
    known.write_text(f"other.example ssh-rsa {recorded.get_base64()}\n")
    with known.open("a") as lines:
        lines.write(f"{name} ssh-rsa {recorded.get_base64()}\n")
    hosts = load_hosts(_hosts(tmp_path, known, sshd))
    with pytest.raises(NodeError) as refused:
        connect(hosts, hosts.hosts[0])
    said = str(refused.value)
    assert "the host key changed" in said and "man-in-the-middle" in said
    assert f"{known} line 2 records" in said
    assert host_key.fingerprint in said and recorded.fingerprint in said
    assert f"ssh-keygen -R '{name}' -f {known}" in said
    assert "login failed" not in said
