"""The SSH backend against sshd containers acting as hosts: commands, files, daemons, every
fault capability, the doctor, and that a partition never cuts the control connection."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.node import Freezable, NetnsRunner, NodeError, Throttleable
from harness.node.ssh import SshCluster, SshNode, connect, load_hosts
from harness.node.ssh.containers import SshdHosts, write_hosts_file
from harness.node.ssh.doctor import CHECKS
from harness.node.ssh.packages import missing_packages
from nemeses.clock import ClockStepNemesis
from nemeses.partition import PartitionNemesis
from nemeses.protocol import Fault
from nemeses.topology import partition_fault
from tests.support.clocked import NAME, start_clocked_server

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cluster(test_hosts: SshdHosts) -> Iterator[SshCluster]:
    with SshCluster(load_hosts(test_hosts.hosts_file)) as connected:
        yield connected


def test_commands_env_stdin_and_timeouts(cluster: SshCluster) -> None:
    node = cluster.nodes["w1"]
    assert isinstance(node, Freezable | Throttleable | NetnsRunner)
    result = node.run("echo $GREETING; cat", env={"GREETING": "hello"}, stdin=b"piped")
    assert (result.exit_code, result.stdout) == (0, "hello\npiped")
    assert node.run(["sh", "-c", "exit 4"]).exit_code == 4
    with pytest.raises(NodeError, match="exited 4"):
        node.run("exit 4", check=True)
    with pytest.raises(NodeError, match="timed out"):
        node.run(["sleep", "10"], timeout=0.5)


def test_files_go_through_sftp_and_teardown_removes_them(test_hosts: SshdHosts) -> None:
    hosts = load_hosts(test_hosts.hosts_file)
    with SshCluster(hosts) as connected:
        node = connected.nodes["s1"]
        node.put_file("/opt/fc-test/deep/file.bin", b"\x00\x01binary", mode=0o600)
        assert node.get_file("/opt/fc-test/deep/file.bin") == b"\x00\x01binary"
        assert node.run("stat -c %a /opt/fc-test/deep/file.bin").stdout.strip() == "600"
        with pytest.raises(NodeError, match="absolute path"):
            node.put_file("relative.txt", b"")
        node.start_daemon("sleeper", ["sleep", "300"])
    with SshCluster(hosts) as again:
        node = again.nodes["s1"]
        assert not node.run("test -e /opt/fc-test/deep/file.bin").ok
        assert not node.run("pgrep -x sleep").ok


def test_a_login_user_other_than_root_goes_through_sudo(
    test_hosts: SshdHosts, tmp_path: Path
) -> None:
    path = write_hosts_file(
        tmp_path / "fence.toml",
        test_hosts.ips[:1],
        ("worker",),
        test_hosts.key,
        test_hosts.known_hosts,
        user="fence",
    )
    with SshCluster(load_hosts(path)) as connected:
        node = connected.nodes["w1"]
        assert node.connection.sudo
        assert node.run("id -u").stdout.strip() == "0"
        node.put_file("/etc/fencecheck-sudo-test", b"root-owned")
        assert node.get_file("/etc/fencecheck-sudo-test") == b"root-owned"
        assert node.run("stat -c %U /etc/fencecheck-sudo-test").stdout.strip() == "root"


def test_daemons_signals_states_and_restarts(cluster: SshCluster) -> None:
    node = cluster.nodes["w1"]
    daemon = node.start_daemon("napper", ["sleep", "300"], cwd="/tmp")
    assert node.process_state(daemon) in ("R", "S", "D")
    assert node.run("cat /run/fencecheck/napper.pid").stdout.split()[0] == str(daemon.pid)
    # Detached: a session of its own (once the launcher has exec'd), in its own cgroup.
    session = f'[ "$(ps -o sid= -p {daemon.pid} | tr -d " ")" = {daemon.pid} ]'
    assert node.run(f"until {session}; do sleep 0.01; done", timeout=5).ok
    assert "/fencecheck/napper" in node.run(f"cat /proc/{daemon.pid}/cgroup").stdout
    node.signal(daemon, signal.SIGSTOP)
    assert node.process_state(daemon) == "T"
    node.signal(daemon, signal.SIGCONT)
    assert node.process_state(daemon) != "T"
    node.signal(daemon, signal.SIGKILL)
    node.run(f"while kill -0 {daemon.pid} 2>/dev/null; do sleep 0.01; done", timeout=5)
    assert node.process_state(daemon) is None
    with pytest.raises(NodeError, match="has exited"):
        node.signal(daemon, signal.SIGTERM)
    again = node.start_daemon("napper", ["sleep", "300"])
    assert node.daemon("napper") == again and again.pid != daemon.pid


def test_freeze_and_throttle_act_on_the_daemons_cgroup_only(cluster: SshCluster) -> None:
    node = cluster.nodes["w2"]
    daemon = node.start_daemon("spinner", ["sh", "-c", "while :; do :; done"])
    node.freeze()
    try:
        state = node.run(
            f"cat {node.cgroups.freezer}/freezer.state || cat {node.cgroups.freezer}/cgroup.events"
        ).stdout
        assert "FROZEN" in state or "frozen 1" in state
        # The control connection still works while the daemons are frozen.
        assert node.run("echo alive").stdout == "alive\n"
    finally:
        node.thaw()
    node.set_cpu_quota(1_000, 50_000)
    cap = node.run(f"cat {node.cgroups.cpu}/cpu.cfs_quota_us {node.cgroups.cpu}/cpu.cfs_period_us")
    assert cap.stdout.split() == ["1000", "50000"]
    node.set_cpu_quota(None, 100_000)
    node.signal(daemon, signal.SIGKILL)


def _reaches(node: SshNode, ip: str) -> bool:
    probe = (
        "import socket,sys\n"
        "try:\n socket.create_connection((sys.argv[1], 22), timeout=1).close()\n"
        "except OSError: sys.exit(1)\n"
    )
    return node.run(["python3", "-c", probe, ip]).ok


def test_a_partition_never_cuts_the_control_connection(cluster: SshCluster) -> None:
    nodes = cluster.nodes
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    fault: Fault = partition_fault("isolate", ["w1"], list(nodes))
    try:
        nemesis.invoke("start-partition", fault)
        assert not _reaches(nodes["w2"], nodes["w1"].ip)
        # The isolated host still answers the controller, over the connection it had.
        assert nodes["w1"].run("echo still here").stdout == "still here\n"
        assert nodes["w1"].connection.alive
        listing = nodes["w1"].run("iptables -S FENCECHECK").stdout
        assert "--dport 22 -j RETURN" in listing
    finally:
        report = nemesis.heal()
    assert report.ok, report.errors
    assert _reaches(nodes["w2"], nodes["w1"].ip)


def test_hosts_check_reports_every_row(test_hosts: SshdHosts, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "hosts", "check", str(test_hosts.hosts_file)],
        capture_output=True,
        text=True,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("l1", "s1", "w1", "w2"):
        rows = [line for line in done.stdout.splitlines() if f"│ {name} " in line]
        assert [check for check in CHECKS if any(f" {check} " in row for row in rows)] == list(
            CHECKS
        )
    broken = write_hosts_file(
        tmp_path / "broken.toml",
        test_hosts.ips[:1],
        ("worker",),
        test_hosts.key,
        test_hosts.known_hosts,
        port=2,
    )
    failed = subprocess.run(
        [sys.executable, "-m", "harness", "hosts", "check", str(broken)],
        capture_output=True,
        text=True,
        env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert failed.returncode == 3
    assert failed.stdout.count("FAIL") == len(CHECKS)
    assert "cannot connect" in failed.stdout


def test_a_host_missing_a_tool_is_refused_with_the_fix(test_hosts: SshdHosts) -> None:
    hosts = load_hosts(test_hosts.hosts_file)
    node = connect(hosts, hosts.hosts[3])
    node.run("mv /usr/bin/tar /usr/bin/tar.away", check=True)
    try:
        assert missing_packages(node) == ["tar"]
        with (
            pytest.raises(NodeError, match="missing tar; install them with `fencecheck hosts"),
            SshCluster(hosts),
        ):
            pass
    finally:
        node.run("mv /usr/bin/tar.away /usr/bin/tar", check=True)
        node.close()
    assert missing_packages(connect(hosts, hosts.hosts[3])) == []


def test_hosts_heal_undoes_what_a_crashed_controller_left(
    cluster: SshCluster, test_hosts: SshdHosts
) -> None:
    node = cluster.nodes["w1"]
    daemon = node.start_daemon("left-over", ["sleep", "300"])
    nemesis = PartitionNemesis()
    nemesis.setup(cluster.nodes)
    nemesis.invoke("start-partition", partition_fault("isolate", ["w1"], list(cluster.nodes)))
    node.signal(daemon, signal.SIGSTOP)
    node.freeze()
    node.set_cpu_quota(1_000, 50_000)
    healed = subprocess.run(
        [sys.executable, "-m", "harness", "hosts", "heal", str(test_hosts.hosts_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert "w1: removed our iptables rules; thawed; CPU cap removed; continued pids" in (
        healed.stdout.replace("\n", " ")
    )
    assert "FENCECHECK" not in node.run("iptables -S").stdout
    assert node.process_state(daemon) not in ("T", None)
    assert "THAWED" in node.run(f"cat {node.cgroups.freezer}/freezer.state").stdout
    assert node.run(f"cat {node.cgroups.cpu}/cpu.cfs_quota_us").stdout.strip() == "-1"
    node.signal(daemon, signal.SIGKILL)


def test_unknown_host_keys_are_refused_unless_accepted(
    test_hosts: SshdHosts, tmp_path: Path
) -> None:
    strict = tmp_path / "strict.toml"
    write_hosts_file(strict, test_hosts.ips[:1], ("worker",), test_hosts.key, tmp_path / "empty")
    strict.write_text(strict.read_text().replace("accept_new = true", "accept_new = false"))
    hosts = load_hosts(strict)
    with pytest.raises(NodeError, match=r"host key unknown .*ssh-keyscan"):
        connect(hosts, hosts.hosts[0])
    # Recorded on first contact when accepted, then verified from the file alone.
    accepting = write_hosts_file(
        tmp_path / "accept.toml", test_hosts.ips[:1], ("worker",), test_hosts.key, tmp_path / "kh"
    )
    connect(load_hosts(accepting), load_hosts(accepting).hosts[0]).close()
    assert test_hosts.ips[0] in (tmp_path / "kh").read_text()
    strict.write_text(strict.read_text().replace(str(tmp_path / "empty"), str(tmp_path / "kh")))
    connect(load_hosts(strict), load_hosts(strict).hosts[0]).close()


def test_a_run_on_unreachable_hosts_is_an_error_naming_the_host(
    test_hosts: SshdHosts, tmp_path: Path
) -> None:
    broken = write_hosts_file(
        tmp_path / "down.toml",
        test_hosts.ips,
        ("lock", "store", "worker", "worker"),
        test_hosts.key,
        test_hosts.known_hosts,
        port=2,
    )
    argv = [sys.executable, "-m", "harness", "run", "--hosts", str(broken), "--nemesis", "none"]
    done = subprocess.run(
        [*argv, "--store", str(tmp_path / "store"), "--no-progress"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot connect" in done.stderr and "l1" in done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--hosts", str(tmp_path / "none.toml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 3 and "cannot read hosts file" in bad.stderr


def test_a_clock_step_on_a_real_host_moves_one_process_and_not_the_host(
    cluster: SshCluster,
) -> None:
    node = cluster.nodes["w2"]
    start_clocked_server(node)
    nemesis = ClockStepNemesis()
    nemesis.setup(cluster.nodes)
    fault = Fault("clock-step", ("w2",), {"process": NAME, "by_s": 7.5, "back": True})
    facts = nemesis.invoke("start-clock-step", fault)["clocks"][f"w2:{NAME}"]
    assert facts["confirmed"]["offset_s"] == pytest.approx(7.5, abs=0.5)  # host clocks may differ
    host_before = float(node.run("date +%s.%N", check=True).stdout)
    stop = nemesis.invoke("stop-clock-step", fault)["clocks"][f"w2:{NAME}"]
    assert stop["confirmed"]["offset_s"] == pytest.approx(0.0, abs=0.5)
    host_after = float(node.run("date +%s.%N", check=True).stdout)
    assert 0 <= host_after - host_before < 5  # the host's own clock never jumped
