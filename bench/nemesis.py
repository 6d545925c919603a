"""Benchmark: how long each fault takes from being issued to being confirmed, p50 and p99.

Starts a small cluster (l1, s1, w1), then repeats each fault start and stop many times through the
real nemeses, timing each ``invoke`` (which returns only once the fault is observed in force, or
observed undone). Prints a table against the targets of issue 4: pause and resume <= 10 ms p99,
partition <= 50 ms p99; freeze, throttle and kill are measured and printed. The clock faults
(issue 23) move the clock of a wire server on w1 started under libfaketime (as a system's daemon)
and, for steps, of one that moves its own clock (``own``, as the holders' agents do): their
``invoke`` is measured, and a step's confirmation inside the process (from the control file's
rewrite to the process's own clock read back showing it) is held to <= 50 ms p99.

    python bench/nemesis.py [--reps 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from harness.node import Node
from harness.node.docker.cluster import Cluster, default_topology, new_run_id
from harness.node.docker.images import node_image
from nemeses import standard_nemesis
from nemeses.clock import CLOCK_RATE, CLOCK_STEP
from nemeses.protocol import Fault, Nemesis, start_f, stop_f
from nemeses.topology import partition_fault
from systems import deploy

__all__ = ["main", "measure"]


@dataclass(frozen=True)
class _Case:
    """One fault to time: its name, how to build it, repetitions as a share of ``--reps``,
    and the p99 targets (ms) for its start and its stop, if any."""

    name: str
    fault: Callable[[list[str]], Fault]
    share: float
    target_ms: float | None


_CASES = (
    _Case("pause", lambda nodes: Fault("pause", ("w1",), {"process": "sleeper"}), 1.0, 10.0),
    _Case("partition", lambda nodes: partition_fault("isolate", ["w1"], nodes), 1.0, 50.0),
    _Case("freeze", lambda nodes: Fault("freeze", ("w1",)), 0.25, None),
    _Case("throttle", lambda nodes: Fault("throttle", ("w1",), {"cpu": 0.02}), 0.25, None),
    _Case("kill", lambda nodes: Fault("kill", ("w1",), {"process": "sleeper"}), 0.1, None),
    _Case(
        CLOCK_STEP,
        lambda nodes: Fault(CLOCK_STEP, ("w1",), {"process": "clocky", "by_s": 3.0}),
        0.25,
        None,
    ),
    _Case(
        CLOCK_RATE,
        lambda nodes: Fault(CLOCK_RATE, ("w1",), {"process": "clocky", "rate": 4.0}),
        0.1,
        None,
    ),
    _Case(
        f"{CLOCK_STEP} own",
        lambda nodes: Fault(CLOCK_STEP, ("w1",), {"process": "clocky-own", "by_s": 3.0}),
        0.25,
        None,
    ),
)
_CONFIRM_TARGET_MS: Final = 50.0
_CLOCK_PORT: Final = 7100
_CLOCK_SERVER: Final = (
    "import sys; sys.path.insert(0, '/opt/fencecheck'); from harness.nodeside import clock, wire; "
    "clock.follow_control_file(); "
    "wire.serve(sys.argv[1], int(sys.argv[2]), lambda request: {'ok': True}, 'bench clock')"
)


def _percentile(sorted_values: list[float], share: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(share * len(sorted_values)))]


def _time_case(
    nemesis: Nemesis, fault: Fault, reps: int, inside: list[float]
) -> tuple[list[float], list[float]]:
    """Milliseconds from issuing to confirming, for each start and each stop; a clock fault's
    confirmations inside the process go to ``inside``."""
    starts: list[float] = []
    stops: list[float] = []
    for _ in range(reps):
        for f, out in ((start_f(fault.kind), starts), (stop_f(fault.kind), stops)):
            began = time.perf_counter()
            facts = nemesis.invoke(f, fault)
            out.append((time.perf_counter() - began) * 1000)
            for change in facts.get("clocks", {}).values():
                if "confirmed" in change:
                    inside.append(float(change["confirmed"]["latency_ms"]))
    return starts, stops


def _row(label: str, values: list[float], target: float | None) -> tuple[str, bool]:
    ordered = sorted(values)
    p50, p99 = statistics.median(ordered), _percentile(ordered, 0.99)
    verdict = "measured" if target is None else ("ok" if p99 <= target else "MISSED")
    goal = "" if target is None else f"<= {target:.0f}"
    ratio = "" if target is None else f"{p99 / target:.2f}x"
    line = (
        f"{label:<18} {len(values):>5} {p50:>9.2f} {p99:>9.2f} {max(ordered):>9.2f}"
        f" {goal:>7} {ratio:>7}  {verdict}"
    )
    return line, target is None or p99 <= target


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 when every target is met, 1 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="repetitions of pause, partition")
    args = parser.parse_args(argv)
    print("starting a cluster (l1, s1, w1)...", flush=True)
    with Cluster(f"bench-nemesis-{new_run_id()}", default_topology(1), image=node_image()) as c:
        nodes: dict[str, Node] = dict(c.nodes)
        nemesis = standard_nemesis()
        nemesis.setup(nodes)
        w1 = c.node("w1")
        w1.start_daemon("sleeper", ["sleep", "infinity"])
        deploy.install(w1, deploy.nodeside_files())
        # One under libfaketime (as a daemon), one that moves its own clock (as an agent).
        servers: tuple[tuple[str, int, deploy.Mover], ...] = (
            ("clocky", _CLOCK_PORT, "libfaketime"),
            ("clocky-own", _CLOCK_PORT + 1, "itself"),
        )
        for name, port, mover in servers:
            argv = ["python3", "-c", _CLOCK_SERVER, w1.ip, str(port)]
            ready = deploy.Pings(port, 20.0)
            ask = f"wire:{w1.ip}:{port}"
            deploy.start_clocked(w1, name, argv, ready, ask, mover=mover)
        met = measure(nemesis, list(nodes), _CASES, args.reps)
    return 0 if met else 1


def measure(nemesis: Nemesis, nodes: list[str], cases: Sequence[_Case], reps: int) -> bool:
    """Time every case through ``nemesis`` (set up on ``nodes``), print the table, tear the
    nemesis down; returns whether every target was met."""
    print(
        f"{'fault':<18} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'target':>7}"
        f" {'ratio':>7}"
    )
    met = True
    try:
        for case in cases:
            count = max(5, round(reps * case.share))
            inside: list[float] = []
            starts, stops = _time_case(nemesis, case.fault(nodes), count, inside)
            for label, values in ((f"start-{case.name}", starts), (f"stop-{case.name}", stops)):
                line, ok = _row(label, values, case.target_ms)
                print(line, flush=True)
                met &= ok
            if inside:
                line, ok = _row(f"{case.name} inside", inside, _CONFIRM_TARGET_MS)
                print(line, flush=True)
                met &= ok
    finally:
        nemesis.teardown()
    print("every target met" if met else "some targets missed")
    return met


if __name__ == "__main__":
    sys.exit(main())
