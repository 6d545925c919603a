"""The redis system on real containers: tokens, fences, persistence across SIGKILL, the switches."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from localcluster import wait_until
from sysimages import system_image

from harness.node import Node, NodeError
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.nodeside import wire
from systems import Deployment, SystemConfig
from systems.redis import PACKAGES, RedisSystem

pytestmark = pytest.mark.docker

Start = Callable[..., tuple[Cluster, Deployment]]


@pytest.fixture(scope="module")
def redis_image() -> str:
    return system_image(PACKAGES)


@pytest.fixture
def start(redis_image: str) -> Iterator[Start]:
    """Starts a cluster (l1 running Redis, w1 and w2) with the system under a config."""
    system = RedisSystem()
    running: list[Cluster] = []

    def make(**config: Any) -> tuple[Cluster, Deployment]:
        topology = [NodeSpec("l1", "lock"), NodeSpec("w1", "worker"), NodeSpec("w2", "worker")]
        cluster = Cluster(f"test-redis-{new_run_id()}", topology, image=redis_image)
        cluster.__enter__()
        running.append(cluster)
        return cluster, system.setup(cluster.nodes, SystemConfig(**config))

    yield make
    for cluster in running:
        for node in cluster.nodes.values():
            for daemon in node.daemons():
                with contextlib.suppress(NodeError):
                    node.signal(daemon, signal.SIGCONT)
        system.teardown(cluster.nodes)
        cluster.__exit__(None, None, None)


def ask(deployment: Deployment, worker: str, request: dict[str, Any]) -> dict[str, Any]:
    endpoint = deployment.agents[worker]
    return wire.call((endpoint.host, endpoint.port), request, 60.0)


def redis_cli(node: Node, *command: str) -> str:
    return node.run(["redis-cli", "-h", node.ip, *command], check=True).stdout.strip()


def kill_and_restart(cluster: Cluster, deployment: Deployment) -> None:
    """SIGKILL Redis (no chance to flush) and start it again as the kill nemesis would."""
    l1 = cluster.nodes["l1"]
    server = l1.daemon("redis-server")
    l1.signal(server, signal.SIGKILL)
    wait_until(lambda: l1.process_state(server) in (None, "Z"), "Redis to die")
    RedisSystem().restart(l1, deployment.targets_for("lock")[0])


def stale_write(
    cluster: Cluster, deployment: Deployment, sink: str
) -> tuple[int, int, dict[str, Any]]:
    """w1 pauses inside a write's critical section past its lease; w2 takes the lock and writes;
    w1 resumes. Returns both epochs and the answer w1's write got."""
    old = ask(deployment, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    request = {"op": "write", "lock": "L", "sink": sink, "key": "k"}
    replies: list[dict[str, Any]] = []
    stale = {**request, "epoch": old, "id": "w1-1", "work_ms": 2500}
    writer = threading.Thread(target=lambda: replies.append(ask(deployment, "w1", stale)))
    writer.start()
    wait_until(lambda: "w1-1" in ask(deployment, "w1", {"op": "holds"})["working"], "w1's write")
    w1 = cluster.nodes["w1"]
    w1.signal(w1.daemon("agent"), signal.SIGSTOP)
    try:
        new = ask(deployment, "w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"]
        assert ask(deployment, "w2", {**request, "epoch": new, "id": "w2-1"}) == {"ok": True}
    finally:
        w1.signal(w1.daemon("agent"), signal.SIGCONT)
    writer.join(timeout=60)
    return old, new, replies[0]


def test_grants_increase_a_stale_holder_is_fenced_off_and_a_kill_forgets_nothing(
    start: Start,
) -> None:
    cluster, deployment = start(lease_ttl=1.0)
    old, new, reply = stale_write(cluster, deployment, "store")
    assert new > old
    assert reply == {"ok": False, "error": "stale-epoch"}
    read = ask(deployment, "w2", {"op": "read", "sink": "store", "key": "k"})
    assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new)]
    write = {"op": "write", "lock": "L", "epoch": new, "sink": "log", "key": "k", "id": "w2-2"}
    assert ask(deployment, "w2", write) == {"ok": True}

    kill_and_restart(cluster, deployment)
    assert ask(deployment, "w2", {"op": "release", "lock": "L"})["ok"] in (True, False)
    after = ask(deployment, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    assert after > new
    read = ask(deployment, "w1", {"op": "read", "sink": "store", "key": "k"})
    assert [e["id"] for e in read["entries"]] == ["w2-1"]
    assert read["entries"][0]["seq"] >= 1
    fenced_read = {"op": "read", "sink": "store", "key": "k", "lock": "L", "epoch": after}
    assert ask(deployment, "w1", fenced_read)["ok"] is True
    assert redis_cli(cluster.nodes["l1"], "GET", "mark:L") == str(after)


def test_the_owned_sink_refuses_a_holder_whose_grant_is_gone(start: Start) -> None:
    cluster, deployment = start(lease_ttl=1.0)
    _, new, reply = stale_write(cluster, deployment, "owned")
    assert reply == {"ok": False, "error": "stale-epoch"}
    read = ask(deployment, "w2", {"op": "read", "sink": "owned", "key": "k"})
    assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new)]


def test_no_aof_a_kill_forgets_the_counter(start: Start) -> None:
    cluster, deployment = start(lease_ttl=1.0, bugs={"no-aof"})
    epochs = []
    for _ in range(3):
        epochs.append(ask(deployment, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"])
    assert epochs == sorted(set(epochs))
    kill_and_restart(cluster, deployment)
    again = ask(deployment, "w2", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    assert again <= epochs[-1]


def test_random_value_token_the_token_is_the_locks_random_value(start: Start) -> None:
    cluster, deployment = start(bugs={"random-value-token"})
    epoch = ask(deployment, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    assert redis_cli(cluster.nodes["l1"], "GET", "lock:L") == f"w1/{epoch}"
    assert redis_cli(cluster.nodes["l1"], "EXISTS", "epoch:L") == "0"


def test_unchecked_release_a_resumed_holder_takes_the_lock_back(start: Start) -> None:
    cluster, deployment = start(lease_ttl=1.0, bugs={"unchecked-release"})
    old = ask(deployment, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    w1, l1 = cluster.nodes["w1"], cluster.nodes["l1"]
    w1.signal(w1.daemon("agent"), signal.SIGSTOP)
    try:
        new = ask(deployment, "w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"]
        write = {"op": "write", "lock": "L", "sink": "owned", "key": "k"}
        assert ask(deployment, "w2", {**write, "epoch": new, "id": "w2-1"}) == {"ok": True}
        # w2 stops renewing, so that only w1's renewals set the lock from here on.
        assert ask(deployment, "w2", {"op": "release", "lock": "L"}) == {"ok": True}
    finally:
        w1.signal(w1.daemon("agent"), signal.SIGCONT)
    # w1's renewal (every TTL/3) sets the lock to its own value again: it believes it holds it.
    wait_until(lambda: redis_cli(l1, "GET", "lock:L") == f"w1/{old}", "w1 to take the lock back")
    assert ask(deployment, "w1", {**write, "epoch": old, "id": "w1-1"}) == {"ok": True}
    read = ask(deployment, "w2", {"op": "read", "sink": "owned", "key": "k"})
    # An older grant's write accepted after a newer one's: the stale write the checker reports.
    assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new), ("w1-1", old)]
    assert old < new
