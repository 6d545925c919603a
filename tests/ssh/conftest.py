"""Containers that act as real hosts: each runs sshd and nothing else, and the harness reaches
them through SSH alone. The Docker API only creates and removes them.

They get what a real host has for fencecheck's faults: NET_ADMIN for iptables, and SYS_ADMIN in
a private cgroup namespace so the entrypoint can mount writable freezer and cpu cgroups.
"""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import paramiko
import pytest

from harness.node.docker.engine import engine
from harness.node.docker.images import sshd_image

_LABEL = "fencecheck.ssh-test"
ROLES = ("lock", "store", "worker", "worker")


@dataclass(frozen=True)
class SshHosts:
    """A set of sshd containers and a hosts file for them."""

    hosts_file: Path
    ips: tuple[str, ...]
    key: Path
    known_hosts: Path


def _wait_for_sshd(ip: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((ip, 22), timeout=1.0) as conn:
                if conn.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"sshd on {ip} did not answer within {timeout} s")


def write_hosts_file(
    path: Path,
    ips: tuple[str, ...],
    key: Path,
    known_hosts: Path,
    *,
    roles: tuple[str, ...] = ROLES,
    user: str = "root",
    port: int = 22,
) -> Path:
    """A hosts file naming each ip with its role (default names l1, s1, w1, w2)."""
    lines = [
        "[ssh]",
        f'key = "{key}"',
        f'known_hosts = "{known_hosts}"',
        "accept_new = true",
        f'user = "{user}"',
        f"port = {port}",
    ]
    for ip, role in zip(ips, roles, strict=True):
        lines += ["", "[[host]]", f'address = "{ip}"', f'role = "{role}"']
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def ssh_image() -> str:
    """The sshd test-host image, built once if its recipe changed."""
    return sshd_image()


@pytest.fixture(scope="module")
def test_hosts(ssh_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    """Four sshd containers on a private network, with a key, a known-hosts file and a hosts
    file (lock, store, two workers); removed afterwards."""
    folder = tmp_path_factory.mktemp("hosts")
    key = paramiko.RSAKey.generate(2048)
    key_path = folder / "id_rsa"
    key.write_private_key_file(str(key_path))
    public = f"{key.get_name()} {key.get_base64()}"
    client = engine()
    api = client.api
    tag = f"fencecheck-ssh-test-{secrets.token_hex(3)}"
    network = client.networks.create(tag, driver="bridge", labels={_LABEL: tag})
    ids: list[str] = []
    try:
        for index in range(len(ROLES)):
            created = api.create_container(
                ssh_image,
                name=f"{tag}-{index}",
                labels={_LABEL: tag},
                environment={"AUTHORIZED_KEY": public},
                host_config=api.create_host_config(
                    cap_add=["NET_ADMIN", "SYS_ADMIN"],
                    cgroupns="private",
                    network_mode=tag,
                ),
                detach=True,
            )
            ids.append(created["Id"])
            api.start(created["Id"])
        ips = tuple(
            cast(Any, api.inspect_container(cid))["NetworkSettings"]["Networks"][tag]["IPAddress"]
            for cid in ids
        )
        for ip in ips:
            _wait_for_sshd(ip)
        known = folder / "known_hosts"
        hosts_file = write_hosts_file(folder / "hosts.toml", ips, key_path, known)
        yield SshHosts(hosts_file, ips, key_path, known)
    finally:
        for cid in ids:
            api.remove_container(cid, force=True)
        network.remove()
