"""The doctor for real hosts: can each host of a hosts file run fencecheck and take every fault?

Each check does the real thing once on the host (a login, ``sudo -n``, an iptables chain created
and deleted, a cgroup created and removed, ``python3``), measures what matters (time per command,
clock offset from the controller, free disk) and, when something fails, says how to fix it.
"""

from __future__ import annotations

import shlex
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

from harness.node import NodeError
from harness.node.clocks import check_compiler, check_libfaketime
from harness.node.ssh.cluster import connect, on_hosts
from harness.node.ssh.hosts import HostsFile, HostSpec
from harness.node.ssh.node import SshNode
from harness.node.ssh.packages import REQUIRED, missing_packages

__all__ = ["CHECKS", "HostCheck", "check_hosts"]

_MAX_OFFSET_S: Final = 0.5
_MIN_FREE_MB: Final = 200
_LATENCY_SAMPLES: Final = 5
_DOCTOR_CHAIN: Final = "FENCECHECK-DOCTOR"

CHECKS: Final = (
    "reachable",
    "sudo",
    "iptables",
    "cgroups",
    "python3",
    "packages",
    "clock offset",
    "libfaketime",
    "C compiler",
    "free disk",
    "control exempt",
)
"""The rows every host gets, in order."""


@dataclass(frozen=True, slots=True)
class HostCheck:
    """One row of the report: a host, what was tried, whether it worked, and the fix if not."""

    host: str
    check: str
    ok: bool
    detail: str
    fix: str = ""


def check_hosts(hosts: HostsFile) -> list[HostCheck]:
    """Every check on every host (hosts in parallel), in file order then :data:`CHECKS` order."""
    rows = on_hosts(list(hosts.hosts), lambda spec: list(_check_host(hosts, spec)))
    return [row for result in rows if isinstance(result, list) for row in result]


def _check_host(hosts: HostsFile, spec: HostSpec) -> Iterator[HostCheck]:
    where = f"{spec.user}@{spec.address}:{spec.port}"
    try:
        node = connect(hosts, spec)
    except NodeError as problem:
        yield HostCheck(spec.name, "reachable", False, str(problem), "see the message")
        for name in CHECKS[1:]:
            yield HostCheck(spec.name, name, False, "not checked: no connection", "fix reachable")
        return
    try:
        samples = []
        for _ in range(_LATENCY_SAMPLES):
            start = time.perf_counter()
            node.run("true")
            samples.append(time.perf_counter() - start)
        latency = statistics.median(samples) * 1000
        yield HostCheck(spec.name, "reachable", True, f"{where}, {latency:.1f} ms per command")
        for name, probe in _PROBES:
            try:
                detail, fix = probe(node)
            except NodeError as problem:
                detail, fix = str(problem), "see the message"
            yield HostCheck(spec.name, name, not fix, detail, fix)
    finally:
        node.close()


def _sudo(node: SshNode) -> tuple[str, str]:
    if not node.connection.sudo:
        return "logged in as root", ""
    result = node.run("id -u")
    if result.ok and result.stdout.strip() == "0":
        return f"{node.connection.spec.user} runs commands as root with sudo -n", ""
    return (
        f"sudo -n failed: {result.stderr.strip()[-200:]}",
        f"add `{node.connection.spec.user} ALL=(ALL) NOPASSWD: ALL` to /etc/sudoers.d/",
    )


def _iptables(node: SshNode) -> tuple[str, str]:
    result = node.run(f"iptables -w -N {_DOCTOR_CHAIN} && iptables -w -X {_DOCTOR_CHAIN}")
    if result.ok:
        return "created and deleted a chain", ""
    return (
        f"iptables failed: {(result.stderr or result.stdout).strip()[-200:]}",
        "install iptables (`apt-get install iptables`); the login needs root or sudo",
    )


def _cgroups(node: SshNode) -> tuple[str, str]:
    layout = node.cgroups
    if layout.freezer is None or layout.cpu is None:
        return (
            f"cgroups {layout.describe()}",
            "mount a writable freezer and cpu controller (v1), or boot with the unified "
            "cgroup v2 hierarchy; without them use the pause and partition nemeses only",
        )
    probe = layout.daemon_dirs("doctor")
    quoted = " ".join(shlex.quote(d) for d in probe)
    result = node.run(f"{layout.prepare_script()} && mkdir -p {quoted} && rmdir {quoted}")
    if not result.ok:
        return (
            f"cgroups {layout.describe()}, but creating one failed: {result.stderr.strip()[-200:]}",
            "the cgroup file system must be writable by root on the host",
        )
    return f"cgroups {layout.describe()}; created and removed a cgroup", ""


def _python(node: SshNode) -> tuple[str, str]:
    result = node.run(["python3", "-c", "import sys; print(sys.version.split()[0])"])
    if result.ok:
        return f"python3 {result.stdout.strip()}", ""
    return "python3 is missing", "install it (`apt-get install python3`)"


def _packages(node: SshNode) -> tuple[str, str]:
    missing = missing_packages(node)
    if missing:
        return f"missing {', '.join(missing)}", "fencecheck hosts install FILE (uses apt-get)"
    return f"every tool the harness runs is there ({', '.join(sorted(REQUIRED))})", ""


def _clock(node: SshNode) -> tuple[str, str]:
    before = time.time()
    result = node.run("date +%s.%N", check=True)
    after = time.time()
    offset = float(result.stdout.strip()) - (before + after) / 2
    spread = (after - before) * 500
    detail = f"{offset * 1000:+.0f} ms (±{spread:.0f} ms); run times come from the controller"
    if abs(offset) > _MAX_OFFSET_S:
        return detail, "synchronise the clock (chrony or systemd-timesyncd); logs will disagree"
    return detail, ""


def _libfaketime(node: SshNode) -> tuple[str, str]:
    try:
        return check_libfaketime(node), ""
    except NodeError as problem:
        return str(problem), "fencecheck hosts install FILE (installs faketime with apt-get)"


def _compiler(node: SshNode) -> tuple[str, str]:
    try:
        return check_compiler(node), ""
    except NodeError as problem:
        return str(
            problem
        ), "fencecheck hosts install FILE (installs gcc and libc6-dev with apt-get)"


def _disk(node: SshNode) -> tuple[str, str]:
    result = node.run("df -Pk /var/lib /tmp | awk 'NR>1{print $4}'", check=True)
    free_mb = min(int(x) for x in result.stdout.split()) // 1024
    if free_mb < _MIN_FREE_MB:
        return f"{free_mb} MB free", f"free at least {_MIN_FREE_MB} MB in /var/lib and /tmp"
    return f"{free_mb} MB free in /var/lib and /tmp", ""


def _control(node: SshNode) -> tuple[str, str]:
    control = node.control
    if control is None:
        return (
            "the host does not say where the connection comes from ($SSH_CONNECTION is unset)",
            "use OpenSSH's sshd; partitions need the address to exempt the controller",
        )
    return (
        f"partitions let {control.controller_ip} -> {control.host_ip}:{control.host_port} through",
        "",
    )


_PROBES: Final[tuple[tuple[str, Callable[[SshNode], tuple[str, str]]], ...]] = (
    ("sudo", _sudo),
    ("iptables", _iptables),
    ("cgroups", _cgroups),
    ("python3", _python),
    ("packages", _packages),
    ("clock offset", _clock),
    ("libfaketime", _libfaketime),
    ("C compiler", _compiler),
    ("free disk", _disk),
    ("control exempt", _control),
)
