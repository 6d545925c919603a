"""The agent, driven over its wire protocol against the reference system on local processes."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness.nodeside.agent import Agent, AgentConfig, load_client
from harness.nodeside.client import STALE, Accepted, Refused
from tests.support.localcluster import (
    LocalCluster,
    MakeCluster,
    entries,
    log_lines,
    wait_dead,
    wait_until,
)


def acquire(cluster: LocalCluster, worker: str, lock: str = "L", wait: float = 20.0) -> int:
    reply = cluster.agent(worker, {"op": "acquire", "lock": lock, "wait": wait})
    assert reply["ok"], reply
    epoch = reply["epoch"]
    assert isinstance(epoch, int)
    return epoch


def write(
    cluster: LocalCluster, worker: str, epoch: int, write_id: str, **extra: Any
) -> dict[str, Any]:
    request = {"op": "write", "lock": "L", "epoch": epoch, "sink": "store", "key": "k"}
    return cluster.agent(worker, {**request, "id": write_id, **extra})


def fenced_read(cluster: LocalCluster, worker: str, epoch: int) -> dict[str, Any]:
    request = {"op": "read", "sink": "store", "key": "k", "lock": "L", "epoch": epoch}
    return cluster.agent(worker, request)


def read(cluster: LocalCluster, sink: str = "store") -> list[tuple[str, int]]:
    """Key ``k`` of ``sink``, read through the last worker (never the one a test pauses)."""
    reader = sorted(cluster.agents.endpoints)[-1]
    return entries(cluster.agent(reader, {"op": "read", "sink": sink, "key": "k"}))


def holds(cluster: LocalCluster, worker: str) -> dict[str, Any]:
    reply = cluster.agent(worker, {"op": "holds"})
    assert reply["ok"], reply
    return reply


@contextmanager
def paused_mid_write(
    cluster: LocalCluster, sink: str
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """w1 takes the lease, starts a write to ``sink`` and is SIGSTOPped inside its critical
    section for the duration of the block; yields w1's epoch and the list its reply lands in."""
    old = acquire(cluster, "w1")
    replies: list[dict[str, Any]] = []
    request = {"sink": sink, "work_ms": 3000}
    writer = threading.Thread(
        target=lambda: replies.append(write(cluster, "w1", old, "w1-1", **request))
    )
    writer.start()
    wait_until(lambda: "w1-1" in holds(cluster, "w1")["working"], "w1's critical section")
    cluster.signal("w1", signal.SIGSTOP)
    try:
        yield old, replies
    finally:
        cluster.signal("w1", signal.SIGCONT)
        writer.join(timeout=60)


@contextmanager
def lease_run_out(cluster: LocalCluster, worker: str) -> Iterator[None]:
    """The lock server is stopped, so renewals hang, until ``worker``'s lease on L has run out by
    its own clock; it stays stopped for the block."""
    cluster.signal("l1", signal.SIGSTOP)
    try:
        wait_until(lambda: "L" not in holds(cluster, worker)["holds"], f"{worker}'s lease to end")
        yield
    finally:
        cluster.signal("l1", signal.SIGCONT)


def paused_holder_writes(cluster: LocalCluster, sink: str = "store") -> tuple[dict[str, Any], int]:
    """While w1 is paused mid-write, w2 takes the lease over and writes. Returns w1's write reply
    (after it was continued) and w2's epoch."""
    with paused_mid_write(cluster, sink) as (old, replies):
        new = acquire(cluster, "w2")  # granted once w1's unrenewed lease has run out
        assert new > old
        assert write(cluster, "w2", new, "w2-1", sink=sink) == {"ok": True, "seq": 1}
    assert replies, "w1's write never answered"
    return replies[0], new


@pytest.mark.parametrize(
    ("bugs", "sink"),
    [((), "store"), ((), "store-batch"), (("unfenced-path",), "store")],
)
def test_a_paused_holders_write_is_refused_by_the_fence(
    make_cluster: MakeCluster, bugs: tuple[str, ...], sink: str
) -> None:
    cluster = make_cluster(workers=2, bugs=bugs)
    reply, new = paused_holder_writes(cluster, sink)
    assert reply == {"ok": False, "error": "stale-epoch"}
    assert read(cluster, sink) == [("w2-1", new)]
    assert "L" not in holds(cluster, "w1")["holds"]
    assert any("releasing it, its write was refused" in line for line in log_lines(cluster, "w1"))


@pytest.mark.parametrize(
    ("bugs", "sink"),
    [
        (("no-store-check",), "store"),
        (("long-ttl-no-fence",), "store"),
        (("unfenced-path",), "store-batch"),
    ],
)
def test_without_the_fence_the_paused_holders_write_lands_after_a_newer_one(
    make_cluster: MakeCluster, bugs: tuple[str, ...], sink: str
) -> None:
    # long-ttl-no-fence multiplies the TTL by 5: 0.5 s becomes 2.5 s, and w1 stays paused until
    # w2 holds the lease. Not 0.2 s: on a loaded machine w2's own renewals then came so late that
    # its agent refused its write as not held.
    cluster = make_cluster(workers=2, bugs=bugs, lease_ttl=0.5)
    reply, new = paused_holder_writes(cluster, sink)
    assert reply == {"ok": True, "seq": 2}  # the store numbers it after the newer write
    assert read(cluster, sink) == [("w2-1", new), ("w1-1", new - 1)]


@pytest.mark.parametrize(("bugs", "fenced_off"), [((), True), (("no-store-check",), False)])
def test_a_new_holders_fenced_read_fences_off_a_paused_holders_write(
    make_cluster: MakeCluster, bugs: tuple[str, ...], fenced_off: bool
) -> None:
    # The read-modify-write race: the new holder has read but not yet written when the old
    # holder's write arrives. Accepting it would let the new holder's write build on a stale read.
    cluster = make_cluster(workers=2, bugs=bugs)
    with paused_mid_write(cluster, "store") as (old, replies):
        new = acquire(cluster, "w2")
        assert fenced_read(cluster, "w2", new) == {"ok": True, "entries": []}
    landed = {"ok": True, "seq": 1}
    assert replies == [{"ok": False, "error": "stale-epoch"} if fenced_off else landed]
    assert read(cluster) == ([] if fenced_off else [("w1-1", old)])


@pytest.mark.parametrize(
    ("bugs", "again"), [((), "not-held"), (("retry-on-reject",), "stale-epoch")]
)
def test_a_refused_fenced_read_gives_the_lease_up_unless_retry_on_reject(
    make_cluster: MakeCluster, bugs: tuple[str, ...], again: str
) -> None:
    cluster = make_cluster(lease_ttl=5.0, bugs=bugs)
    epoch = acquire(cluster, "w1")
    # A newer epoch reached the store without the lock service (as a paused holder's successor
    # would have): w1's lease is valid by its own clock, yet the store has moved on.
    assert cluster.client().write("L", "store", "k", "newer", epoch + 1, None) == Accepted(1)
    assert fenced_read(cluster, "w1", epoch) == {"ok": False, "error": "stale-epoch"}
    assert fenced_read(cluster, "w1", epoch) == {"ok": False, "error": again}
    kept = again == "stale-epoch"
    assert ("L" in holds(cluster, "w1")["holds"]) is kept
    released = any(
        "releasing it, its read was refused" in line for line in log_lines(cluster, "w1")
    )
    assert released is not kept


def test_a_fenced_read_needs_a_valid_lease_of_that_epoch(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    assert fenced_read(cluster, "w1", 1) == {"ok": False, "error": "not-held"}
    epoch = acquire(cluster, "w1")
    assert fenced_read(cluster, "w1", epoch + 1) == {"ok": False, "error": "not-held"}
    with lease_run_out(cluster, "w1"):
        assert fenced_read(cluster, "w1", epoch) == {"ok": False, "error": "lease-expired"}
    # None of the refused reads reached the store: a write of an epoch below them is accepted.
    assert cluster.client().write("L", "store", "k", "low", epoch, None) == Accepted(1)
    reply = cluster.agent("w1", {"op": "read", "sink": "store", "key": "k", "epoch": epoch})
    assert reply["error"] == "bad-request"


def test_an_unanswered_fenced_read_is_indefinite(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(client_timeout=0.5, lease_ttl=5.0)
    epoch = acquire(cluster, "w1")
    cluster.signal("s1", signal.SIGSTOP)
    try:
        reply = fenced_read(cluster, "w1", epoch)
    finally:
        cluster.signal("s1", signal.SIGCONT)
    assert (reply["error"], reply["info"]) == ("unavailable", True)


@pytest.mark.parametrize(
    ("bugs", "retry_error"), [((), "not-held"), (("retry-on-reject",), "stale-epoch")]
)
def test_a_retry_of_a_refused_write_reaches_the_store_only_with_retry_on_reject(
    make_cluster: MakeCluster, bugs: tuple[str, ...], retry_error: str
) -> None:
    cluster = make_cluster(workers=2, bugs=bugs)
    reply, new = paused_holder_writes(cluster)
    assert reply["error"] == "stale-epoch"
    retried = write(cluster, "w1", new - 1, "w1-2")
    assert retried == {"ok": False, "error": retry_error}
    assert read(cluster) == [("w2-1", new)]


def test_a_holder_refuses_to_write_once_its_lease_ran_out(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    epoch = acquire(cluster, "w1")
    assert write(cluster, "w1", epoch, "w1-1") == {"ok": True, "seq": 1}
    with lease_run_out(cluster, "w1"):
        assert write(cluster, "w1", epoch, "w1-2") == {"ok": False, "error": "lease-expired"}
    assert read(cluster) == [("w1-1", epoch)]


def test_writes_need_the_lease_of_that_epoch(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    assert write(cluster, "w1", 1, "w1-0") == {"ok": False, "error": "not-held"}
    epoch = acquire(cluster, "w1")
    assert write(cluster, "w1", epoch + 1, "w1-1") == {"ok": False, "error": "not-held"}
    assert holds(cluster, "w1")["holds"] == {"L": epoch}
    assert cluster.agent("w1", {"op": "release", "lock": "L"}) == {"ok": True}
    assert cluster.agent("w1", {"op": "release", "lock": "L"}) == {"ok": False, "error": "not-held"}
    assert write(cluster, "w1", epoch, "w1-2") == {"ok": False, "error": "not-held"}
    assert read(cluster) == []


def test_acquiring_a_held_lock_again_replaces_the_lease(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    first = acquire(cluster, "w1", wait=0.0)
    second = acquire(cluster, "w1", wait=0.0)  # the first lease is released, not waited out
    assert second == first + 1
    assert holds(cluster, "w1")["holds"] == {"L": second}


def test_a_blocked_acquire_does_not_hold_up_other_connections(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(workers=2, lease_ttl=5.0)
    held = acquire(cluster, "w1")
    waited: list[int] = []
    waiter = threading.Thread(target=lambda: waited.append(acquire(cluster, "w2", wait=60.0)))
    waiter.start()
    try:
        assert cluster.agent("w2", {"op": "ping"})["node"] == "w2"
        assert holds(cluster, "w2")["holds"] == {}
    finally:
        assert cluster.agent("w1", {"op": "release", "lock": "L"}) == {"ok": True}
        waiter.join(timeout=60)
    assert waited == [held + 1]


def test_an_unreachable_store_is_a_definite_failure(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    epoch = acquire(cluster, "w1")
    store = cluster.nodes["s1"]
    daemon = store.daemon("store")
    store.signal(daemon, signal.SIGKILL)
    wait_dead(store, daemon)
    assert write(cluster, "w1", epoch, "w1-1") == {"ok": False, "error": "unavailable"}
    reply = cluster.agent("w1", {"op": "read", "sink": "store", "key": "k"})
    assert reply == {"ok": False, "error": "unavailable"}


def test_an_unanswered_write_is_indefinite_and_may_still_land(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(client_timeout=0.5, lease_ttl=5.0)
    epoch = acquire(cluster, "w1")
    cluster.signal("s1", signal.SIGSTOP)
    try:
        reply = write(cluster, "w1", epoch, "w1-1")
    finally:
        cluster.signal("s1", signal.SIGCONT)
    assert reply["ok"] is False
    assert reply["error"] == "unavailable"
    assert reply["info"] is True
    wait_until(lambda: read(cluster) == [("w1-1", epoch)], "the unanswered write to land")


def test_a_restarted_agent_answers_and_holds_nothing(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    acquire(cluster, "w1")
    old_pid = cluster.agent("w1", {"op": "ping"})["pid"]
    cluster.kill_and_restart("w1")
    assert cluster.agent("w1", {"op": "ping"})["pid"] != old_pid
    assert holds(cluster, "w1")["holds"] == {}


def test_malformed_requests_get_a_reason_and_keep_the_connection(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster()
    endpoint = cluster.agents.endpoints["w1"]
    with socket.create_connection((endpoint.host, endpoint.port), timeout=30) as conn:
        stream = conn.makefile("rwb")
        auth = f'"auth":"{cluster.agents.token}"'.encode()
        fly, half = b'{"op":"fly",' + auth + b"}\n", b'{"op":"write","lock":"L",' + auth + b"}\n"
        for line in (b"not json\n", b"[1]\n", fly, half):
            stream.write(line)
            stream.flush()
            assert b'"error":"bad-request"' in stream.readline()
        stream.write(b'{"op":"ping","req":42}\n')
        stream.flush()
        assert b'"req":42' in stream.readline()


def test_lock_delay_keeps_the_next_holder_out_while_a_paused_one_may_still_write(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(workers=2, lock_delay=60.0)
    with paused_mid_write(cluster, "audit") as (old, replies):
        refused = cluster.agent("w2", {"op": "acquire", "lock": "L", "wait": 1.0})
        assert refused == {"ok": False, "error": "timeout"}
    assert replies == [{"ok": True, "seq": 1}]
    assert read(cluster, "audit") == [("w1-1", old)]


def test_short_lock_delay_lets_a_paused_holders_write_reach_the_audit_sink_late(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(workers=2, lock_delay=60.0, bugs=["short-lock-delay"])
    reply, new = paused_holder_writes(cluster, "audit")
    # The audit sink cannot refuse: only the lock-delay protects it.
    assert reply == {"ok": True, "seq": 2}
    assert read(cluster, "audit") == [("w2-1", new), ("w1-1", new - 1)]


def test_a_client_module_may_define_dataclasses(tmp_path: Path) -> None:
    # A dataclass looks its module up in sys.modules while it is being created.
    module = tmp_path / "client.py"
    module.write_text(
        "from __future__ import annotations\n"
        "from dataclasses import dataclass\n\n"
        "@dataclass\nclass Settings:\n    where: str\n\n"
        "class Client:\n"
        "    def __init__(self, config):\n"
        "        self.settings = Settings(config['where'])\n"
    )
    client = load_client(str(module), {"where": "e1:2379"})
    assert client.settings.where == "e1:2379"  # type: ignore[attr-defined]


def test_a_write_spanning_keys_lands_on_every_key_or_none(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(workers=2)
    old = acquire(cluster, "w1")
    also = [{"key": "k2", "id": "w1-2"}, {"key": "k3", "id": "w1-3"}]
    reply = write(cluster, "w1", old, "w1-1", also=also)
    assert reply == {
        "ok": True,
        "seq": 1,
        "also": [{"key": "k2", "id": "w1-2", "seq": 2}, {"key": "k3", "id": "w1-3", "seq": 3}],
    }
    reader = sorted(cluster.agents.endpoints)[-1]
    for key, wid in (("k", "w1-1"), ("k2", "w1-2"), ("k3", "w1-3")):
        shown = cluster.agent(reader, {"op": "read", "sink": "store", "key": key})
        assert entries(shown) == [(wid, old)]
    cluster.agent("w1", {"op": "release", "lock": "L"})
    new = acquire(cluster, "w2")
    assert write(cluster, "w2", new, "w2-1")["ok"]
    # The old epoch is below the store's mark: the whole spanning write is refused.
    stale = cluster.client().write_keys("L", "store", [("k4", "x-1"), ("k5", "x-2")], old)
    assert stale == Refused(STALE)
    for key in ("k4", "k5"):
        assert entries(cluster.agent(reader, {"op": "read", "sink": "store", "key": key})) == []


def test_an_agent_whose_client_cannot_span_keys_refuses_such_a_write(tmp_path: Path) -> None:
    module = tmp_path / "plain.py"
    module.write_text(
        "class Client:\n"
        "    def __init__(self, config): pass\n"
        "    def acquire(self, lock, ttl, wait): pass\n"
        "    def renew(self, lock, epoch): return True\n"
        "    def release(self, lock, epoch): return True\n"
        "    def write(self, lock, sink, key, id, epoch, prev): pass\n"
        "    def read(self, sink, key, lock=None, epoch=None): pass\n"
    )
    agent = Agent("w1", load_client(str(module), {}), AgentConfig(ttl=1.0))
    request = {"op": "write", "lock": "L", "epoch": 1, "sink": "store", "key": "k", "id": "a"}
    reply = agent.handle({**request, "also": [{"key": "k2", "id": "b"}]})
    assert reply["ok"] is False
    assert reply["error"] == "bad-request"


def test_the_acquire_reply_carries_the_services_grant_seq_and_how_long_it_waited(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(workers=2, lease_ttl=1.0)
    first = cluster.agent("w1", {"op": "acquire", "lock": "L", "wait": 5.0})
    waiter: list[dict[str, Any]] = []
    thread = threading.Thread(
        target=lambda: waiter.append(
            cluster.agent("w2", {"op": "acquire", "lock": "L", "wait": 20.0})
        )
    )
    thread.start()
    time.sleep(0.3)  # w2 waits for w1's lease
    assert cluster.agent("w1", {"op": "release", "lock": "L"})["ok"]
    thread.join(timeout=30)
    (second,) = waiter
    assert (first["grant_seq"], second["grant_seq"]) == (1, 2)
    assert type(second["waited"]) is int and second["waited"] >= 200_000_000


@pytest.mark.parametrize("bug", [False, True])
def test_a_waiter_paused_past_its_session_is_refused_or_granted_with_its_evidence(
    make_cluster: MakeCluster, bug: bool
) -> None:
    cluster = make_cluster(
        workers=2, lease_ttl=0.5, bugs=["grant-to-expired-waiter"] if bug else []
    )
    assert cluster.agent("w1", {"op": "acquire", "lock": "L", "wait": 5.0})["ok"]
    waiter: list[dict[str, Any]] = []
    thread = threading.Thread(
        target=lambda: waiter.append(
            cluster.agent("w2", {"op": "acquire", "lock": "L", "wait": 20.0})
        )
    )
    thread.start()
    time.sleep(0.2)  # w2 waits for w1's lease under its session
    cluster.signal("w2", signal.SIGSTOP)
    try:
        time.sleep(1.5)  # three of w2's TTLs without a keepalive: the service ends its session
        released = cluster.agent("w1", {"op": "release", "lock": "L"})
        # The bug grants w2 at its session's end, over w1's lease; else w1 still holds it.
        assert released["ok"] is not bug
    finally:
        cluster.signal("w2", signal.SIGCONT)
    thread.join(timeout=30)
    (answer,) = waiter
    if not bug:
        assert answer == {"ok": False, "error": "expired"}
        return
    assert answer["ok"] is True
    ended = answer["lease_ended"]
    assert ended["how"] == "expired"
    assert ended["grant_seq"] < answer["grant_seq"]  # granted after its session ended
    assert cluster.agent("w2", {"op": "holds"})["holds"] == {}  # it gave the lease back


_ENDED_ON_THE_SERVICE = (
    "from harness.nodeside.client import Accepted, Grant\n"
    "class Client:\n"
    "    def __init__(self, config): self.written, self.ended = [], False\n"
    "    def acquire(self, lock, ttl, wait): return Grant(1)\n"
    "    def renew(self, lock, epoch): return not self.ended\n"
    "    def release(self, lock, epoch): return False\n"
    "    def write(self, lock, sink, key, id, epoch, prev):\n"
    "        self.written.append((sink, id)); return Accepted()\n"
    "    def read(self, sink, key, lock=None, epoch=None): pass\n"
)


@pytest.mark.parametrize("flawed", [False, True])
def test_a_timed_sink_is_written_only_once_the_service_confirms_the_lease(
    tmp_path: Path, flawed: bool
) -> None:
    # The holder's own clock says its lease runs on (a slow clock's view); the service ended
    # it. Past the first half of the lease, only the flawed holder trusts its clock. (A TTL of
    # 600 s: no renewal comes; the test moves the lease's start back instead of waiting.)
    module = tmp_path / "ended.py"
    module.write_text(_ENDED_ON_THE_SERVICE)
    client = load_client(str(module), {})
    flaws = frozenset({"trust-own-timer"}) if flawed else frozenset()
    config = AgentConfig(ttl=600.0, flaws=flaws, timed_sinks=frozenset({"audit"}))
    config = AgentConfig.from_json(config.to_json())
    agent = Agent("w1", client, config)
    assert agent.handle({"op": "acquire", "lock": "L", "wait": 0.0})["ok"]
    request = {"op": "write", "lock": "L", "epoch": 1, "key": "k"}
    early = agent.handle({**request, "sink": "audit", "id": "early"})
    assert early == {"ok": True}  # the first half: its own clock is trusted
    client.ended = True  # type: ignore[attr-defined]
    agent._leases["L"].renewed -= 400.0  # 400 s of the 600 s lease gone by the agent's clock
    fenced = agent.handle({**request, "sink": "store", "id": "s"})
    timed = agent.handle({**request, "sink": "audit", "id": "a"})
    assert fenced == {"ok": True}  # a fence judges it: the holder's own check is enough
    if flawed:
        assert timed == {"ok": True}
        written = [("audit", "early"), ("store", "s"), ("audit", "a")]
        assert client.written == written  # type: ignore[attr-defined]
    else:
        assert timed == {"ok": False, "error": "lease-expired"}
        assert client.written == [("audit", "early"), ("store", "s")]  # type: ignore[attr-defined]
        assert agent.handle({"op": "holds"})["holds"] == {}
