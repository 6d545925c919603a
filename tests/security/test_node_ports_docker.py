"""On a real cluster, a process outside the run cannot write into it (issue 15, item 9)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.node.docker.cluster import Cluster, default_topology, new_run_id
from harness.nodeside import wire
from harness.run.agents import AgentSet, deploy_system, stop_agents
from systems import Deployment, SystemConfig, load_system

pytestmark = pytest.mark.docker


Running = tuple[Cluster, Deployment, AgentSet]


@pytest.fixture
def running(node_image: str) -> Iterator[Running]:
    system = load_system("reference")
    with Cluster(f"test-security-{new_run_id()}", default_topology(1), image=node_image) as cluster:
        deployment, agents = deploy_system(system, cluster.nodes, SystemConfig(lease_ttl=1.0))
        try:
            yield cluster, deployment, agents
        finally:
            stop_agents(cluster.nodes)
            system.teardown(cluster.nodes)


def test_a_forged_grant_or_write_from_the_host_is_refused(running: Running) -> None:
    _, deployment, agents = running
    # The client's own addresses of the lock server and store.
    store_at = wire.parse_address(str(deployment.client.config["store"]))
    lock_at = wire.parse_address(str(deployment.client.config["lock"]))
    agent = agents.endpoints["w1"]
    forged = {
        "op": "write",
        "lock": "L0",
        "sink": "store",
        "key": "L0-k0",
        "id": "evil",
        "epoch": 999999,
    }
    assert wire.call(store_at, forged, 30.0)["error"] == wire.UNAUTHORIZED
    assert wire.call(lock_at, {"op": "acquire", "lock": "L0", "ttl": 1.0}, 30.0)["error"] == (
        wire.UNAUTHORIZED
    )
    grab = {"op": "acquire", "lock": "L0", "wait": 1.0}
    assert wire.call((agent.host, agent.port), grab, 30.0)["error"] == wire.UNAUTHORIZED
    # The run itself still works, and the forged write is nowhere.
    granted = wire.call((agent.host, agent.port), grab, 30.0, agents.token)
    assert granted["ok"], granted
    read = {"op": "read", "sink": "store", "key": "L0-k0"}
    entries = wire.call((agent.host, agent.port), read, 30.0, agents.token)["entries"]
    assert all(entry["id"] != "evil" for entry in entries)


def test_the_secret_is_a_root_only_file_and_never_on_a_command_line(running: Running) -> None:
    cluster, _, agents = running
    token = agents.token
    assert token is not None and len(token) >= 32
    for node in cluster.nodes.values():
        mode = node.run(["stat", "-c", "%a %U", "/opt/fencecheck/run-secret"], check=True)
        assert mode.stdout.split() == ["600", "root"]
        listing = node.run(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], check=True)
        assert "--secret-file" in listing.stdout
        assert token not in listing.stdout
