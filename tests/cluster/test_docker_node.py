"""DockerNode against real containers: commands, daemons and signals, files, logs, capabilities."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable

import pytest

from harness.node import Daemon, Freezable, NetnsRunner, NodeError, Throttleable
from harness.node.docker.cluster import Cluster
from harness.node.docker.engine import engine
from harness.node.docker.node import DockerNode
from harness.node.wait import CommandSucceeds, LogLine, PortOpen, WaitTimeout, wait_for

pytestmark = pytest.mark.docker


def _eventually(condition: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Poll until ``condition`` holds; the limit only stops a hung test, it measures nothing."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.001)


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_topology_has_stable_names_and_roles(cluster: Cluster) -> None:
    assert list(cluster.nodes) == ["l1", "s1", "w1", "w2", "w3"]
    assert [n.name for n in cluster.by_role("worker")] == ["w1", "w2", "w3"]
    assert cluster.node("l1").role == "lock"
    with pytest.raises(NodeError, match="no node 'x9'"):
        cluster.node("x9")


def test_nodes_resolve_each_other_by_name(cluster: Cluster) -> None:
    for node in cluster.nodes.values():
        result = node.run(["getent", "hosts", *cluster.nodes], check=True)
        resolved = {name: ip for ip, name in (line.split() for line in result.stdout.splitlines())}
        assert resolved == {name: other.ip for name, other in cluster.nodes.items()}


def test_a_command_runs_on_each_node(cluster: Cluster) -> None:
    for name, node in cluster.nodes.items():
        result = node.run("hostname; echo oops >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, f"{name}\n", "oops\n")
        assert not result.ok


def test_run_passes_env_and_stdin_and_reports_failures(cluster: Cluster) -> None:
    node = cluster.node("w1")
    assert node.run(["sh", "-c", "echo $GREETING"], env={"GREETING": "hi"}).stdout == "hi\n"
    assert node.run(["tr", "a-z", "A-Z"], stdin=b"fenced\n").stdout == "FENCED\n"
    with pytest.raises(NodeError, match="exited 1") as failure:
        node.run("echo visible; false", check=True)
    assert "visible" in str(failure.value)
    with pytest.raises(NodeError, match=r"timed out after 0\.5 s"):
        node.run(["sleep", "30"], timeout=0.5)


@pytest.mark.parametrize("fast_paths", [True, False], ids=["host-pid", "exec"])
def test_daemon_is_stopped_and_continued_by_signal(cluster: Cluster, fast_paths: bool) -> None:
    base = cluster.node("w2")
    container = engine().containers.get(base.container_id)
    node = DockerNode(container, name=base.name, role=base.role, ip=base.ip, fast_paths=fast_paths)
    daemon = node.start_daemon(_unique("sleeper"), ["sleep", "600"])
    assert (daemon.host_pid is not None) == fast_paths
    assert node.daemon(daemon.name) == daemon
    assert node.process_state(daemon) in {"R", "S"}

    node.signal(daemon, signal.SIGSTOP)
    _eventually(lambda: node.process_state(daemon) == "T", "SIGSTOP shows as state T")
    node.signal(daemon, signal.SIGCONT)
    _eventually(lambda: node.process_state(daemon) == "S", "SIGCONT shows as state S")
    node.signal(daemon, signal.SIGKILL)
    _eventually(lambda: node.process_state(daemon) is None, "SIGKILL removes the process")
    with pytest.raises(NodeError, match="sleeper"):
        node.signal(daemon, signal.SIGCONT)
    node.close()


def test_restarting_a_daemon_replaces_its_record(cluster: Cluster) -> None:
    node = cluster.node("w3")
    name = _unique("restarted")
    first = node.start_daemon(name, ["sleep", "600"])
    node.signal(first, signal.SIGKILL)
    second = node.start_daemon(name, ["sleep", "600"])
    assert second.pid != first.pid
    assert node.daemon(name) == second
    assert [d for d in node.daemons() if d.name == name] == [second]
    node.signal(second, signal.SIGKILL)


def test_daemon_in_a_working_directory_with_env_logs_its_output(cluster: Cluster) -> None:
    node = cluster.node("s1")
    name = _unique("talker")
    daemon = node.start_daemon(
        name, ["sh", "-c", 'echo "in $(pwd) as $WHO"; sleep 600'], env={"WHO": "s1"}, cwd="/tmp"
    )
    wait_for(node, LogLine(r"^in /tmp as s1$", log=name, timeout=10))
    assert node.get_file(daemon.log_path) == b"in /tmp as s1\n"
    logs = node.logs()
    assert "container" in logs
    assert logs[name] == b"in /tmp as s1\n"
    node.signal(daemon, signal.SIGKILL)


def test_daemon_with_a_bad_directory_is_refused(cluster: Cluster) -> None:
    with pytest.raises(NodeError, match="did not start"):
        cluster.node("w1").start_daemon(_unique("lost"), ["true"], cwd="/no/such/dir")


def test_files_go_in_and_come_out(cluster: Cluster) -> None:
    node = cluster.node("l1")
    path = f"/opt/{_unique('deep')}/er/config.json"
    payload = bytes(range(256)) * 64
    node.put_file(path, payload, mode=0o600)
    assert node.get_file(path) == payload
    assert node.run(["stat", "-c", "%a %s", path]).stdout == f"600 {len(payload)}\n"
    with pytest.raises(NodeError, match="no file"):
        node.get_file("/opt/nothing-here")
    with pytest.raises(NodeError, match="absolute path"):
        node.put_file("relative.txt", b"")


def test_wait_strategies_see_a_port_and_time_out_with_logs(cluster: Cluster) -> None:
    node = cluster.node("s1")
    daemon = node.start_daemon(_unique("listener"), ["sh", "-c", "echo listening; nc -lk 7700"])
    wait_for(node, PortOpen(7700, timeout=10))
    wait_for(node, CommandSucceeds("nc -z localhost 7700", timeout=10))
    with pytest.raises(WaitTimeout, match="listening"):
        wait_for(node, LogLine("never printed", log=daemon.name, timeout=0.3))
    node.signal(daemon, signal.SIGKILL)


def test_freeze_pauses_the_whole_container(cluster: Cluster) -> None:
    node = cluster.node("w1")
    assert isinstance(node, Freezable)
    inspect = engine().api.inspect_container
    node.freeze()
    try:
        assert inspect(node.container_id)["State"]["Paused"] is True
    finally:
        node.thaw()
    assert inspect(node.container_id)["State"]["Paused"] is False
    assert node.run("true").ok


def test_cpu_quota_is_applied_and_removed(cluster: Cluster) -> None:
    node = cluster.node("w2")
    assert isinstance(node, Throttleable)
    read = "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us"
    node.set_cpu_quota(2_000, period_us=20_000)
    assert node.run(read).stdout.split() == ["2000", "20000"]
    node.set_cpu_quota(None)
    assert node.run(read).stdout.split()[0] == "-1"
    with pytest.raises(NodeError, match="below the kernel's minimum"):
        node.set_cpu_quota(999)


def test_run_in_netns_shares_the_containers_network_namespace(cluster: Cluster) -> None:
    node = cluster.node("w3")
    assert isinstance(node, NetnsRunner)
    chain = _unique("FC").upper()[:28]
    assert node.run_in_netns(["iptables", "-w", "-N", chain]).ok
    try:
        assert chain in node.run(["iptables", "-w", "-n", "-L"]).stdout
    finally:
        assert node.run_in_netns(["iptables", "-w", "-X", chain]).ok
    restored = node.run_in_netns(["iptables-restore", "--noflush"], stdin=b"*filter\nCOMMIT\n")
    assert restored.ok, restored.stderr


def test_calls_are_timed_per_operation(cluster: Cluster) -> None:
    node = cluster.node("l1")
    before = len(node.stats.seconds("run"))
    node.run("true")
    assert len(node.stats.seconds("run")) == before + 1
    assert node.stats.summary()["run"]["count"] >= 1


def test_attach_finds_the_running_cluster(cluster: Cluster) -> None:
    attached = Cluster.attach(cluster.run_id)
    assert attached.keep
    assert {n: node.ip for n, node in attached.nodes.items()} == {
        n: node.ip for n, node in cluster.nodes.items()
    }
    daemon: Daemon = attached.node("w1").start_daemon(_unique("attached"), ["sleep", "600"])
    attached.node("w1").signal(daemon, signal.SIGKILL)
    with pytest.raises(NodeError, match="no cluster with run id"):
        Cluster.attach("no-such-run")


def test_a_daemon_starts_once_when_the_engine_loses_the_exec_output(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = cluster.node("w2")
    assert isinstance(node, DockerNode)
    real_exec = node._exec
    calls: list[list[str]] = []

    def loses_first_output(command: list[str], **kwargs: object) -> tuple[int, str, str]:
        code, out, err = real_exec(command, **kwargs)  # type: ignore[arg-type]
        calls.append(command)
        # What dockerd does under heavy load: the command ran, exit 0, its output never arrived.
        return (code, "", "") if len(calls) == 1 else (code, out, err)

    monkeypatch.setattr(node, "_exec", loses_first_output)
    name = _unique("quiet")
    daemon = node.start_daemon(name, ["sleep", "600"])
    monkeypatch.undo()
    running = node.run(["pgrep", "-f", "-x", "sleep 600"]).stdout.split()
    assert str(daemon.pid) in running
    assert len(calls) == 2  # the pid was read back, not started a second time
    node.signal(daemon, signal.SIGKILL)
