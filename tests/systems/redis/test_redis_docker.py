"""The redis system on real containers: tokens, fences, persistence across SIGKILL, failover to
the replica, the switches."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

from harness.node import NodeError
from nemeses.partition import PartitionNemesis
from nemeses.topology import partition_fault
from systems import AdapterError, SystemConfig
from systems.redis import RedisSystem
from tests.support.localcluster import wait_until
from tests.support.realsystems import Running, ask, pause_inside_write, running

pytestmark = pytest.mark.docker


def start(**config: Any) -> AbstractContextManager[Running]:
    """Redis on r1 and agents on w1, w2 under ``SystemConfig(**config)``."""
    return running(RedisSystem(), SystemConfig(**config))


def redis_cli(run: Running, *command: str, password: str | None = None, node: str = "r1") -> str:
    """Run a command with redis-cli on ``node``, by default with the run's secret as password."""
    server = run.cluster.nodes[node]
    auth = {"REDISCLI_AUTH": password or run.agents.token or ""}
    return server.run(["redis-cli", "-h", server.ip, *command], check=True, env=auth).stdout.strip()


def kill_and_restart(run: Running) -> None:
    """SIGKILL the primary (no chance to flush), start it again as after the kill nemesis, and
    wait until the replica has copied it again."""
    r1 = run.cluster.nodes["r1"]
    server = r1.daemon("redis-server")
    r1.signal(server, signal.SIGKILL)
    wait_until(lambda: r1.process_state(server) in (None, "Z"), "Redis to die")
    RedisSystem().restart(r1, "redis-server")
    # The replica copies the restarted primary again before anything may count.
    link = "master_link_status:up"
    wait_until(lambda: link in redis_cli(run, "info", "replication", node="r2"), "r2's resync")


def acquire(run: Running, worker: str) -> int:
    epoch: int = ask(run, worker, {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    return epoch


def test_a_stale_holder_is_fenced_off_and_a_kill_forgets_nothing() -> None:
    with start(lease_ttl=1.0) as run:
        old, new, reply = pause_inside_write(run, "store", 2500)
        assert new > old
        assert reply == {"ok": False, "error": "stale-epoch"}
        read = ask(run, "w2", {"op": "read", "sink": "store", "key": "k"})
        assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new)]
        write = {"op": "write", "lock": "L", "epoch": new, "sink": "log", "key": "k", "id": "w2-2"}
        assert ask(run, "w2", write) == {"ok": True}

        kill_and_restart(run)
        ask(run, "w2", {"op": "release", "lock": "L"})
        after = acquire(run, "w1")
        assert after > new
        read = ask(run, "w1", {"op": "read", "sink": "store", "key": "k"})
        assert [e["id"] for e in read["entries"]] == ["w2-1"]
        assert read["entries"][0]["seq"] >= 1
        fenced_read = {"op": "read", "sink": "store", "key": "k", "lock": "L", "epoch": after}
        assert ask(run, "w1", fenced_read)["ok"] is True
        assert redis_cli(run, "GET", "mark-store:L") == str(after)


def test_only_the_run_may_use_the_server() -> None:
    with start() as run:
        assert redis_cli(run, "PING") == "PONG"
        assert redis_cli(run, "PING", password="guess").startswith(("NOAUTH", "WRONGPASS"))


def test_fenced_writes_report_the_sinks_own_order_across_keys() -> None:
    with start() as run:
        epoch = acquire(run, "w1")
        seqs = []
        for number, key in enumerate(("a", "b", "a")):
            write = {"op": "write", "lock": "L", "epoch": epoch, "sink": "store", "key": key}
            seqs.append(ask(run, "w1", {**write, "id": f"w1-{number}"})["seq"])
        assert seqs == sorted(set(seqs))
        read = ask(run, "w1", {"op": "read", "sink": "store", "key": "a"})
        assert [e["seq"] for e in read["entries"]] == [seqs[0], seqs[2]]


def test_the_owned_sink_refuses_a_holder_whose_grant_is_gone() -> None:
    with start(lease_ttl=1.0) as run:
        _, new, reply = pause_inside_write(run, "owned", 2500)
        assert reply == {"ok": False, "error": "stale-epoch"}  # w2's epoch reached it first
        read = ask(run, "w2", {"op": "read", "sink": "owned", "key": "k"})
        assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new)]
        # w2's grant lapses with nobody after it: refused, but not as stale.
        redis_cli(run, "DEL", "lock:L")
        write = {"op": "write", "lock": "L", "epoch": new, "sink": "owned", "key": "k"}
        late = {**write, "id": "w2-2", "check_lease": False}
        assert ask(run, "w2", late) == {"ok": False, "error": "not-owner"}


def test_grant_seq_is_the_grant_counter_taken_where_the_lease_is_won() -> None:
    with start(lease_ttl=1.0) as run:
        first = ask(run, "w1", {"op": "acquire", "lock": "L", "wait": 10})
        assert ask(run, "w1", {"op": "release", "lock": "L"})["ok"]
        second = ask(run, "w2", {"op": "acquire", "lock": "L", "wait": 10})
        assert (first["grant_seq"], second["grant_seq"]) == (first["epoch"], second["epoch"])
        assert second["grant_seq"] > first["grant_seq"]
        assert "lease_ended" not in second  # a waiter holds no lease of its own while it polls


def test_no_aof_a_kill_forgets_the_counter() -> None:
    with start(lease_ttl=1.0, bugs={"no-aof"}) as run:
        epochs = [acquire(run, "w1") for _ in range(3)]
        assert epochs == sorted(set(epochs))
        kill_and_restart(run)
        assert acquire(run, "w2") <= epochs[-1]


def test_random_value_token_the_token_is_the_locks_random_value() -> None:
    with start(bugs={"random-value-token"}) as run:
        granted = ask(run, "w1", {"op": "acquire", "lock": "L", "wait": 10})
        epoch = granted["epoch"]
        assert redis_cli(run, "GET", "lock:L") == f"w1/{epoch}"
        assert redis_cli(run, "EXISTS", "epoch:L") == "0"
        # The grants are still counted, in the step that wins the lease: Redis's grant_seq.
        assert granted["grant_seq"] == 1 == int(redis_cli(run, "GET", "grants:L"))


def test_unchecked_release_a_resumed_holder_takes_the_lock_back() -> None:
    with start(lease_ttl=1.0, bugs={"unchecked-release"}) as run:
        old = acquire(run, "w1")
        w1 = run.cluster.nodes["w1"]
        write = {"op": "write", "lock": "L", "sink": "owned", "key": "k"}
        w1.signal(w1.daemon("agent"), signal.SIGSTOP)
        try:
            new = ask(run, "w2", {"op": "acquire", "lock": "L", "wait": 20})["epoch"]
            assert ask(run, "w2", {**write, "epoch": new, "id": "w2-1"})["ok"] is True
            # w2 stops renewing, so that only w1's renewals set the lock from here on.
            assert ask(run, "w2", {"op": "release", "lock": "L"}) == {"ok": True}
        finally:
            w1.signal(w1.daemon("agent"), signal.SIGCONT)
        # w1's renewal (every TTL/3) sets the lock to its own value again: it believes it holds it.
        wait_until(lambda: redis_cli(run, "GET", "lock:L") == f"w1/{old}", "w1 to retake the lock")
        assert ask(run, "w1", {**write, "epoch": old, "id": "w1-1"})["ok"] is True
        read = ask(run, "w2", {"op": "read", "sink": "owned", "key": "k"})
        # An older grant's write accepted after a newer one's: the stale write the checker reports.
        assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new), ("w1-1", old)]
        assert old < new


@contextmanager
def replica_cut_off(run: Running) -> Iterator[None]:
    """Isolate r2 (the replica, and Sentinel with it) from every node, as the partition fault
    does, until Sentinel there has promoted it; heal on the way out."""
    nodes = run.cluster.nodes
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    try:
        nemesis.invoke("start-partition", partition_fault("isolate", ["r2"], list(nodes)))
        yield
        wait_until(lambda: primary(run) == "r2", "Sentinel to promote r2")
    finally:
        nemesis.heal()


def primary(run: Running) -> str | None:
    """The node Sentinel names as the primary (None while it cannot say)."""
    try:
        return RedisSystem().lock_leader(run.cluster.nodes)
    except AdapterError:
        return None


def demoted(run: Running) -> bool:
    """Whether Sentinel has made the old primary r1 a replica of r2 (after the partition)."""
    try:
        return "role:slave" in redis_cli(run, "info", "replication")
    except NodeError:
        return False  # r1 busy copying r2's data set


def test_a_failover_keeps_every_granted_epoch_and_the_holders_follow_it() -> None:
    with start(lease_ttl=1.0) as run:
        granted = [acquire(run, "w1") for _ in range(3)]
        write = {"op": "write", "lock": "L", "epoch": granted[-1], "sink": "store", "key": "k"}
        assert ask(run, "w1", {**write, "id": "w1-1"})["ok"] is True
        ask(run, "w1", {"op": "release", "lock": "L"})
        with replica_cut_off(run):
            # The primary still answers, but no replica acknowledges: no grant counts.
            refused = ask(run, "w1", {"op": "acquire", "lock": "L", "wait": 2})
            assert refused == {"ok": False, "error": "unavailable"}
        wait_until(lambda: demoted(run), "Sentinel to demote r1", limit=60)
        after = ask(run, "w2", {"op": "acquire", "lock": "L", "wait": 30})["epoch"]
        assert after > max(granted)
        assert ask(run, "w2", {**write, "epoch": after, "id": "w2-1"})["ok"] is True
        # The write acknowledged before the failover is on the new primary too.
        read = ask(run, "w2", {"op": "read", "sink": "store", "key": "k"})
        assert [e["id"] for e in read["entries"]] == ["w1-1", "w2-1"]


def test_async_failover_a_promoted_replica_grants_an_epoch_again() -> None:
    with start(lease_ttl=1.0, bugs={"async-failover"}) as run:
        acquire(run, "w1")
        granted = []
        with replica_cut_off(run):
            # r1 grants on while its replica, cut off, falls behind.
            for _ in range(3):
                granted.append(acquire(run, "w1"))
                ask(run, "w1", {"op": "release", "lock": "L"})
        wait_until(lambda: demoted(run), "Sentinel to demote r1", limit=60)
        again = ask(run, "w2", {"op": "acquire", "lock": "L", "wait": 30})["epoch"]
        assert again <= max(granted)
