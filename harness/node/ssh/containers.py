"""sshd containers that stand in for real hosts, for the SSH backend's tests and benchmark.

Each container runs sshd and nothing else; the harness reaches it through SSH alone (the Docker
API only creates and removes it). It gets what a real host has for fencecheck's faults: NET_ADMIN
for iptables, and CAP_SYS_ADMIN in a private cgroup namespace so that its entrypoint can mount
writable freezer and cpu cgroups (``docker/sshd/entrypoint.sh``).
"""

from __future__ import annotations

import secrets
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import paramiko

from harness.node.docker.engine import engine
from harness.node.docker.images import sshd_image

__all__ = ["LABEL", "SshdHosts", "sshd_hosts", "write_hosts_file"]

LABEL: Final = "fencecheck.sshd-host"
"""Label on every container and network made here (its value is the set's name)."""
_SSHD_WAIT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class SshdHosts:
    """A running set of sshd containers and a hosts file for them."""

    hosts_file: Path
    ips: tuple[str, ...]
    key: Path
    known_hosts: Path


def write_hosts_file(
    path: Path,
    ips: Sequence[str],
    roles: Sequence[str],
    key: Path,
    known_hosts: Path,
    *,
    user: str = "root",
    port: int = 22,
) -> Path:
    """Write a hosts file naming each address with its role (names default to l1, s1, w1…)."""
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


@contextmanager
def sshd_hosts(roles: Sequence[str], folder: Path) -> Iterator[SshdHosts]:
    """Start one sshd container per role on a private network, with a fresh key and a hosts file
    in ``folder``; remove them (and the network) when the block ends."""
    image = sshd_image()
    key = paramiko.RSAKey.generate(2048)
    key_path = folder / "id_rsa"
    key.write_private_key_file(str(key_path))
    public = f"{key.get_name()} {key.get_base64()}"
    client = engine()
    api = client.api
    name = f"fencecheck-sshd-{secrets.token_hex(3)}"
    network = client.networks.create(name, driver="bridge", labels={LABEL: name})
    ids: list[str] = []
    try:
        for index in range(len(roles)):
            created = api.create_container(
                image,
                name=f"{name}-{index}",
                labels={LABEL: name},
                environment={"AUTHORIZED_KEY": public},
                host_config=api.create_host_config(
                    cap_add=["NET_ADMIN", "SYS_ADMIN"], cgroupns="private", network_mode=name
                ),
                detach=True,
            )
            ids.append(created["Id"])
            api.start(created["Id"])
        ips = tuple(
            cast(Any, api.inspect_container(cid))["NetworkSettings"]["Networks"][name]["IPAddress"]
            for cid in ids
        )
        for ip in ips:
            _wait_for_sshd(ip)
        known = folder / "known_hosts"
        hosts_file = write_hosts_file(folder / "hosts.toml", ips, roles, key_path, known)
        yield SshdHosts(hosts_file, ips, key_path, known)
    finally:
        for cid in ids:
            api.remove_container(cid, force=True)
        network.remove()


def _wait_for_sshd(ip: str) -> None:
    deadline = time.monotonic() + _SSHD_WAIT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((ip, 22), timeout=1.0) as conn:
                if conn.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"sshd on {ip} did not answer within {_SSHD_WAIT_S:g} s")
