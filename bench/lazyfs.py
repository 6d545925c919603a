"""What the lazy file system costs the reference store: write latency and throughput, as ratios.

On one Docker node (the reference system's image, with ``/dev/fuse``) the reference store runs
twice: on a plain data directory and on the lazy file system (:mod:`harness.nodeside.lazyfs`,
as a run with disk faults mounts it). A client on the same node (loopback: no network in the
numbers) sends N fenced writes one after the other, each appended and fsynced before the store
answers, and prints per mode the p50 and p99 of the write latency and the writes per second,
then the ratios lazy / plain.

    PYTHONPATH=. python3 bench/lazyfs.py [--writes 2000]

Takes about 30 s (a container start and two store starts). Exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from harness.node import Node
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.images import system_image
from systems import deploy, packages_of
from systems.reference import ReferenceSystem, store_server

__all__ = ["main"]

_PORT: Final = 7002
_PROGRAM: Final = f"{deploy.INSTALL_DIR}/store_server.py"
# Sent whole to the node: N sequential fenced writes over one connection, each one's latency.
_CLIENT: Final = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from harness.nodeside import wire
pool = wire.Pool((sys.argv[2], int(sys.argv[3])), 20.0)
latencies = []
began = time.perf_counter()
for number in range(int(sys.argv[4])):
    sent = time.perf_counter()
    reply = pool.call({"op": "write", "sink": "store", "lock": "L", "epoch": 1,
                       "key": f"k{number % 8}", "id": f"w-{number}"})
    latencies.append(time.perf_counter() - sent)
    assert reply["ok"], reply
print(json.dumps({"latencies": latencies, "seconds": time.perf_counter() - began}))
"""


def _measure(node: Node, lazy: bool, writes: int) -> dict[str, Any]:
    """Start the store on a plain or a lazy data dir, drive ``writes`` writes, stop it."""
    data = f"{deploy.DATA_DIR}/bench-{'lazy' if lazy else 'plain'}"
    deploy.data_dir(node, data, lazy)
    argv = ["python3", _PROGRAM, "--host", node.ip, "--port", str(_PORT), "--data-dir", data]
    name = f"store-{'lazy' if lazy else 'plain'}"
    deploy.start_and_wait(node, name, argv, deploy.Pings(_PORT))
    try:
        done = node.run(
            ["python3", "-c", _CLIENT, deploy.INSTALL_DIR, node.ip, str(_PORT), str(writes)],
            timeout=600,
            check=True,
        )
    finally:
        deploy.kill_daemons(node, [name])
    measured: dict[str, Any] = json.loads(done.stdout)
    return measured


def _quantile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both modes on one node and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=2000, help="writes per mode")
    args = parser.parse_args(argv)
    image = system_image(packages_of(ReferenceSystem()))
    results: dict[str, dict[str, float]] = {}
    with Cluster(
        f"bench-lazyfs-{new_run_id()}", [NodeSpec("s1", "store")], image=image, fuse=True
    ) as cluster:
        node = cluster.nodes["s1"]
        files = {_PROGRAM: deploy.source_of(store_server), **deploy.nodeside_files()}
        deploy.install(node, files)
        for mode, lazy in (("plain", False), ("lazy", True)):
            measured = _measure(node, lazy, args.writes)
            latencies = measured["latencies"]
            results[mode] = {
                "p50": _quantile(latencies, 0.5) * 1000,
                "p99": _quantile(latencies, 0.99) * 1000,
                "rate": len(latencies) / measured["seconds"],
            }
    table = Table(title=f"reference store, {args.writes} sequential fenced writes per mode")
    for column in ("", "p50 latency", "p99 latency", "writes/s"):
        table.add_column(column)
    for mode, row in results.items():
        table.add_row(mode, f"{row['p50']:.2f} ms", f"{row['p99']:.2f} ms", f"{row['rate']:.0f}")
    plain, lazy = results["plain"], results["lazy"]
    table.add_row(
        "lazy / plain",
        f"{lazy['p50'] / plain['p50']:.2f}x",
        f"{lazy['p99'] / plain['p99']:.2f}x",
        f"{lazy['rate'] / plain['rate']:.2f}x",
    )
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
