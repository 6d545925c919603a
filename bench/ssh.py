"""Benchmark: fault latency over SSH, from issuing a fault to its confirmation, p50 and p99.

Like ``bench/nemesis.py`` but on hosts reached through the SSH backend: the hosts of ``--hosts
FILE`` (the first three: lock, store, worker roles as the file says), or, without it, three sshd
containers acting as hosts. Each fault start and stop goes through the real nemeses, whose
``invoke`` returns once the fault is observed in force (or undone). Prints a table against the
targets of issue 14: pause confirmed <= 20 ms p99, partition <= 100 ms p99; freeze, throttle and
kill are measured and printed. Also prints the time of one plain command.

    python bench/ssh.py [--reps 200] [--hosts hosts.toml]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The sibling bench's timing and table code (run as a script, bench/ is on sys.path).
from nemesis import _Case, measure  # type: ignore[import-not-found]

from harness.node import Node
from harness.node.ssh import SshCluster, load_hosts
from harness.node.ssh.containers import sshd_hosts
from nemeses import standard_nemesis
from nemeses.protocol import Fault
from nemeses.topology import partition_fault

__all__ = ["main"]

_CASES = (
    _Case("pause", lambda nodes: Fault("pause", ("w1",), {"process": "sleeper"}), 1.0, 20.0),
    _Case("partition", lambda nodes: partition_fault("isolate", ["w1"], nodes), 1.0, 100.0),
    _Case("freeze", lambda nodes: Fault("freeze", ("w1",)), 0.25, None),
    _Case("throttle", lambda nodes: Fault("throttle", ("w1",), {"cpu": 0.02}), 0.25, None),
    _Case("kill", lambda nodes: Fault("kill", ("w1",), {"process": "sleeper"}), 0.1, None),
)


@contextmanager
def _hosts_file(given: Path | None) -> Iterator[Path]:
    if given is not None:
        yield given
        return
    print("starting three sshd containers as hosts (l1, s1, w1)...", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="fencecheck-bench-ssh-") as folder,
        sshd_hosts(("lock", "store", "worker"), Path(folder)) as hosts,
    ):
        yield hosts.hosts_file


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every target is met, 1 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="repetitions of pause, partition")
    parser.add_argument("--hosts", type=Path, help="a hosts file naming l1, s1 and w1")
    args = parser.parse_args(argv)
    with _hosts_file(args.hosts) as path, SshCluster(load_hosts(path)) as cluster:
        nodes: dict[str, Node] = dict(cluster.nodes)
        command = []
        for _ in range(50):
            began = time.perf_counter()
            cluster.nodes["w1"].run("true")
            command.append((time.perf_counter() - began) * 1000)
        print(f"one command over the kept-open connection: {statistics.median(command):.2f} ms")
        nemesis = standard_nemesis()
        nemesis.setup(nodes)
        cluster.nodes["w1"].start_daemon("sleeper", ["sleep", "infinity"])
        met = measure(nemesis, list(nodes), _CASES, args.reps)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
