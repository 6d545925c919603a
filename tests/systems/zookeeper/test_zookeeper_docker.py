"""The zookeeper system on a real three-member ensemble: czxid tokens, the multi fence, a killed
leader, and the switches."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import pytest
from localcluster import wait_until
from realsystems import ask, pause_inside_write, running, system_image

from harness.node.docker.cluster import Cluster, NodeSpec
from systems import Deployment, SystemConfig
from systems.zookeeper import PACKAGES, ZooKeeperSystem

pytestmark = pytest.mark.docker

TOPOLOGY = (
    *(NodeSpec(f"z{number}", "lock") for number in (1, 2, 3)),
    NodeSpec("w1", "worker"),
    NodeSpec("w2", "worker"),
)
SESSION_S = 2.0


class Start(Protocol):
    def __call__(self, **config: Any) -> AbstractContextManager[tuple[Cluster, Deployment]]: ...


@pytest.fixture(scope="module")
def zookeeper_image() -> str:
    return system_image(PACKAGES)


@pytest.fixture
def start(zookeeper_image: str) -> Iterator[Start]:
    """``start(**config)``: the ensemble on z1..z3 and agents on w1, w2."""
    yield lambda **config: running(
        ZooKeeperSystem(), zookeeper_image, TOPOLOGY, SystemConfig(SESSION_S, **config)
    )


def acquire(deployment: Deployment, worker: str) -> int:
    epoch: int = ask(deployment, worker, {"op": "acquire", "lock": "L", "wait": 30})["epoch"]
    return epoch


def entries(deployment: Deployment, sink: str) -> list[tuple[str, int]]:
    read = ask(deployment, "w2", {"op": "read", "sink": sink, "key": "k"})
    return [(entry["id"], entry["epoch"]) for entry in read["entries"]]


def test_a_stale_holder_is_fenced_off_and_a_killed_leader_changes_nothing(start: Start) -> None:
    system = ZooKeeperSystem()
    with start() as (cluster, deployment):
        modes = sorted(system.mode(cluster.nodes[f"z{number}"]) for number in (1, 2, 3))
        assert modes == ["follower", "follower", "leader"]
        old, new, reply = pause_inside_write(cluster, deployment, "store", 3000)
        assert new > old
        # Refused by the multi's check, or lost with the expired session: never accepted.
        assert reply["ok"] is False
        assert entries(deployment, "store") == [("w2-1", new)]

        leader = system.lock_leader(cluster.nodes)
        assert leader is not None
        node = cluster.nodes[leader]
        daemon = node.daemon("zookeeper")
        node.signal(daemon, signal.SIGKILL)
        wait_until(lambda: node.process_state(daemon) in (None, "Z"), "the leader to die")
        wait_until(lambda: system.lock_leader(cluster.nodes) not in (None, leader), "a new leader")
        target = next(t for t in deployment.targets_for("lock") if t.node == leader)
        system.restart(node, target)
        assert system.mode(node) == "follower"
        assert ask(deployment, "w2", {"op": "release", "lock": "L"}) == {"ok": True}
        after = acquire(deployment, "w1")
        assert after > new
        read = ask(deployment, "w1", {"op": "read", "sink": "store", "key": "k"})
        assert [entry["id"] for entry in read["entries"]] == ["w2-1"]
        assert read["entries"][0]["seq"] > new


def test_trust_is_acquired_a_holder_back_from_an_expired_session_writes(start: Start) -> None:
    with start(bugs={"trust-is-acquired"}) as (cluster, deployment):
        old = acquire(deployment, "w1")
        w1 = cluster.nodes["w1"]
        write = {"op": "write", "lock": "L", "sink": "store", "key": "k"}
        w1.signal(w1.daemon("agent"), signal.SIGSTOP)
        try:
            new = acquire(deployment, "w2")  # granted once w1's session expired
            assert ask(deployment, "w2", {**write, "epoch": new, "id": "w2-1"}) == {"ok": True}
        finally:
            w1.signal(w1.daemon("agent"), signal.SIGCONT)
        # kazoo's Lock.is_acquired stays True: w1 renews its belief and writes.
        wait_until(
            lambda: ask(deployment, "w1", {"op": "holds"})["holds"].get("L") == old,
            "w1 to believe it holds L again",
        )
        assert ask(deployment, "w1", {**write, "epoch": old, "id": "w1-1"}) == {"ok": True}
        assert old < new
        assert entries(deployment, "store") == [("w2-1", new), ("w1-1", old)]


def test_sequence_token_restarts_when_the_locks_parent_is_recreated(start: Start) -> None:
    with start(bugs={"sequence-token"}) as (_, deployment):
        first = acquire(deployment, "w1")
        # Nobody waits: the release removes the empty parent, and the next lock node is numbered
        # from 0 again.
        assert ask(deployment, "w1", {"op": "release", "lock": "L"}) == {"ok": True}
        second = acquire(deployment, "w2")
        assert second <= first
