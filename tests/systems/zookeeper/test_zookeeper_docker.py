"""The zookeeper system on a real three-member ensemble: czxid tokens, the multi fence, a killed
leader, and the switches."""

from __future__ import annotations

import json
import signal
import threading
from contextlib import AbstractContextManager
from typing import Any

import pytest

from nemeses import LOCK_FOLLOWER, generate_schedule, resolve
from nemeses.partition import PartitionNemesis
from systems import SystemConfig
from systems.zookeeper import ZooKeeperSystem
from tests.support.localcluster import wait_until
from tests.support.realsystems import Running, ask, pause_inside_write, running

pytestmark = pytest.mark.docker

SESSION_S = 2.0


def start(**config: Any) -> AbstractContextManager[Running]:
    """The ensemble on z1..z3 and agents on w1, w2, sessions of SESSION_S."""
    return running(ZooKeeperSystem(), SystemConfig(SESSION_S, **config))


def acquire(run: Running, worker: str) -> int:
    epoch: int = ask(run, worker, {"op": "acquire", "lock": "L", "wait": 30})["epoch"]
    return epoch


def entries(run: Running, sink: str) -> list[tuple[str, int]]:
    read = ask(run, "w2", {"op": "read", "sink": sink, "key": "k"})
    return [(entry["id"], entry["epoch"]) for entry in read["entries"]]


def test_a_stale_holder_is_fenced_off_and_a_killed_leader_changes_nothing() -> None:
    system = ZooKeeperSystem()
    with start() as run:
        nodes = run.cluster.nodes
        assert sorted(system.mode(nodes[f"z{n}"]) for n in (1, 2, 3)) == [
            "follower",
            "follower",
            "leader",
        ]
        old, new, reply = pause_inside_write(run, "store", 3000)
        assert new > old
        # Refused by the multi's check, or lost with the expired session: never accepted.
        assert reply["ok"] is False
        assert entries(run, "store") == [("w2-1", new)]

        leader = system.lock_leader(nodes)
        assert leader is not None
        daemon = nodes[leader].daemon("zookeeper")
        nodes[leader].signal(daemon, signal.SIGKILL)
        wait_until(lambda: nodes[leader].process_state(daemon) in (None, "Z"), "the leader's end")
        wait_until(lambda: system.lock_leader(nodes) not in (None, leader), "a new leader")
        system.restart(nodes[leader], "zookeeper")
        assert system.mode(nodes[leader]) == "follower"
        assert ask(run, "w2", {"op": "release", "lock": "L"}) == {"ok": True}
        after = acquire(run, "w1")
        assert after > new
        write = {"op": "write", "lock": "L", "epoch": after, "sink": "store", "key": "k"}
        seq = ask(run, "w1", {**write, "id": "w1-2"})["seq"]
        read = ask(run, "w1", {"op": "read", "sink": "store", "key": "k"})
        assert [entry["id"] for entry in read["entries"]] == ["w2-1", "w1-2"]
        assert new < read["entries"][0]["seq"] < after < read["entries"][1]["seq"] == seq


def test_trust_is_acquired_a_holder_back_from_an_expired_session_writes() -> None:
    with start(bugs={"trust-is-acquired"}) as run:
        old = acquire(run, "w1")
        w1 = run.cluster.nodes["w1"]
        write = {"op": "write", "lock": "L", "sink": "store", "key": "k"}
        w1.signal(w1.daemon("agent"), signal.SIGSTOP)
        try:
            new = acquire(run, "w2")  # granted once w1's session expired
            assert ask(run, "w2", {**write, "epoch": new, "id": "w2-1"})["ok"] is True
        finally:
            w1.signal(w1.daemon("agent"), signal.SIGCONT)
        # kazoo's Lock.is_acquired stays True: w1 renews its belief and writes.
        wait_until(
            lambda: ask(run, "w1", {"op": "holds"})["holds"].get("L") == old,
            "w1 to believe it holds L again",
        )
        assert ask(run, "w1", {**write, "epoch": old, "id": "w1-1"})["ok"] is True
        assert old < new
        assert entries(run, "store") == [("w2-1", new), ("w1-1", old)]


def test_sequence_token_restarts_when_the_locks_parent_is_recreated() -> None:
    with start(bugs={"sequence-token"}) as run:
        first = acquire(run, "w1")
        # Nobody waits: the release removes the empty parent, and the next lock node is numbered
        # from 0 again.
        assert ask(run, "w1", {"op": "release", "lock": "L"}) == {"ok": True}
        assert acquire(run, "w2") <= first


_STAT = """
import socket, sys
with socket.create_connection((sys.argv[1], 2181), timeout=2) as conn:
    conn.sendall(b"stat")
    print(b"".join(iter(lambda: conn.recv(4096), b"")).decode())
"""


def member_of(run: Running, worker: str) -> str:
    """The member whose ``stat`` lists a connection from ``worker``: where its session is."""
    address = run.cluster.nodes[worker].ip
    for name in ("z1", "z2", "z3"):
        node = run.cluster.nodes[name]
        if f"/{address}:" in node.run(["python3", "-c", _STAT, node.ip], check=True).stdout:
            return name
    raise AssertionError(f"no member lists a connection from {worker}")


def cut(run: Running, node: str, peers: list[str]) -> None:
    """Drop every packet between ``node`` and the nodes ``peers`` (on ``node``'s side)."""
    for peer in peers:
        address = run.cluster.nodes[peer].ip
        for rule in (["INPUT", "-s", address], ["OUTPUT", "-d", address]):
            run.cluster.nodes[node].run(["iptables", "-A", *rule, "-j", "DROP"], check=True)


@pytest.mark.parametrize("bugs", [set(), {"follower-read-check"}], ids=["correct", "switch"])
def test_a_member_cut_off_from_the_quorum_answers_stale_reads(bugs: set[str]) -> None:
    with start(bugs=bugs) as run:
        old = acquire(run, "w1")
        member = member_of(run, "w1")
        others = [name for name in ("z1", "z2", "z3") if name != member]
        # w1 and its member on one side, the quorum and w2 on the other. The member answers
        # reads from its last state until it notices (syncLimit x tickTime) the quorum is gone.
        cut(run, member, [*others, "w2"])
        cut(run, "w1", others)
        replies: list[dict[str, Any]] = []
        write = {"op": "write", "lock": "L", "sink": "store", "key": "k"}
        stale = {**write, "epoch": old, "id": "w1-1"}
        # w1's plain read says it still holds L; its write waits for a way to the quorum.
        writer = threading.Thread(target=lambda: replies.append(ask(run, "w1", stale)))
        writer.start()
        # w1's session expires on the quorum's side: w2 is granted the lock there and writes.
        new = acquire(run, "w2")
        assert ask(run, "w2", {**write, "epoch": new, "id": "w2-1"})["ok"] is True
        for node in (member, "w1"):
            run.cluster.nodes[node].run(["iptables", "-F"], check=True)
        writer.join(timeout=60)
        if bugs:
            assert replies == [{"ok": True, "seq": replies[0].get("seq")}]
            assert entries(run, "store") == [("w2-1", new), ("w1-1", old)]
        else:
            # The multi's check went to the leader: the stale write never lands.
            assert replies[0]["ok"] is False
            assert entries(run, "store") == [("w2-1", new)]


# Runs on a node without the run's secret: each attempt on the tree, and what ZooKeeper answered.
_UNAUTHENTICATED = """
import json, sys
from kazoo.client import KazooClient
from kazoo.security import OPEN_ACL_UNSAFE
zk = KazooClient(hosts=sys.argv[1])
zk.start(timeout=20)
attempts = {
    "read the lock": lambda: zk.get_children("/locks/L"),
    "raise the mark": lambda: zk.set("/marks/L", b"99999999999"),
    "write an entry": lambda: zk.create("/store/k/x-", b"x 1", sequence=True),
    "take the lock": lambda: zk.create("/locks/L/x-lock-", b"", ephemeral=True, sequence=True),
    "remove the locks": lambda: zk.delete("/locks", recursive=True),
    "create at the root": lambda: zk.create("/intruder", b""),
    "open the root": lambda: zk.set_acls("/", OPEN_ACL_UNSAFE),
}
answers = {}
for what, attempt in attempts.items():
    try:
        attempt()
        answers[what] = "done"
    except Exception as problem:
        answers[what] = type(problem).__name__
zk.stop()
print(json.dumps(answers))
"""


def test_a_client_without_the_run_secret_cannot_touch_the_locks_or_the_sinks() -> None:
    with start() as run:
        epoch = acquire(run, "w1")
        write = {"op": "write", "lock": "L", "epoch": epoch, "sink": "store", "key": "k"}
        assert ask(run, "w1", {**write, "id": "w1-1"})["ok"] is True
        member = run.cluster.nodes["z1"]
        hosts = f"{member.ip}:2181"
        shown = member.run(["python3", "-c", _UNAUTHENTICATED, hosts], check=True).stdout
        answers = json.loads(shown.strip().splitlines()[-1])
        assert answers == dict.fromkeys(answers, "NoAuthError"), answers
        assert len(answers) == 7
        # The holders, with the secret, go on as before.
        assert ask(run, "w1", {**write, "id": "w1-2"})["ok"] is True
        assert entries(run, "store") == [("w1-1", epoch), ("w1-2", epoch)]


def test_the_reference_store_sink_takes_the_token_and_refuses_a_stale_one() -> None:
    with start() as run:
        old, new, reply = pause_inside_write(run, "ref-store", 3000)
        assert new > old
        # Refused by the store (its mark is new), or lost with w1's expired session.
        assert reply["ok"] is False
        read = ask(run, "w1", {"op": "read", "sink": "ref-store", "key": "k"})
        assert [(e["id"], e["epoch"]) for e in read["entries"]] == [("w2-1", new)]
        assert read["entries"][0]["seq"] >= 1
        fenced = {"op": "read", "sink": "ref-store", "key": "k", "lock": "L", "epoch": old}
        assert ask(run, "w1", fenced)["ok"] is False


@pytest.mark.parametrize("bugs", [set(), {"follower-read-check"}], ids=["correct", "switch"])
def test_a_lock_follower_partition_exposes_the_plain_read_check(bugs: set[str]) -> None:
    system = ZooKeeperSystem()
    with running(system, SystemConfig(1.0, bugs=frozenset(bugs))) as run:
        nodes = run.cluster.nodes
        old = acquire(run, "w1")
        # w1's lock session sits on its own member, a follower: the one the fault cuts off.
        own = run.deployment.client.config["hosts"]["w1"].split(",")[0].partition(":")[0]
        (member,) = [name for name in ("z1", "z2", "z3") if nodes[name].ip == own]
        assert system.mode(nodes[member]) == "follower"
        roles = {name: node.role for name, node in nodes.items()}
        schedule = generate_schedule(
            1,
            roles,
            lease_ttl_ns=10**9,
            duration_ns=10 * 10**9,
            kinds=("partition",),
            targets=(LOCK_FOLLOWER,),
        )
        fault = resolve(
            schedule.windows[0], list(nodes), None, system.lock_leader(nodes), follower=member
        )
        assert fault.targets == (member,) and fault.params["peers"] == [
            name for name in ("z1", "z2", "z3") if name != member
        ]
        partition = PartitionNemesis()
        partition.setup(nodes)
        try:
            partition.invoke("start-partition", fault)
            granted: list[int] = []
            successor = threading.Thread(target=lambda: granted.append(acquire(run, "w2")))
            successor.start()
            write = {"op": "write", "lock": "L", "sink": "store", "key": "k"}
            for attempt in range(1, 30):
                ask(run, "w1", {**write, "epoch": old, "id": f"w1-{attempt}"})
                if granted:
                    break
            successor.join(timeout=60)
            (new,) = granted
            assert ask(run, "w2", {**write, "epoch": new, "id": "w2-1"})["ok"] is True
            # The cut-off member still answers w1's plain read for a while after the grant.
            for attempt in range(30, 40):
                ask(run, "w1", {**write, "epoch": old, "id": f"w1-{attempt}"})
        finally:
            partition.heal()
        stored = entries(run, "store")
        after = stored[stored.index(("w2-1", new)) + 1 :]
        stale = [entry for entry in after if entry[1] == old]
        if bugs:
            assert stale, stored
        else:
            assert not stale, stored
