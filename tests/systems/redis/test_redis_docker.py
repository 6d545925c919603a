"""The redis system on real containers: tokens, fences, persistence across SIGKILL, the switches."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import pytest
from localcluster import wait_until
from realsystems import ask, pause_inside_write, running, system_image

from harness.node import Node
from harness.node.docker.cluster import Cluster, NodeSpec
from systems import Deployment, SystemConfig
from systems.redis import PACKAGES, RedisSystem

pytestmark = pytest.mark.docker

TOPOLOGY = (NodeSpec("l1", "lock"), NodeSpec("w1", "worker"), NodeSpec("w2", "worker"))


class Start(Protocol):
    def __call__(self, **config: Any) -> AbstractContextManager[tuple[Cluster, Deployment]]: ...


@pytest.fixture(scope="module")
def redis_image() -> str:
    return system_image(PACKAGES)


@pytest.fixture
def start(redis_image: str) -> Iterator[Start]:
    """``start(**config)``: Redis on l1 and agents on w1, w2 under ``SystemConfig(**config)``."""
    yield lambda **config: running(RedisSystem(), redis_image, TOPOLOGY, SystemConfig(**config))


def redis_cli(node: Node, *command: str) -> str:
    return node.run(["redis-cli", "-h", node.ip, *command], check=True).stdout.strip()


def kill_and_restart(cluster: Cluster, deployment: Deployment) -> None:
    """SIGKILL Redis (no chance to flush) and start it again as after the kill nemesis."""
    l1 = cluster.nodes["l1"]
    server = l1.daemon("redis-server")
    l1.signal(server, signal.SIGKILL)
    wait_until(lambda: l1.process_state(server) in (None, "Z"), "Redis to die")
    RedisSystem().restart(l1, deployment.targets_for("lock")[0])


def acquire(deployment: Deployment, worker: str) -> int:
    epoch: int = ask(deployment, worker, {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    return epoch


def test_a_stale_holder_is_fenced_off_and_a_kill_forgets_nothing(start: Start) -> None:
    with start(lease_ttl=1.0) as (cluster, deployment):
        old, new, reply = pause_inside_write(cluster, deployment, "store", 2500)
        assert new > old
        assert reply == {"ok": False, "error": "stale-epoch"}
        read = ask(deployment, "w2", {"op": "read", "sink": "store", "key": "k"})
        assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new)]
        write = {"op": "write", "lock": "L", "epoch": new, "sink": "log", "key": "k", "id": "w2-2"}
        assert ask(deployment, "w2", write) == {"ok": True}

        kill_and_restart(cluster, deployment)
        ask(deployment, "w2", {"op": "release", "lock": "L"})
        after = acquire(deployment, "w1")
        assert after > new
        read = ask(deployment, "w1", {"op": "read", "sink": "store", "key": "k"})
        assert [e["id"] for e in read["entries"]] == ["w2-1"]
        assert read["entries"][0]["seq"] >= 1
        fenced_read = {"op": "read", "sink": "store", "key": "k", "lock": "L", "epoch": after}
        assert ask(deployment, "w1", fenced_read)["ok"] is True
        assert redis_cli(cluster.nodes["l1"], "GET", "mark:L") == str(after)


def test_the_owned_sink_refuses_a_holder_whose_grant_is_gone(start: Start) -> None:
    with start(lease_ttl=1.0) as (cluster, deployment):
        _, new, reply = pause_inside_write(cluster, deployment, "owned", 2500)
        assert reply == {"ok": False, "error": "not-owner"}
        read = ask(deployment, "w2", {"op": "read", "sink": "owned", "key": "k"})
        assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new)]


def test_no_aof_a_kill_forgets_the_counter(start: Start) -> None:
    with start(lease_ttl=1.0, bugs={"no-aof"}) as (cluster, deployment):
        epochs = [acquire(deployment, "w1") for _ in range(3)]
        assert epochs == sorted(set(epochs))
        kill_and_restart(cluster, deployment)
        assert acquire(deployment, "w2") <= epochs[-1]


def test_random_value_token_the_token_is_the_locks_random_value(start: Start) -> None:
    with start(bugs={"random-value-token"}) as (cluster, deployment):
        epoch = acquire(deployment, "w1")
        assert redis_cli(cluster.nodes["l1"], "GET", "lock:L") == f"w1/{epoch}"
        assert redis_cli(cluster.nodes["l1"], "EXISTS", "epoch:L") == "0"


def test_unchecked_release_a_resumed_holder_takes_the_lock_back(start: Start) -> None:
    with start(lease_ttl=1.0, bugs={"unchecked-release"}) as (cluster, deployment):
        old = acquire(deployment, "w1")
        w1, l1 = cluster.nodes["w1"], cluster.nodes["l1"]
        write = {"op": "write", "lock": "L", "sink": "owned", "key": "k"}
        w1.signal(w1.daemon("agent"), signal.SIGSTOP)
        try:
            new = ask(deployment, "w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"]
            assert ask(deployment, "w2", {**write, "epoch": new, "id": "w2-1"}) == {"ok": True}
            # w2 stops renewing, so that only w1's renewals set the lock from here on.
            assert ask(deployment, "w2", {"op": "release", "lock": "L"}) == {"ok": True}
        finally:
            w1.signal(w1.daemon("agent"), signal.SIGCONT)
        # w1's renewal (every TTL/3) sets the lock to its own value again: it believes it holds it.
        wait_until(lambda: redis_cli(l1, "GET", "lock:L") == f"w1/{old}", "w1 to retake the lock")
        assert ask(deployment, "w1", {**write, "epoch": old, "id": "w1-1"}) == {"ok": True}
        read = ask(deployment, "w2", {"op": "read", "sink": "owned", "key": "k"})
        # An older grant's write accepted after a newer one's: the stale write the checker reports.
        assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new), ("w1-1", old)]
        assert old < new
