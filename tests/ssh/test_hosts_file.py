"""The hosts file, the control-connection exemption and the cgroup layout, without hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.node.ssh import HostsError, exempt_control, load_hosts
from harness.node.ssh.cgroups import parse_probe
from harness.node.ssh.connection import ControlEndpoint


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hosts.toml"
    path.write_text(text)
    return path


def test_defaults_names_and_relative_paths(tmp_path: Path) -> None:
    hosts = load_hosts(
        _write(
            tmp_path,
            """
[ssh]
user = "admin"
key = "keys/id"
known_hosts = "known"
[[host]]
address = "10.0.0.1"
role = "lock"
[[host]]
address = "10.0.0.2"
role = "worker"
port = 2222
user = "root"
[[host]]
address = "10.0.0.3"
role = "worker"
name = "edge"
ip = "192.168.1.3"
""",
        )
    )
    assert [h.name for h in hosts.hosts] == ["l1", "w1", "edge"]
    assert hosts.roles() == {"l1": "lock", "w1": "worker", "edge": "worker"}
    first, second, third = hosts.hosts
    assert (first.user, first.port, first.key) == ("admin", 22, tmp_path / "keys" / "id")
    assert (second.user, second.port) == ("root", 2222)
    assert third.ip == "192.168.1.3" and first.ip == "10.0.0.1"
    assert hosts.known_hosts == tmp_path / "known"
    assert hosts.accept_new is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no hosts"),
        ('[[host]]\naddress = "10.0.0.1"\n', "has no 'role'"),
        ('[[host]]\naddress = "10.0.0.1"\nrole = "lock"\ncolour = 1\n', "unknown key(s) colour"),
        ('[[host]]\naddress = "10.0.0.1"\nrole = "lock"\nport = 70000\n', "port 70000"),
        (
            '[[host]]\naddress = "10.0.0.1"\nrole = "w"\n[[host]]\naddress = "10.0.0.2"\n'
            'role = "w"\nname = "w1"\n',
            "repeated: w1",
        ),
        ('[ssh]\naccept_new = "yes"\n[[host]]\naddress = "1.2.3.4"\nrole = "w"\n', "true or"),
        ("[[host]\n", "not valid TOML"),
    ],
)
def test_bad_hosts_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(HostsError) as raised:
        load_hosts(_write(tmp_path, text))
    assert message in str(raised.value)


def test_a_missing_hosts_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(HostsError, match="cannot read hosts file"):
        load_hosts(tmp_path / "absent.toml")


_CONTROL = ControlEndpoint("172.17.0.1", "172.17.0.5", 22)


def test_partition_scripts_let_the_control_connection_through_first() -> None:
    script = b"*filter\n:FENCECHECK - [0:0]\n-I INPUT 1 -j FENCECHECK\n" + (
        b"-A FENCECHECK -s 172.17.0.1/32 -j DROP\nCOMMIT\n"
    )
    lines = exempt_control(script, _CONTROL).decode().splitlines()
    assert lines[:2] == ["*filter", ":FENCECHECK - [0:0]"]
    # Both directions of the SSH connection return before the drop that would match them.
    assert lines[2] == "-A FENCECHECK -p tcp -s 172.17.0.1/32 -d 172.17.0.5/32 --dport 22 -j RETURN"
    assert lines[3] == "-A FENCECHECK -p tcp -s 172.17.0.5/32 --sport 22 -d 172.17.0.1/32 -j RETURN"
    assert lines.index("-A FENCECHECK -s 172.17.0.1/32 -j DROP") > 3


def test_removal_scripts_and_builtin_chains_are_left_alone() -> None:
    removal = b"*filter\n:FENCECHECK - [0:0]\n-D INPUT -j FENCECHECK\n-X FENCECHECK\nCOMMIT\n"
    assert exempt_control(removal, _CONTROL) == removal
    builtin = b"*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n"
    assert exempt_control(builtin, _CONTROL) == builtin
    ipv6 = ControlEndpoint("fe80::1", "fe80::2", 22)
    declared = b"*filter\n:FENCECHECK - [0:0]\nCOMMIT\n"
    assert exempt_control(declared, ipv6) == declared


def test_cgroup_layouts_are_read_from_the_mounts() -> None:
    v1 = parse_probe(
        "cgroup /sys/fs/cgroup/freezer rw,nosuid,freezer\n"
        "cgroup /sys/fs/cgroup/cpu,cpuacct rw,nosuid,cpu,cpuacct\n"
        "cgroup2 /sys/fs/cgroup/unified rw,nosuid\n"
        "controllers /sys/fs/cgroup/unified \n"
    )
    assert (v1.version, v1.freezer, v1.cpu) == (
        1,
        "/sys/fs/cgroup/freezer/fencecheck",
        "/sys/fs/cgroup/cpu,cpuacct/fencecheck",
    )
    assert v1.daemon_dirs("lock") == [
        "/sys/fs/cgroup/freezer/fencecheck/lock",
        "/sys/fs/cgroup/cpu,cpuacct/fencecheck/lock",
    ]
    v2 = parse_probe("cgroup2 /sys/fs/cgroup rw\ncontrollers /sys/fs/cgroup cpuset,cpu,io,pids\n")
    group = "/sys/fs/cgroup/fencecheck"
    assert (v2.version, v2.freezer, v2.cpu) == (2, group, group)
    assert v2.daemon_dirs("lock") == ["/sys/fs/cgroup/fencecheck/lock"]
    assert "+cpu" in v2.prepare_script()
    read_only = parse_probe("cgroup /sys/fs/cgroup/freezer ro,freezer\n")
    assert (read_only.version, read_only.freezer, read_only.cpu) == (0, None, None)
    assert read_only.freeze_script(True) is None and read_only.quota_script(None, 100) is None
