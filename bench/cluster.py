"""Cluster backend bench: time to ready, time to tear down, per-call latency of the fault paths.

Run with the images built (``fencecheck images build``)::

    python bench/cluster.py [--rounds 3] [--calls 300]

Prints each figure against its target. Exit status is 0 whatever the numbers: machines are
noisy, and the figures are for people to read, not a gate.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from harness.node.docker.cluster import Cluster, default_topology, new_run_id
from harness.node.docker.engine import engine
from harness.node.docker.images import node_image
from harness.node.docker.node import CallStats, DockerNode

_TARGETS = {
    "cluster up (5 nodes, to ready)": ("median", 5.0),
    "cluster down (5 nodes)": ("median", 3.0),
    "signal, host pid (SIGSTOP/SIGCONT)": ("p99", 0.010),
}


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _lifecycle(image: str, rounds: int) -> tuple[list[float], list[float], Cluster]:
    """Bring 5-node clusters up and down ``rounds`` times; the last one is left up."""
    ups: list[float] = []
    downs: list[float] = []
    for index in range(rounds):
        cluster = Cluster(f"bench-{new_run_id()}", default_topology(3), image=image)
        start = time.perf_counter()
        cluster.up()
        ups.append(time.perf_counter() - start)
        if index == rounds - 1:
            return ups, downs, cluster
        start = time.perf_counter()
        cluster.down()
        downs.append(time.perf_counter() - start)
    raise ValueError("rounds must be at least 1")


def _calls(node: DockerNode, calls: int) -> CallStats:
    """Exercise each node call ``calls`` times (fewer for the slow ones); return their timings."""
    node.stats.clear()
    daemon = node.start_daemon("bench-sleeper", ["sleep", "3600"])
    for _ in range(calls):
        node.signal(daemon, signal.SIGSTOP)
        while node.process_state(daemon) != "T":
            pass
        node.signal(daemon, signal.SIGCONT)

    def freeze_and_thaw() -> None:
        node.freeze()
        node.thaw()

    slow: list[Callable[[], object]] = [
        lambda: node.run(["true"]),
        lambda: node.run_in_netns(["iptables", "-w", "-n", "-L", "INPUT"]),
        freeze_and_thaw,
        lambda: node.set_cpu_quota(5_000, period_us=10_000),
        lambda: node.put_file("/tmp/bench.bin", b"x" * 4096),
    ]
    for action in slow:
        for _ in range(max(calls // 5, 10)):
            action()
    node.set_cpu_quota(None)
    slow_path = DockerNode(
        engine().containers.get(node.container_id),
        name=node.name,
        role=node.role,
        ip=node.ip,
        fast_paths=False,
    )
    exec_daemon = slow_path.start_daemon("bench-exec-sleeper", ["sleep", "3600"])
    for _ in range(max(calls // 5, 10)):
        slow_path.signal(exec_daemon, signal.SIGSTOP)
        slow_path.signal(exec_daemon, signal.SIGCONT)
    for op in slow_path.stats.ops():
        for seconds in slow_path.stats.seconds(op):
            node.stats.add(op, seconds)
    return node.stats


def main() -> None:
    """Run the bench and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="cluster up/down rounds")
    parser.add_argument("--calls", type=int, default=300, help="signal round trips per run")
    args = parser.parse_args()
    console = Console()

    image = node_image()
    ups, downs, cluster = _lifecycle(image, args.rounds + 1)
    try:
        stats = _calls(cluster.node("w1"), args.calls)
    finally:
        start = time.perf_counter()
        cluster.down()
        downs.append(time.perf_counter() - start)
    # The first round pays one-off costs (image layers into the page cache); it is shown apart.
    first_up, ups = ups[0], ups[1:]

    table = Table("measure", "n", "median", "p99", "target", "ratio")
    rows: dict[str, list[float]] = {
        "cluster up (5 nodes, to ready)": ups,
        "cluster down (5 nodes)": downs,
        "signal, host pid (SIGSTOP/SIGCONT)": stats.seconds("signal"),
        "signal, exec fallback": stats.seconds("signal:exec"),
        "process_state, /proc": stats.seconds("process_state"),
        "run (exec `true`)": stats.seconds("run"),
        "run_in_netns (nsenter iptables -L)": stats.seconds("run_in_netns"),
        "freeze": stats.seconds("freeze"),
        "thaw": stats.seconds("thaw"),
        "set_cpu_quota": stats.seconds("set_cpu_quota"),
        "put_file (4 KiB)": stats.seconds("put_file"),
    }
    for name, values in rows.items():
        if not values:
            table.add_row(name, "0", "-", "-", "", "")
            continue
        median, p99 = statistics.median(values), _p99(values)
        target_text = ratio_text = ""
        if name in _TARGETS:
            which, target = _TARGETS[name]
            figure = median if which == "median" else p99
            ratio = figure / target
            colour = "green" if ratio <= 1 else "red"
            target_text = f"{which} <= {_ms(target)}"
            ratio_text = f"[{colour}]{ratio:.2f}[/{colour}]"
        table.add_row(name, str(len(values)), _ms(median), _ms(p99), target_text, ratio_text)
    console.print(table)
    console.print(f"first cluster up (cold): {_ms(first_up)}", style="dim")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    main()
