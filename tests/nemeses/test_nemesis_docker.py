"""Every fault against real containers, each effect observed from outside the nemesis.

One cluster (l1, s1, w1, w2) serves the module. Every node runs a probe daemon: a TCP echo server
and a UDP listener that logs what it receives. Connectivity is tested between nodes with one-shot
clients; a fault is judged by what stops working and what keeps working, never by the nemesis's
own word.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final

import networkx as nx
import pytest
from click.testing import CliRunner, Result

from harness.cli.nemesis import nemesis_group
from harness.node import Daemon, Node
from harness.node.docker.cluster import Cluster, default_topology, new_run_id
from harness.node.docker.engine import engine
from harness.node.docker.node import DockerNode
from nemeses import standard_nemesis
from nemeses.freeze import FreezeNemesis
from nemeses.kill import KillNemesis
from nemeses.partition import PartitionNemesis
from nemeses.pause import PauseNemesis
from nemeses.player import NemesisPlayer
from nemeses.processes import is_gone
from nemeses.protocol import Fault
from nemeses.recovery import heal_nodes
from nemeses.rules import CHAIN
from nemeses.schedule import Window
from nemeses.throttle import ThrottleNemesis
from nemeses.topology import intended_reachability, partition_fault, reachability

pytestmark = pytest.mark.docker

PROBE_PATH: Final = "/opt/nemtest/probe.py"
# serve: TCP echo on 7000, UDP datagrams on 7001 appended to /tmp/udp.log.
# tcp HOST: one echo round trip, exit 0 if it came back within a second.
# udp HOST TOKEN: send TOKEN to HOST three times. pinger HOST: one connection, a line per echo.
# count FILE: a counter written every 10 ms. spin FILE: a CPU-bound loop, its count written often.
PROBE: Final = b"""
import os, socket, sys, threading, time
mode = sys.argv[1]
if mode == "serve":
    def echo(conn):
        with conn:
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                conn.sendall(data)
    def udp():
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("0.0.0.0", 7001))
        with open("/tmp/udp.log", "ab", buffering=0) as log:
            while True:
                log.write(sock.recv(4096) + b"\\n")
    threading.Thread(target=udp, daemon=True).start()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 7000))
    server.listen(64)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=echo, args=(conn,), daemon=True).start()
elif mode == "tcp":
    try:
        with socket.create_connection((sys.argv[2], 7000), timeout=1.0) as conn:
            conn.sendall(b"ping")
            sys.exit(0 if conn.recv(4) == b"ping" else 1)
    except OSError:
        sys.exit(1)
elif mode == "udp":
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(3):
        try:
            sock.sendto(sys.argv[3].encode(), (sys.argv[2], 7001))
        except OSError:  # a DROP in OUTPUT refuses the send itself
            pass
elif mode == "pinger":
    conn = socket.create_connection((sys.argv[2], 7000), timeout=5.0)
    conn.settimeout(None)
    while True:
        conn.sendall(b"p")
        conn.recv(1)
        print("pong", flush=True)
        time.sleep(0.02)
elif mode == "count":
    n = 0
    while True:
        n += 1
        with open(sys.argv[2], "w") as out:
            out.write(str(n))
        time.sleep(0.01)
elif mode == "spin":
    fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT)
    n = 0
    while True:
        n += 1
        if n % 20000 == 0:
            os.pwrite(fd, b"%020d" % n, 0)
"""


@pytest.fixture(scope="module")
def cluster(node_image: str) -> Iterator[Cluster]:
    """l1, s1, w1, w2, each running the probe server."""
    with Cluster(f"test-nem-{new_run_id()}", default_topology(2), image=node_image) as running:
        for node in running.nodes.values():
            node.put_file(PROBE_PATH, PROBE)
            node.start_daemon("serve", ["python3", PROBE_PATH, "serve"])
        for node in running.nodes.values():
            _eventually(partial(_tcp, node, "l1"), f"{node.name} reaches l1")
        yield running


@pytest.fixture
def nodes(cluster: Cluster) -> Iterator[dict[str, Node]]:
    """The cluster's nodes; after each test, every fault is gone and every node reaches all."""
    as_nodes: dict[str, Node] = dict(cluster.nodes)
    yield as_nodes
    frozen = [name for name, node in cluster.nodes.items() if _paused(node)]
    assert heal_nodes(as_nodes, frozen=frozen).ok
    for node in as_nodes.values():
        assert CHAIN not in _iptables(node)


# -- observing from outside -------------------------------------------------------------------


def _eventually(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never saw: {what}"
        time.sleep(0.05)


def _tcp(client: Node, server: str) -> bool:
    """One echo round trip from ``client`` to ``server``'s probe (1 s timeout)."""
    return client.run(["python3", PROBE_PATH, "tcp", server], timeout=10).ok


def _udp_arrives(nodes: dict[str, Node], source: str, dest: str, control: str) -> bool:
    """Whether a datagram from ``source`` reaches ``dest``, judged once a datagram sent after
    it from ``control`` (which must get through) has arrived."""
    token, marker = uuid.uuid4().hex, uuid.uuid4().hex
    nodes[source].run(["python3", PROBE_PATH, "udp", dest, token], check=True)
    nodes[control].run(["python3", PROBE_PATH, "udp", dest, marker], check=True)
    _eventually(lambda: marker in _udp_log(nodes[dest]), f"{control}'s datagram at {dest}")
    return token in _udp_log(nodes[dest])


def _udp_log(node: Node) -> str:
    return node.run(["cat", "/tmp/udp.log"]).stdout


def _iptables(node: Node) -> str:
    return node.run(["iptables", "-S"], check=True).stdout


def _pongs(node: Node) -> int:
    """Echo replies the pinger daemon has logged so far."""
    counted = node.run(["grep", "-c", "pong", "/var/log/fencecheck/pinger.log"]).stdout
    return int(counted.strip() or 0)


def _paused(node: DockerNode) -> bool:
    """Whether the engine has the node's container paused (frozen)."""
    return bool(engine().api.inspect_container(node.container_id)["State"]["Paused"])


def _host_file(daemon: Daemon, path: str) -> str:
    """Read a file of the daemon's container from the host, which works even when frozen."""
    assert daemon.host_pid is not None, "the tests run as root on the engine's host"
    try:
        return Path(f"/proc/{daemon.host_pid}/root{path}").read_text()
    except FileNotFoundError:
        return ""


def _stop_daemon(node: Node, name: str) -> None:
    node.signal(node.daemon(name), signal.SIGKILL)


# -- pause, freeze, throttle, kill ------------------------------------------------------------


def test_a_paused_process_answers_nothing_and_is_stopped_then_answers_again(
    nodes: dict[str, Node],
) -> None:
    nemesis = PauseNemesis()
    nemesis.setup(nodes)
    fault = Fault("pause", ("s1",), {"process": "serve"})
    nemesis.invoke("start-pause", fault)
    assert nodes["s1"].process_state(nodes["s1"].daemon("serve")) == "T"
    assert not _tcp(nodes["w1"], "s1")
    assert _tcp(nodes["w1"], "l1"), "other nodes are unaffected"
    nemesis.invoke("stop-pause", fault)
    assert nodes["s1"].process_state(nodes["s1"].daemon("serve")) != "T"
    assert _tcp(nodes["w1"], "s1")


def test_a_frozen_container_runs_nothing_until_thawed(nodes: dict[str, Node]) -> None:
    w2 = nodes["w2"]
    counter = w2.start_daemon("count", ["python3", PROBE_PATH, "count", "/tmp/count"])
    _eventually(lambda: _host_file(counter, "/tmp/count").isdigit(), "the counter counting")
    nemesis = FreezeNemesis()
    nemesis.setup(nodes)
    fault = Fault("freeze", ("w2",))
    try:
        nemesis.invoke("start-freeze", fault)
        frozen_at = _host_file(counter, "/tmp/count")
        time.sleep(0.5)
        assert _host_file(counter, "/tmp/count") == frozen_at
        assert not _tcp(nodes["w1"], "w2")
        nemesis.invoke("stop-freeze", fault)
        _eventually(
            lambda: _host_file(counter, "/tmp/count") not in ("", frozen_at), "counting again"
        )
    finally:
        nemesis.heal()
        _stop_daemon(w2, "count")


def test_a_throttled_container_gets_only_its_share_of_a_cpu(nodes: dict[str, Node]) -> None:
    w1 = nodes["w1"]
    spinner = w1.start_daemon("spin", ["python3", PROBE_PATH, "spin", "/tmp/spin"])
    nemesis = ThrottleNemesis()
    nemesis.setup(nodes)
    fault = Fault("throttle", ("w1",), {"cpu": 0.02})

    def cpu_share() -> float:
        """CPU seconds the loop used per second of wall time, from the kernel's accounting:
        what a busy machine gives an unthrottled loop varies, the quota's ceiling does not."""
        began, used = time.monotonic(), _cpu_seconds(spinner)
        time.sleep(1.0)
        return (_cpu_seconds(spinner) - used) / (time.monotonic() - began)

    try:
        _eventually(lambda: _host_file(spinner, "/tmp/spin") != "", "the loop spinning")
        free = cpu_share()
        facts = nemesis.invoke("start-throttle", fault)
        assert facts == {"quota_us": 1000, "period_us": 50_000}
        throttled = cpu_share()
        nemesis.invoke("stop-throttle", fault)
        again = cpu_share()
    finally:
        nemesis.heal()
        _stop_daemon(w1, "spin")
    # 2 % of a CPU, with room for one period's overrun at each end of the second measured.
    assert throttled <= 0.06, (free, throttled, again)
    assert free > 2 * throttled and again > 2 * throttled, (free, throttled, again)


def _cpu_seconds(daemon: Daemon) -> float:
    """User plus system CPU time of ``daemon`` so far, from the host's /proc."""
    fields = Path(f"/proc/{daemon.host_pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_killed_process_is_gone_and_restarts_the_same_way(nodes: dict[str, Node]) -> None:
    s1 = nodes["s1"]
    old = s1.daemon("serve")
    nemesis = KillNemesis()
    nemesis.setup(nodes)
    fault = Fault("kill", ("s1",), {"process": "serve"})
    nemesis.invoke("start-kill", fault)
    assert is_gone(s1.process_state(old)), "killed: a zombie until init reaps it, then gone"
    assert not _tcp(nodes["w1"], "s1")
    nemesis.invoke("stop-kill", fault)
    new = s1.daemon("serve")
    assert new.pid != old.pid and new.argv == old.argv
    _eventually(lambda: _tcp(nodes["w1"], "s1"), "the restarted server answering")


# -- partitions -------------------------------------------------------------------------------


def test_isolation_cuts_new_and_established_connections_and_spares_the_rest(
    nodes: dict[str, Node],
) -> None:
    w1 = nodes["w1"]
    before = _pongs(w1)
    w1.start_daemon("pinger", ["python3", PROBE_PATH, "pinger", "l1"])
    _eventually(lambda: _pongs(w1) >= before + 3, "the long-lived connection echoing")
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    fault = partition_fault("isolate", ["w1"], list(nodes))
    try:
        nemesis.invoke("start-partition", fault)
        time.sleep(0.3)  # a reply already in w1's socket buffer may still be read
        stalled = _pongs(w1)
        assert not _tcp(w1, "l1") and not _tcp(w1, "s1") and not _tcp(nodes["l1"], "w1")
        assert _tcp(nodes["w2"], "l1") and _tcp(nodes["s1"], "l1")
        assert _pongs(w1) == stalled, "the connection opened before the partition is cut too"
        nemesis.invoke("stop-partition", fault)
        _eventually(lambda: _pongs(w1) > stalled, "the old connection echoing again")
        assert _tcp(w1, "l1")
    finally:
        nemesis.heal()
        _stop_daemon(w1, "pinger")


def test_one_way_drops_one_direction_only(nodes: dict[str, Node]) -> None:
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    nemesis.invoke("start-partition", partition_fault("one-way", ["w1"], list(nodes), ["s1"]))
    assert not _udp_arrives(nodes, "w1", "s1", control="w2")
    assert _udp_arrives(nodes, "s1", "w1", control="w2")
    assert _udp_arrives(nodes, "w1", "l1", control="w2")
    assert nemesis.heal().ok
    assert _udp_arrives(nodes, "w1", "s1", control="w2")


def test_a_holder_cut_from_the_lock_service_still_reaches_the_store(
    nodes: dict[str, Node],
) -> None:
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    nemesis.invoke("start-partition", partition_fault("lock-cut", ["w2"], list(nodes), ["l1"]))
    assert not _tcp(nodes["w2"], "l1") and not _tcp(nodes["l1"], "w2")
    assert _tcp(nodes["w2"], "s1") and _tcp(nodes["w1"], "l1")


def test_halves_and_bridge(nodes: dict[str, Node]) -> None:
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    halves = partition_fault("halves", ["l1", "w1"], list(nodes))
    nemesis.invoke("start-partition", halves)
    assert _tcp(nodes["w1"], "l1") and _tcp(nodes["w2"], "s1")
    assert not _tcp(nodes["w1"], "s1") and not _tcp(nodes["w2"], "l1")
    nemesis.invoke("stop-partition", halves)
    bridge = partition_fault("bridge", ["w2"], list(nodes), ["l1"])
    nemesis.invoke("start-partition", bridge)
    assert _tcp(nodes["w2"], "l1") and _tcp(nodes["w2"], "s1") and _tcp(nodes["w1"], "w2")
    assert not _tcp(nodes["l1"], "s1") and not _tcp(nodes["w1"], "l1")
    assert nemesis.heal().ok
    assert _tcp(nodes["l1"], "s1") and _tcp(nodes["w1"], "l1")


def _observed_reachability(nodes: dict[str, Node]) -> nx.DiGraph:
    """Who reaches whom, as seen: every node sends a datagram to every other; an edge is a
    datagram that arrived (three copies each, on a quiet local bridge, given 0.3 s)."""
    tokens = {(a, b): uuid.uuid4().hex for a in nodes for b in nodes if a != b}
    for (source, dest), token in tokens.items():
        nodes[source].run(["python3", PROBE_PATH, "udp", dest, token], check=True)
    time.sleep(0.3)
    logs = {name: _udp_log(node) for name, node in nodes.items()}
    return reachability(
        nodes, [pair for pair, token in tokens.items() if token not in logs[pair[1]]]
    )


@pytest.mark.parametrize(
    ("topology", "targets", "peers", "inbound"),
    [
        ("isolate", ["w1"], None, False),
        ("halves", ["l1", "w1"], None, False),
        ("bridge", ["w2"], ["l1"], False),
        ("one-way", ["w1"], ["s1"], True),
        ("lock-cut", ["w2"], ["l1"], False),
    ],
)
def test_the_observed_reachability_is_the_intended_graph(
    nodes: dict[str, Node],
    topology: str,
    targets: list[str],
    peers: list[str] | None,
    inbound: bool,
) -> None:
    intended = intended_reachability(topology, targets, list(nodes), peers, inbound=inbound)
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    nemesis.invoke(
        "start-partition", partition_fault(topology, targets, list(nodes), peers, inbound=inbound)
    )
    try:
        observed = _observed_reachability(nodes)
    finally:
        assert nemesis.heal().ok
    missing = sorted(set(intended.edges) - set(observed.edges))
    extra = sorted(set(observed.edges) - set(intended.edges))
    assert not missing and not extra, f"{topology}: blocked {missing}, leaking {extra}"
    assert nx.utils.graphs_equal(_observed_reachability(nodes), reachability(nodes, ()))


# -- healing ----------------------------------------------------------------------------------


def test_an_interrupted_player_leaves_no_fault_behind(nodes: dict[str, Node]) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    t0 = time.monotonic_ns()
    second = 1_000_000_000
    freeze_then_pause = [
        Window(0, 0, 600 * second, "freeze", ("w2",), 8.0),
        Window(1, 700 * second, 1, "pause", ("w1",), 0.15),
    ]
    isolate = [Window(0, 0, 600 * second, "partition", ("l1",), 8.0, None, {"topology": "isolate"})]
    for plan in (freeze_then_pause, isolate):
        player = NemesisPlayer(
            nodes,
            standard_nemesis(),
            plan,
            lambda: time.monotonic_ns() - t0,
            lambda f, value: events.append((f, value)),
        )
        with pytest.raises(KeyboardInterrupt), player:
            _eventually(lambda: any(f.startswith("start-") for f, _ in events), "a fault")
            events.clear()
            raise KeyboardInterrupt
        assert [f for f, _ in events][-1].startswith("stop-")
    assert _tcp(nodes["w1"], "w2") and _tcp(nodes["w1"], "l1")
    for node in nodes.values():
        assert CHAIN not in _iptables(node)


def test_heal_undoes_everything_at_once(nodes: dict[str, Node]) -> None:
    w1 = nodes["w1"]
    nemesis = standard_nemesis()
    nemesis.setup(nodes)
    nemesis.invoke("start-pause", Fault("pause", ("w1",), {"process": "serve"}))
    nemesis.invoke("start-throttle", Fault("throttle", ("w2",), {"cpu": 0.05}))
    nemesis.invoke("start-partition", partition_fault("isolate", ["l1"], list(nodes)))
    nemesis.invoke("start-kill", Fault("kill", ("s1",), {"process": "serve"}))
    nemesis.invoke("start-freeze", Fault("freeze", ("w2",)))
    report = nemesis.heal()
    assert report.ok, report.errors
    assert w1.process_state(w1.daemon("serve")) not in ("T", None)
    _eventually(lambda: _tcp(nodes["l1"], "s1"), "l1 and the restarted s1 talking")
    assert _tcp(nodes["w2"], "l1") and _tcp(nodes["l1"], "w1") and _tcp(nodes["w1"], "w2")


# -- the command line -------------------------------------------------------------------------


@pytest.fixture
def nemesis_cli(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Result]:
    """Runs ``fencecheck nemesis ARGS --run <this cluster>``, with a ledger of its own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(nemesis_group, [*args, "--run", cluster.run_id])

    return invoke


def test_cli_applies_faults_by_hand_and_heals(
    cluster: Cluster, nodes: dict[str, Node], nemesis_cli: Callable[..., Result]
) -> None:
    def invoke(*args: str) -> str:
        result = nemesis_cli(*args)
        assert result.exit_code == 0, result.output
        return result.output

    serve = nodes["s1"].daemon("serve")
    assert "confirmed" in invoke("pause", "s1", "--process", "serve", "--for", "200ms")
    assert nodes["s1"].process_state(serve) != "T"
    invoke("pause", "s1", "--process", "serve")
    assert nodes["s1"].process_state(serve) == "T"
    invoke("partition", "--isolate", "w2", "--from", "l1")
    assert not _tcp(nodes["w2"], "l1") and _tcp(nodes["w2"], "w1")
    invoke("freeze", "w1", "--for", "300ms")
    assert not _paused(cluster.node("w1"))
    invoke("throttle", "w2", "--cpu", "0.05")
    invoke("kill", "l1", "--process", "serve")
    assert not _tcp(nodes["s1"], "l1")
    assert "is healed" in invoke("heal")
    assert nodes["s1"].process_state(serve) != "T"
    _eventually(lambda: _tcp(nodes["w2"], "l1"), "the restarted l1 server answering w2")
    assert _tcp(nodes["l1"], "w1")
    bad = nemesis_cli("pause", "w9")
    assert bad.exit_code != 0 and "no node w9" in bad.output
    missing = nemesis_cli("pause", "w1", "--process", "nothing-like-this")
    assert missing.exit_code != 0 and "found no process named or matching" in missing.output


def test_cli_heal_thaws_a_node_frozen_by_hand(
    cluster: Cluster, nodes: dict[str, Node], nemesis_cli: Callable[..., Result]
) -> None:
    frozen = nemesis_cli("freeze", "w2")
    assert frozen.exit_code == 0, frozen.output
    assert _paused(cluster.node("w2"))
    healed = nemesis_cli("heal")
    assert healed.exit_code == 0, healed.output
    assert not _paused(cluster.node("w2"))
    assert _tcp(nodes["w1"], "w2")


def test_docker_nodes_offer_every_capability(cluster: Cluster) -> None:
    node = cluster.node("w1")
    assert isinstance(node, DockerNode)
    assert node.host_view is not None, "the tests run as root on the engine's host"
