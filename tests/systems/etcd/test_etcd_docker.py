"""The etcd system on real containers: three members, PostgreSQL, the harness's agents.

One cluster for the module (``e1..e3``, ``s1``, ``w1``, ``w2``); the agents run the etcd holder
client exactly as in a run. A holder paused past its lease while its writes are in flight is
fenced off on both fenced sinks, also after the etcd leader and PostgreSQL were SIGKILLed and
restarted in the meantime; the unfenced sink takes its stale write, as its inventory says. With a
lock-delay, a correct holder's in-flight write lands before the next holder's first one on
``etcd-delayed``, while ``ignore-expired-refresh`` writes after it. A SIGKILL of PostgreSQL with
writes in flight leaves outcomes unknown (``info``), never lost acknowledged writes. An outsider
(the host, or a worker without the run's secret) can neither put a key nor log into PostgreSQL.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import signal
import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from checkers import check
from harness.node import Node, NodeError
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.images import system_image
from harness.nodeside import wire
from harness.record import Event, EventType
from harness.run.agents import AgentSet, deploy_system, start_agents, stop_agents
from systems import Deployment, SystemConfig
from systems.base import topology
from systems.deploy import SECRET_FILE
from systems.etcd import EtcdSystem
from systems.etcd.adapter import ETCD_DAEMON, POSTGRES_DAEMON
from systems.etcd.holder import ETCD_DELAYED, IGNORE_EXPIRED_REFRESH, LOCK_PREFIX, Gateway
from tests.support.localcluster import wait_until

pytestmark = pytest.mark.docker

Running = tuple[Cluster, EtcdSystem, Deployment, AgentSet]
_TTL = 2.0
_LOCK_DELAY = 5.0  # longer than the pauses below (about 3 s), so correct holders stay safe


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
def agents(
    running: Running, bugs: tuple[str, ...] = (), lock_delay: float = 0.0
) -> Iterator[AgentSet]:
    """The run's agents, restarted with the client-side ``bugs`` switched on and the holders
    waiting ``lock_delay`` after each grant, until the end."""
    cluster, _, deployment, started = running
    if not bugs and not lock_delay:
        yield started
        return
    config = {**deployment.client.config, "bugs": bugs, "lock_delay": lock_delay}
    client = replace(deployment.client, config=config)
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


def crash_postgres(system: EtcdSystem, node: Node) -> None:
    """SIGKILL every PostgreSQL process at once (the postmaster alone would let its backends
    finish the requests in flight), then start it again."""
    daemon = node.daemon(POSTGRES_DAEMON)
    node.run(["pkill", "-KILL", "-u", "postgres"], check=True)
    wait_until(
        lambda: node.process_state(daemon) in (None, "Z"), f"PostgreSQL on {node.name} to die"
    )
    system.restart(node, POSTGRES_DAEMON)


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


def first_in_queue(running: Running, lock: str) -> str | None:
    """The worker whose key is first in ``lock``'s queue (the holder, or the next one once the
    holder's lease ran out), asked of etcd from the controller (with the run's secret)."""
    cluster, _, _, started = running
    gateway = Gateway([f"http://{cluster.nodes['e1'].ip}:2379"], 5.0, started.token)
    prefix = f"{LOCK_PREFIX}{lock}/"
    kvs = gateway.range(prefix, True, sort_target="CREATE", sort_order="ASCEND", limit=1)
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def write_after_the_next_holder(running: Running, bugs: tuple[str, ...]) -> list[tuple[str, int]]:
    """w1 holds a lock and is paused inside a write to ``etcd-delayed`` until its lease runs out
    and w2 is first in the queue, in its grace period; then w1 resumes, w2 gets the lock and
    writes, and w1 writes once more if it still believes it holds the lock. The sink's entries
    as (id, epoch), in its order."""
    cluster = running[0]
    lock = f"D-{'-'.join(bugs) or 'correct'}"
    with agents(running, bugs, lock_delay=_LOCK_DELAY) as holders:
        old = ask(holders, "w1", {"op": "acquire", "lock": lock, "wait": 20})["epoch"]
        request = {"op": "write", "lock": lock, "sink": ETCD_DELAYED, "key": "k"}
        in_flight = threading.Thread(
            target=ask,
            args=(holders, "w1", {**request, "epoch": old, "id": "w1-a", "work_ms": 500}),
        )
        in_flight.start()
        wait_until(lambda: ask(holders, "w1", {"op": "holds"})["working"], "w1 to start working")
        granted: dict[str, Any] = {}
        w2 = threading.Thread(
            target=lambda: granted.update(
                ask(holders, "w2", {"op": "acquire", "lock": lock, "wait": 30})
            )
        )
        w1 = cluster.nodes["w1"]
        w1.signal(w1.daemon("agent"), signal.SIGSTOP)
        try:
            w2.start()
            wait_until(lambda: first_in_queue(running, lock) == "w2", "w1's lease to run out")
        finally:
            w1.signal(w1.daemon("agent"), signal.SIGCONT)
        in_flight.join(timeout=60)
        w2.join(timeout=60)
        new = granted["epoch"]
        assert new > old
        assert ask(holders, "w2", {**request, "epoch": new, "id": "w2-a"})["ok"] is True
        believes = IGNORE_EXPIRED_REFRESH in bugs
        wait_until(
            lambda: (lock in ask(holders, "w1", {"op": "holds"})["holds"]) == believes,
            "w1's renewal after it resumed",
        )
        late = ask(holders, "w1", {**request, "epoch": old, "id": "w1-b"})
        assert late["ok"] is believes, late
        read = ask(holders, "w2", {"op": "read", "sink": ETCD_DELAYED, "key": "k"})
    assert read["ok"], read
    return [(e["id"], e["epoch"]) for e in read["entries"] if e["id"] in ("w1-a", "w2-a", "w1-b")]


def test_the_lock_delay_keeps_a_correct_holders_late_write_before_the_next_holders(
    running: Running,
) -> None:
    entries = write_after_the_next_holder(running, ())
    assert [id for id, _ in entries] == ["w1-a", "w2-a"]
    assert entries[0][1] < entries[1][1]


def test_a_holder_ignoring_its_expired_lease_writes_after_the_next_holder(
    running: Running,
) -> None:
    entries = write_after_the_next_holder(running, (IGNORE_EXPIRED_REFRESH,))
    assert [id for id, _ in entries] == ["w1-a", "w2-a", "w1-b"]
    assert entries[2][1] < entries[1][1]  # a stale write on a sink that relies on the lock-delay


def test_a_kill_of_postgres_mid_commit_is_unknown_not_a_lost_write(running: Running) -> None:
    """Six writers hammer PostgreSQL through the agents while every PostgreSQL process is
    SIGKILLed at once, as a crash of its host would, and restarted (up to five times, until some
    write was cut off during its commit). Every acknowledged write survives; the ones cut off
    end ``info``, and the checker counts them neither lost nor phantom whether they committed or
    not."""
    cluster, system, _, _ = running
    clock = time.monotonic_ns
    start = clock()
    # (time, process, worker, type, error, value) of each write's invoke and completion
    events: list[tuple[int, int, str, EventType, str | None, dict[str, Any]]] = []
    record = threading.Lock()
    processes = itertools.count()
    stop = threading.Event()

    def writer(holders: AgentSet, worker: str, epoch: int) -> None:
        lock = f"P-{worker}"
        process = next(processes)
        for n in itertools.count():
            if stop.is_set():
                break
            write_id = f"{worker}-{process}-{n}"
            value = {"lock": lock, "sink": "postgres", "key": lock, "id": write_id, "epoch": epoch}
            with record:
                events.append((clock() - start, process, worker, "invoke", None, value))
            reply = ask(holders, worker, {"op": "write", **value})
            kind: EventType = "ok" if reply["ok"] else "info" if reply.get("info") else "fail"
            done = {**value, "seq": reply["seq"]} if "seq" in reply else value
            with record:
                events.append((clock() - start, process, worker, kind, reply.get("error"), done))
            if kind == "info":
                process = next(processes)  # the history's rule: a new process after an info

    def unknown() -> int:
        with record:
            return sum(event[3] == "info" for event in events)

    with agents(running) as holders:
        epochs = {
            w: ask(holders, w, {"op": "acquire", "lock": f"P-{w}", "wait": 10})["epoch"]
            for w in ("w1", "w2")
        }
        threads = [
            threading.Thread(target=writer, args=(holders, w, epochs[w]))
            for w in ("w1", "w2")
            for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        try:
            for _ in range(5):
                wait_until(lambda: sum(e[3] == "ok" for e in events) > 20, "acknowledged writes")
                crash_postgres(system, cluster.nodes["s1"])
                if unknown():
                    break
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
        reads = {
            w: ask(holders, "w1", {"op": "read", "sink": "postgres", "key": f"P-{w}"})
            for w in ("w1", "w2")
        }
    assert unknown() > 0, "no write was cut off by five kills"
    stored = {e["id"] for read in reads.values() for e in read["entries"]}
    acknowledged = {event[5]["id"] for event in events if event[3] == "ok"}
    assert acknowledged <= stored  # durable defaults: an acknowledged commit survives a SIGKILL
    end = clock() - start
    history = [
        Event(index, at, process, kind, "write", value, worker, error)
        for index, (at, process, worker, kind, error, value) in enumerate(
            sorted(events, key=lambda e: e[0])
        )
    ]
    for worker, read in reads.items():
        value = {"sink": "postgres", "key": f"P-{worker}"}
        history.append(Event(len(history), end, 99, "invoke", "read", value, "w1"))
        done = {**value, "entries": read["entries"]}
        history.append(Event(len(history), end, 99, "ok", "read", done, "w1"))
    inventory = {sink.name: sink for sink in system.inventory(SystemConfig(lease_ttl=_TTL))}
    result = check(history, inventory=inventory, lease_ttl=_TTL)
    assert "lost-write" not in result.anomaly_types
    assert "phantom-write" not in result.anomaly_types
    assert result.valid is True


def test_pausing_a_holders_member_stalls_that_holder_only(running: Running) -> None:
    cluster, system, _, started = running
    member = system.client_member(cluster.nodes, "w2")
    assert member is not None and member != system.client_member(cluster.nodes, "w1")
    node = cluster.nodes[member]
    node.signal(node.daemon(ETCD_DAEMON), signal.SIGSTOP)
    try:
        stalled = ask(started, "w2", {"op": "acquire", "lock": "M2", "wait": 1})
        other = ask(started, "w1", {"op": "acquire", "lock": "M1", "wait": 20})
    finally:
        node.signal(node.daemon(ETCD_DAEMON), signal.SIGCONT)
    assert stalled["ok"] is False and stalled.get("info") is True  # no answer: unknown
    assert other["ok"] is True


def postgres_login(host: str, port: int) -> bytes:
    """PostgreSQL's first answer to a login as ``postgres`` offering no password: ``R`` and 0
    for a login let in (trust), ``R`` and 10 for a password asked (SCRAM), ``E`` for refused."""
    params = b"user\0postgres\0database\0postgres\0\0"
    body = struct.pack("!I", 3 << 16) + params  # protocol 3.0
    with socket.create_connection((host, port), 10) as connection:
        connection.sendall(struct.pack("!I", len(body) + 4) + body)
        answer = connection.makefile("rb")
        kind = answer.read(1)
        (length,) = struct.unpack("!I", answer.read(4))
        return kind + answer.read(length - 4)


def test_an_outsider_can_neither_write_etcd_nor_log_into_postgresql(running: Running) -> None:
    """The attack of issue 22: from the host (outside the run) a forged put under a sink's keys
    and a password-less login as PostgreSQL's superuser; from a worker (inside the run's
    network, without the secret) a login without the password and one with a wrong one."""
    cluster, _, _, started = running
    e1, s1, w1 = cluster.nodes["e1"], cluster.nodes["s1"], cluster.nodes["w1"]
    forged = []
    for sink in ("etcd-txn", "etcd-put"):
        key = base64.b64encode(f"/fencecheck/data/{sink}/L0-k0/evil".encode()).decode()
        value = base64.b64encode(b'{"id": "evil", "epoch": 1, "prev": null}').decode()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(
                urllib.request.Request(
                    f"http://{e1.ip}:2379/v3/kv/put",
                    data=json.dumps({"key": key, "value": value}).encode(),
                    method="POST",
                ),
                timeout=10,
            )
        forged.append(json.loads(refused.value.read()))
    assert [answer["message"] for answer in forged] == ["etcdserver: user name is empty"] * 2
    login = postgres_login(s1.ip, 5432)
    assert login[:1] == b"E" and b"no pg_hba.conf entry" in login, login
    insert = "INSERT INTO log (key, id, epoch, lock) VALUES ('L0-k0', 'evil', 1, 'L0')"
    psql = ["psql", "-h", s1.ip, "-U", "postgres", "-w", "-c", insert]
    blank = w1.run(psql)
    assert not blank.ok and "no password supplied" in blank.stderr, blank
    wrong = w1.run(psql, env={"PGPASSWORD": "not-the-run-secret"})
    assert not wrong.ok and "password authentication failed" in wrong.stderr, wrong
    # The run itself, with the secret, goes on: nothing forged is in any sink.
    for sink in ("etcd-txn", "etcd-put", "postgres"):
        read = ask(started, "w1", {"op": "read", "sink": sink, "key": "L0-k0"})
        assert read["ok"] is True and read["entries"] == [], read
