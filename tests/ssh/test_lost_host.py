"""A host that stops answering mid-run is lost after one bounded wait: the command that met the
silence fails naming the host, and every later command fails at once, so heal and teardown go on
with the other hosts instead of waiting out a guard per command (600 s each, once)."""

from __future__ import annotations

import threading
import time

import pytest

from harness.node import NodeError
from harness.node.docker.engine import engine
from harness.node.ssh import connect, load_hosts
from harness.node.ssh.containers import SshdHosts

pytestmark = pytest.mark.docker


def _container_at(ip: str) -> str:
    for container in engine().containers.list():
        networks = container.attrs["NetworkSettings"]["Networks"].values()
        if any(network.get("IPAddress") == ip for network in networks):
            return str(container.id)
    raise AssertionError(f"no container at {ip}")


def test_a_silent_host_is_lost_once_and_named(
    test_hosts: SshdHosts, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FENCECHECK_SSH_TIMEOUT", "2")
    hosts = load_hosts(test_hosts.hosts_file)
    spec = hosts.hosts[-1]
    node = connect(hosts, spec)
    container = engine().containers.get(_container_at(spec.address))
    failures: list[tuple[float, str]] = []

    def run_twice() -> None:
        for _ in range(2):
            began = time.monotonic()
            try:
                node.run("true")
            except NodeError as problem:
                failures.append((time.monotonic() - began, str(problem)))

    try:
        assert node.run("true").ok
        container.pause()  # sshd and the host's kernel-side TCP answer nothing now
        worker = threading.Thread(target=run_twice, daemon=True)
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), "a command on the silent host is still waiting"
    finally:
        container.unpause()
        node.close()
    (first, why), (second, again) = failures
    assert first < 10 and "the host stopped answering (no answer within 2 s)" in why
    assert spec.name in why and "hosts heal" in why
    assert second < 0.5 and again == why
