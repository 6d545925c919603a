"""Environment checks: can this machine run fencecheck's clusters and inject every fault?

Each check does the real thing once (an iptables chain, a CPU quota, a freeze, a SIGSTOP) in a
throwaway one-node cluster and reports what happened and, when it failed, how to fix it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import docker.errors

from harness.node import NodeError
from harness.node.clocks import check_libfaketime
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.engine import EngineError, engine
from harness.node.docker.images import ImageError, image_exists, node_tag
from harness.node.docker.node import DockerNode

__all__ = ["Check", "run_checks"]

_STATE_WAIT_S: Final = 2.0
_CHAIN: Final = "FENCECHECK-DOCTOR"


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one check: what was tried, whether it worked, and the fix if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


_Probe = Callable[[DockerNode], str]


def run_checks() -> Iterator[Check]:
    """Run every check, yielding each result as soon as it is known."""
    try:
        version = engine().version()
    except EngineError as problem:
        yield Check("docker engine", False, str(problem), "run scripts/install.sh")
        return
    yield Check("docker engine", True, f"engine {version.get('Version', '?')} answers")

    try:
        tag = node_tag()
        present = image_exists(tag)
    except (ImageError, docker.errors.APIError) as problem:
        yield Check("node image", False, str(problem), "fix docker/ recipes, then images build")
        return
    if not present:
        yield Check("node image", False, f"{tag} is not built", "fencecheck images build")
        return
    yield Check("node image", True, tag)

    try:
        with Cluster(f"doctor-{new_run_id()}", [NodeSpec("w1", "worker")], image=tag) as cluster:
            yield Check("container with NET_ADMIN", True, f"started in {cluster.network_name}")
            yield from _fault_checks(cluster.node("w1"))
    except NodeError as problem:
        yield Check(
            "container with NET_ADMIN", False, str(problem), "check `docker info` and its log"
        )


def _fault_checks(node: DockerNode) -> Iterator[Check]:
    for name, probe, fix in _PROBES:
        try:
            yield Check(name, True, probe(node))
        except (NodeError, docker.errors.APIError, OSError) as problem:
            yield Check(name, False, str(problem).splitlines()[0], fix)


def _iptables_in_container(node: DockerNode) -> str:
    script = (
        f"iptables -w -N {_CHAIN} && iptables -w -A {_CHAIN} -j DROP && "
        f"iptables -w -F {_CHAIN} && iptables -w -X {_CHAIN}"
    )
    node.run(script, check=True)
    return "created, filled and removed a chain (exec)"


def _iptables_from_host(node: DockerNode) -> str:
    if node.host_view is None:
        raise NodeError(
            "the controller cannot see the engine's processes (not root, or a remote engine); "
            "faults fall back to exec (~45 ms instead of <1 ms)"
        )
    result = node.run_in_netns(["iptables", "-w", "-n", "-L"])
    if not result.ok:
        raise NodeError(f"nsenter iptables exited {result.exit_code}: {result.stderr.strip()}")
    return f"nsenter -t {node.host_view.init_pid} -n iptables works"


def _cpu_quota(node: DockerNode) -> str:
    node.set_cpu_quota(2_000, period_us=10_000)
    try:
        seen = node.run(
            "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max"
        )
    finally:
        node.set_cpu_quota(None)
    if "2000" not in seen.stdout:
        raise NodeError(f"quota set to 2000 us but the container reports {seen.stdout.strip()!r}")
    return "2 ms per 10 ms applied and removed"


def _freezer(node: DockerNode) -> str:
    node.freeze()
    node.thaw()
    return "paused and unpaused, confirmed by the engine"


def _signals(node: DockerNode) -> str:
    daemon = node.start_daemon("doctor-sleeper", ["sleep", "600"])
    try:
        for signum, wanted in ((signal.SIGSTOP, "T"), (signal.SIGCONT, "S")):
            node.signal(daemon, signum)
            deadline = time.monotonic() + _STATE_WAIT_S
            while (state := node.process_state(daemon)) != wanted:
                if time.monotonic() > deadline:
                    raise NodeError(
                        f"after {signal.Signals(signum).name} the state is {state!r}, not {wanted}"
                    )
                time.sleep(0.001)
    finally:
        node.signal(daemon, signal.SIGKILL)
    path = "host pid" if daemon.host_pid is not None else "exec (slow path)"
    return f"SIGSTOP seen as T, SIGCONT as S, via {path}"


_PROBES: Final[list[tuple[str, _Probe, str]]] = [
    (
        "iptables in a container",
        _iptables_in_container,
        "the engine must grant NET_ADMIN and the kernel needs nf_tables; `modprobe nf_tables`",
    ),
    (
        "iptables from the host (nsenter)",
        _iptables_from_host,
        "run fencecheck as root on the engine's host; apt-get install util-linux iptables",
    ),
    (
        "cgroup CPU quota",
        _cpu_quota,
        "enable CONFIG_CFS_BANDWIDTH in the kernel; check `docker info` for cpu cfs quota",
    ),
    ("cgroup freezer", _freezer, "the kernel needs the freezer cgroup (CONFIG_CGROUP_FREEZER)"),
    (
        "libfaketime (clock faults)",
        check_libfaketime,
        "rebuild the node image (fencecheck images build): docker/node/packages.txt has faketime",
    ),
    (
        "signals (SIGSTOP/SIGCONT)",
        _signals,
        "the controller must be root on the engine's host for fast signals; see the detail",
    ),
]
