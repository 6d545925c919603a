"""The reference system on real containers: setup, a paused holder fenced off, restarts."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from harness.node import NodeError
from harness.node.docker.cluster import Cluster, default_topology, new_run_id
from harness.nodeside import wire
from harness.run.agents import AgentSet, deploy_system, stop_agents
from systems import Deployment, SystemConfig, load_system
from systems.reference import ReferenceSystem
from tests.support.localcluster import wait_until

pytestmark = pytest.mark.docker

Running = tuple[Cluster, ReferenceSystem, Deployment, AgentSet]


@pytest.fixture
def running(node_image: str) -> Iterator[Running]:
    system = load_system("reference")
    assert isinstance(system, ReferenceSystem)
    with Cluster(f"test-systems-{new_run_id()}", default_topology(2), image=node_image) as cluster:
        deployment, agents = deploy_system(system, cluster.nodes, SystemConfig(lease_ttl=1.0))
        try:
            yield cluster, system, deployment, agents
        finally:
            for node in cluster.nodes.values():
                for daemon in node.daemons():
                    with contextlib.suppress(NodeError):
                        node.signal(daemon, signal.SIGCONT)
            stop_agents(cluster.nodes)
            system.teardown(cluster.nodes)


def test_a_paused_holder_is_fenced_off_and_epochs_survive_a_restart(running: Running) -> None:
    cluster, system, deployment, agents = running

    def ask(worker: str, request: dict[str, Any]) -> dict[str, Any]:
        endpoint = agents.endpoints[worker]
        return wire.call((endpoint.host, endpoint.port), request, 60.0, agents.token)

    old = ask("w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    request = {"op": "write", "lock": "L", "epoch": old, "sink": "store", "key": "k"}
    replies: list[dict[str, Any]] = []
    stale = {**request, "id": "w1-1", "work_ms": 3000}
    writer = threading.Thread(target=lambda: replies.append(ask("w1", stale)))
    writer.start()
    wait_until(lambda: "w1-1" in ask("w1", {"op": "holds"})["working"], "w1's write")
    w1 = cluster.nodes["w1"]
    w1.signal(w1.daemon("agent"), signal.SIGSTOP)
    try:
        new = ask("w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"]
        assert new > old
        assert ask("w2", {**request, "epoch": new, "id": "w2-1"}) == {"ok": True, "seq": 1}
    finally:
        w1.signal(w1.daemon("agent"), signal.SIGCONT)
    writer.join(timeout=60)
    assert replies == [{"ok": False, "error": "stale-epoch"}]
    read = ask("w2", {"op": "read", "sink": "store", "key": "k"})
    assert read == {"ok": True, "entries": [{"id": "w2-1", "epoch": new, "seq": 1}]}

    l1 = cluster.nodes["l1"]
    lock_server = l1.daemon("lock-server")
    l1.signal(lock_server, signal.SIGKILL)
    wait_until(lambda: l1.process_state(lock_server) in (None, "Z"), "the lock server to die")
    system.restart(l1, deployment.targets_for("lock")[0].daemon)
    assert ask("w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"] > new
    kept = system.collect(cluster.nodes)
    assert b'"id": "w2-1"' in kept["s1"]["store.log"]
