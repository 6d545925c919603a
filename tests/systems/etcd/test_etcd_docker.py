"""The etcd system on real containers: three members, PostgreSQL, the harness's agents.

One cluster for the module (``e1..e3``, ``s1``, ``w1``, ``w2``); the agents run the etcd holder
client exactly as in a run. A holder paused past its lease while its writes are in flight is
fenced off on both fenced sinks, also after the etcd leader and PostgreSQL were SIGKILLed and
restarted in the meantime; the unfenced sink takes its stale write, as its inventory says.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from harness.node import Node, NodeError
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.images import system_image
from harness.nodeside import wire
from harness.run.agents import AgentSet, deploy_system, start_agents, stop_agents
from systems import Deployment, SystemConfig
from systems.base import topology
from systems.deploy import SECRET_FILE
from systems.etcd import EtcdSystem
from systems.etcd.adapter import ETCD_DAEMON, POSTGRES_DAEMON
from tests.support.localcluster import wait_until

pytestmark = pytest.mark.docker

Running = tuple[Cluster, EtcdSystem, Deployment, AgentSet]
_TTL = 2.0


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    system = EtcdSystem()
    image = system_image(system.packages())
    nodes = [NodeSpec(name, role) for name, role in topology(system.roles(), 2)]
    with Cluster(f"test-etcd-{new_run_id()}", nodes, image=image) as cluster:
        deployment, started = deploy_system(system, cluster.nodes, SystemConfig(lease_ttl=_TTL))
        try:
            yield cluster, system, deployment, started
        finally:
            for node in cluster.nodes.values():
                for daemon in node.daemons():
                    with contextlib.suppress(NodeError):
                        node.signal(daemon, signal.SIGCONT)
            stop_agents(cluster.nodes)
            system.teardown(cluster.nodes)


@contextlib.contextmanager
def agents(running: Running, bugs: tuple[str, ...] = ()) -> Iterator[AgentSet]:
    """The run's agents, restarted with the client-side ``bugs`` switched on until the end."""
    cluster, _, deployment, started = running
    if not bugs:
        yield started
        return
    client = replace(deployment.client, config={**deployment.client.config, "bugs": bugs})
    secret = (started.token or "", SECRET_FILE)
    stop_agents(cluster.nodes)
    try:
        yield start_agents(cluster.nodes, client, _TTL, secret=secret)
    finally:
        stop_agents(cluster.nodes)
        start_agents(cluster.nodes, deployment.client, _TTL, secret=secret)


def ask(agents: AgentSet, worker: str, request: dict[str, Any]) -> dict[str, Any]:
    endpoint = agents.endpoints[worker]
    return wire.call((endpoint.host, endpoint.port), request, 60.0, agents.token)


def kill_and_restart(system: EtcdSystem, node: Node, name: str) -> None:
    daemon = node.daemon(name)
    node.signal(daemon, signal.SIGKILL)
    wait_until(lambda: node.process_state(daemon) in (None, "Z"), f"{name} on {node.name} to die")
    system.restart(node, name)


def test_the_leader_is_found_and_a_new_one_is_elected_when_it_pauses(running: Running) -> None:
    cluster, system, _, _ = running
    leader = system.lock_leader(cluster.nodes)
    assert leader in ("e1", "e2", "e3")
    node = cluster.nodes[leader]
    node.signal(node.daemon(ETCD_DAEMON), signal.SIGSTOP)
    try:
        wait_until(
            lambda: system.lock_leader(cluster.nodes) not in (None, leader), "a new etcd leader"
        )
    finally:
        node.signal(node.daemon(ETCD_DAEMON), signal.SIGCONT)


def test_a_paused_holder_is_fenced_off_even_across_restarts(running: Running) -> None:
    cluster, system, _, _ = running
    with agents(running) as holders:
        old = ask(holders, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
        replies: dict[str, dict[str, Any]] = {}

        def stale_write(sink: str) -> None:
            request = {"op": "write", "lock": "L", "epoch": old, "sink": sink, "key": "k"}
            replies[sink] = ask(holders, "w1", {**request, "id": f"w1-{sink}", "work_ms": 4000})

        sinks = ("etcd-txn", "postgres", "etcd-put")
        writers = [threading.Thread(target=stale_write, args=(sink,)) for sink in sinks]
        for writer in writers:
            writer.start()
        wait_until(
            lambda: len(ask(holders, "w1", {"op": "holds"})["working"]) == len(sinks),
            "w1's writes to enter their critical section",
        )
        w1 = cluster.nodes["w1"]
        w1.signal(w1.daemon("agent"), signal.SIGSTOP)
        try:
            new = ask(holders, "w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"]
            assert new > old  # create revisions: global and strictly increasing
            seqs = []
            for sink in sinks:
                request = {"op": "write", "lock": "L", "epoch": new, "sink": sink, "key": "k"}
                reply = ask(holders, "w2", {**request, "id": f"w2-{sink}"})
                assert reply["ok"] is True
                seqs.append(reply["seq"])
            assert seqs[0] < seqs[2]  # both etcd sinks number writes by etcd's revision
            # The highest epochs must survive a crash of the etcd leader and of PostgreSQL.
            leader = system.lock_leader(cluster.nodes)
            assert leader is not None
            kill_and_restart(system, cluster.nodes[leader], ETCD_DAEMON)
            kill_and_restart(system, cluster.nodes["s1"], POSTGRES_DAEMON)
        finally:
            w1.signal(w1.daemon("agent"), signal.SIGCONT)
        for writer in writers:
            writer.join(timeout=60)
        assert replies["etcd-txn"] == {"ok": False, "error": "stale-epoch"}
        assert replies["postgres"] == {"ok": False, "error": "stale-epoch"}
        assert replies["etcd-put"]["ok"] is True  # unfenced: the inventory says so
        for sink in ("etcd-txn", "postgres"):
            read = ask(holders, "w2", {"op": "read", "sink": sink, "key": "k"})
            assert read["ok"], read
            assert [(e["id"], e["epoch"]) for e in read["entries"]] == [(f"w2-{sink}", new)]
        after = ask(holders, "w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"]
        assert after > new


def test_holders_sharing_a_lease_both_hold_the_lock_with_one_epoch(running: Running) -> None:
    with agents(running, ("shared-lease",)) as holders:
        first = ask(holders, "w1", {"op": "acquire", "lock": "S", "wait": 10})
        second = ask(holders, "w2", {"op": "acquire", "lock": "S", "wait": 10})
    assert first["ok"] and second["ok"]
    assert first["epoch"] == second["epoch"]


def test_a_correct_holder_waits_for_the_lock(running: Running) -> None:
    with agents(running) as holders:
        first = ask(holders, "w1", {"op": "acquire", "lock": "W", "wait": 10})
        refused = ask(holders, "w2", {"op": "acquire", "lock": "W", "wait": 1})
        assert ask(holders, "w1", {"op": "release", "lock": "W"}) == {"ok": True}
        second = ask(holders, "w2", {"op": "acquire", "lock": "W", "wait": 10})
    assert refused == {"ok": False, "error": "timeout"}
    assert second["epoch"] > first["epoch"]
