"""The write-path proxy's added latency: request round trips through it against a direct connection.

A line server (:mod:`harness.nodeside.wire`, as the reference store and the no-op server are) and
the proxy (:mod:`harness.nodeside.proxy`, ``--route``: one fixed destination, no iptables) run as
processes of their own on loopback; this process sends one small request at a time on a kept
connection, as a holder's pooled client does, alternating rounds of ``direct`` and ``proxy`` so
that both see the same machine load. Prints p50 and p99 of each path, what the proxy adds, and the
ratio of the proxied to the direct latency. The proxy holds no fault meanwhile.

    python bench/proxy.py [--requests 5000] [--rounds 10]

The harness's own capacity with and without the proxy in place: ``bench/capacity.py --proxy``.
Exit status 0 whatever the numbers (2 shared cores make them noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from rich.console import Console
from rich.table import Table

from harness.nodeside import proxy, wire

__all__ = ["main"]

_ROOT: Final = Path(__file__).resolve().parents[1]
_SERVER: Final = """
import sys
sys.path.insert(0, sys.argv[1])
from harness.nodeside import wire
wire.serve("127.0.0.1", int(sys.argv[2]), lambda request: {"ok": True}, "bench server")
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _await_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:g} s")


@contextmanager
def _processes() -> Iterator[tuple[int, int]]:
    """The line server and the proxy in front of it: ``(direct port, proxy port)``."""
    server_port, proxy_port = _free_port(), _free_port()
    started = [
        # Its log line per request (stdout) would bury the figures; a crash still shows.
        subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(_ROOT), str(server_port)],
            stdout=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                sys.executable,
                str(Path(proxy.__file__)),
                "--route",
                f"{proxy_port}=127.0.0.1:{server_port}",
                "--control-port",
                str(_free_port()),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(_ROOT)},
        ),
    ]
    try:
        _await_port(server_port)
        _await_port(proxy_port)
        yield server_port, proxy_port
    finally:
        for process in started:
            process.kill()
            process.wait()


def _round(connection: wire.Connection, requests: int) -> list[float]:
    samples = []
    for _ in range(requests):
        began = time.perf_counter()
        reply = connection.request({"op": "write", "id": "x", "epoch": 1})
        samples.append(time.perf_counter() - began)
        if not reply.get("ok"):
            raise RuntimeError(f"the server answered {reply}")
    return samples


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    """Measure and print the proxy's added latency."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="round trips per path")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    args = parser.parse_args(argv)
    console = Console()
    samples: dict[str, list[float]] = {"direct": [], "proxy": []}
    per_round = max(1, args.requests // args.rounds)
    with _processes() as (direct_port, proxy_port):
        connections = {
            "direct": wire.Connection(("127.0.0.1", direct_port), 10.0),
            "proxy": wire.Connection(("127.0.0.1", proxy_port), 10.0),
        }
        for connection in connections.values():
            _round(connection, 50)  # warm up: connect, first allocations
        for _ in range(args.rounds):
            for path, connection in connections.items():
                samples[path] += _round(connection, per_round)
        for connection in connections.values():
            connection.close()
    table = Table("path", "n", "p50", "p99")
    for path, values in samples.items():
        table.add_row(
            path,
            str(len(values)),
            f"{_percentile(values, 0.5) * 1000:.3f} ms",
            f"{_percentile(values, 0.99) * 1000:.3f} ms",
        )
    console.print(table)
    figures = {}
    for name, share in (("p50", 0.5), ("p99", 0.99)):
        direct, proxied = (_percentile(samples[path], share) for path in ("direct", "proxy"))
        figures[name] = {
            "direct_ms": round(direct * 1000, 3),
            "proxy_ms": round(proxied * 1000, 3),
            "added_ms": round((proxied - direct) * 1000, 3),
            "ratio": round(proxied / direct, 2),
        }
        console.print(
            f"{name}: the proxy adds {(proxied - direct) * 1000:.3f} ms "
            f"({proxied / direct:.2f}x the direct round trip)"
        )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
