"""Harness capacity: how many holder operations per second the harness itself can record.

The target (issue 16): on the no-op system (``systems/noop``: an in-memory lock and fenced sink,
no disk, so the system is never the bottleneck), 16 workers, no faults, work_ms 0:

- >= 5,000 operations per second completed and recorded in the history;
- <= 1 ms added latency at p99: a fenced write through a run's real path (controller ->
  :class:`HolderOps` -> agent -> sink, invoke and completion recorded) against the same write
  sent by the same client module from inside the worker container (``bench/run.py``'s overhead
  measure, on the no-op system).

And where the time goes in the 16-worker run, from timers around each stage of the controller's
path (``Recorder.record``: the history's lock, JSON and write; ``AgentLink.call``: the round trip
to the agent, which includes the agent and the server; the rest of the holder's loop: the
workload's choices and bookkeeping) and the CPU time of the controller process, the agents'
containers and the server's container (cgroup v1 ``cpuacct``, where the engine exposes it).

    python bench/capacity.py [--duration 20] [--workers 16] [--writes 2000] [--rounds 4] [--proxy]

``--proxy`` puts the write-path proxy (issue 29) in place on every worker (``fencecheck run
--proxy``: no fault, only the extra hop), so the same figures say what the proxy costs the
harness; its own added latency against a direct connection is ``bench/proxy.py``'s.

Exit status 0 whatever the numbers (2 cores shared with other work make them noisy).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

from rich.console import Console
from rich.table import Table
from run import _mark, _measure, _ms, _overhead, _percentile, _Throughput

from harness.node.docker.cluster import LABEL_NODE, LABEL_RUN
from harness.node.docker.engine import engine
from harness.record.spec import TestSpec
from harness.run.agent_link import AgentLink
from harness.run.holder_ops import HolderOps
from harness.run.recorder import Recorder

__all__ = ["main"]

_TARGET_OPS_PER_S: Final = 5000.0
_TARGET_ADDED_P99_MS: Final = 1.0
_CPUACCT: Final = Path("/sys/fs/cgroup/cpuacct/docker")
P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class _Stage:
    """Wall time spent inside one instrumented call, summed over every thread."""

    calls: int = 0
    seconds: float = 0.0


@dataclass
class _Timers:
    """Stage timers, updated under one lock (a few hundred ns a call, against ~100 us an op)."""

    stages: dict[str, _Stage] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            stage = self.stages.setdefault(name, _Stage())
            stage.calls += 1
            stage.seconds += seconds


@contextmanager
def _instrumented(timers: _Timers) -> Iterator[None]:
    """Time every call of the controller's per-operation stages while the block runs."""
    patched = {
        (Recorder, "record"): "recorder.record",
        (AgentLink, "call"): "agent_link.call",
        (HolderOps, "_send"): "holder_ops._send",
    }
    originals: dict[tuple[type, str], Any] = {}

    def timed(name: str, method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            began = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                timers.add(name, time.perf_counter() - began)

        return wrapper

    for (owner, attribute), name in patched.items():
        originals[(owner, attribute)] = getattr(owner, attribute)
        setattr(owner, attribute, timed(name, getattr(owner, attribute)))
    try:
        yield
    finally:
        for (owner, attribute), method in originals.items():
            setattr(owner, attribute, method)


@dataclass
class _CpuWatch:
    """CPU seconds of the controller process and of the run's containers over the workload.

    Started when the history's first event appears, stopped ``seconds`` later (the time limit)."""

    store: Path
    seconds: float
    controller: float = 0.0
    containers: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0
    problem: str | None = None

    def watch(self) -> None:
        history = self._wait_for_history()
        if history is None:
            return
        cgroups = self._cgroups(history.parent)
        if not cgroups:
            # Without the containers' CPU the figures would be the controller's alone.
            self.problem = self.problem or "the run's containers were not found: CPU not measured"
            return
        before = {node: _usage(path) for node, path in cgroups.items()}
        cpu, began = time.process_time(), time.monotonic()
        time.sleep(self.seconds)
        self.controller = time.process_time() - cpu
        self.wall = time.monotonic() - began
        self.containers = {node: _usage(path) - before[node] for node, path in cgroups.items()}

    def _wait_for_history(self) -> Path | None:
        earlier = set(self.store.glob("*/*/history.jsonl"))  # a reused --store's older runs
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            for history in self.store.glob("*/*/history.jsonl"):
                if history not in earlier and history.stat().st_size > 0:
                    return history
            time.sleep(0.02)
        self.problem = "the run's history never appeared"
        return None

    def _cgroups(self, run_dir: Path) -> dict[str, Path]:
        run_id = json.loads((run_dir / "test.json").read_text())["run_id"]
        if not _CPUACCT.is_dir():
            self.problem = f"no {_CPUACCT} (not cgroup v1): container CPU not measured"
            return {}
        found = engine().containers.list(filters={"label": f"{LABEL_RUN}={run_id}"})
        return {c.labels[LABEL_NODE]: _CPUACCT / str(c.id) / "cpuacct.usage" for c in found}


def _usage(path: Path) -> float:
    return int(path.read_text()) / 1e9


def _throughput(
    workers: int,
    seconds: float,
    seed: int,
    store: Path,
    timers: _Timers,
    cpu: _CpuWatch,
    proxy: bool = False,
) -> _Throughput:
    """One fault-free run on the no-op system at full speed, instrumented.

    2 locks per holder and 16 keys per lock: few acquires wait for another holder's lease, and the
    10 % of reads return short logs. TTL 2 s: without faults it only sets the renewal rate.
    """
    spec = TestSpec(
        system="noop",
        workers=workers,
        nemeses=(),
        work_ms=0,
        locks=2 * workers,
        keys=16,
        ttl=2.0,
        time_limit=seconds,
        seed=seed,
        store=store,
        name="bench-capacity-proxy" if proxy else "bench-capacity",
        proxy=proxy,
    )
    watcher = threading.Thread(target=cpu.watch, daemon=True)
    watcher.start()
    with _instrumented(timers):
        result = _measure(spec)
    watcher.join(timeout=5)
    return result


def _where(result: _Throughput, timers: _Timers, cpu: _CpuWatch, console: Console) -> float | None:
    """The breakdown of an operation's cost, per operation completed in the measured run; returns
    the operations per second that CPU per operation allows on this machine's cores (``None``
    when the CPU was not measured)."""
    ops = max(result.ops, 1)

    def per_op(seconds: float) -> str:
        return f"{seconds / ops * 1e6:.0f} us"

    stages = timers.stages
    send = stages.get("holder_ops._send", _Stage())
    record = stages.get("recorder.record", _Stage())
    link = stages.get("agent_link.call", _Stage())
    table = Table("controller stage (wall, summed over holder threads)", "calls", "per op")
    table.add_row(
        "HolderOps._send: one operation, end to end", str(send.calls), per_op(send.seconds)
    )
    table.add_row(
        "  Recorder.record: lock + JSON + write (x2)", str(record.calls), per_op(record.seconds)
    )
    table.add_row(
        "  AgentLink.call: round trip to the agent", str(link.calls), per_op(link.seconds)
    )
    rest = send.seconds - record.seconds - link.seconds
    table.add_row("  the rest of _send (completion, board)", "", per_op(rest))
    console.print(table)
    if cpu.wall <= 0:
        console.print(f"CPU not measured: {cpu.problem}", style="yellow")
        return None
    rate = result.rate
    table = Table("CPU over the workload", "cores busy", "CPU per op")
    table.add_row(
        "controller process (holders, recorder, nemesis, progress)",
        f"{cpu.controller / cpu.wall:.2f}",
        f"{cpu.controller / cpu.wall / rate * 1e6:.0f} us",
    )
    groups = {
        "agents (worker containers)": sum(
            v for n, v in cpu.containers.items() if n.startswith("w")
        ),
        "no-op server (n1)": sum(v for n, v in cpu.containers.items() if not n.startswith("w")),
    }
    for name, seconds in groups.items():
        table.add_row(
            name, f"{seconds / cpu.wall:.2f}", f"{seconds / cpu.wall / rate * 1e6:.0f} us"
        )
    total = (cpu.controller + sum(groups.values())) / cpu.wall
    table.add_row(
        "all of the harness and the system", f"{total:.2f}", f"{total / rate * 1e6:.0f} us"
    )
    console.print(table)
    if cpu.problem:
        console.print(cpu.problem, style="yellow")
    # Ops wait on one another's hops, so the rate is what the CPU it gets allows: on a machine
    # shared with other work, the share it gets, not the code, sets the figure.
    cores = os.cpu_count() or 1
    allowed = cores / total * rate
    console.print(
        f"CPU per operation allows {allowed:.0f} ops/s on this machine's {cores} "
        f"cores alone; {_TARGET_OPS_PER_S:.0f} ops/s needs "
        f"{_TARGET_OPS_PER_S * total / rate:.2f} of them (this run got {total:.2f})"
    )
    return allowed


def main(argv: list[str] | None = None) -> int:
    """Run the capacity bench and print the figures against the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--writes", type=int, default=2000, help="writes per latency path")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved latency rounds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", type=Path, help="keep run folders here (default: a temp dir)")
    parser.add_argument("--skip-latency", action="store_true", help="throughput only")
    parser.add_argument(
        "--proxy", action="store_true", help="with the write-path proxy on every worker"
    )
    args = parser.parse_args(argv)
    console = Console()
    store = args.store or Path(tempfile.mkdtemp(prefix="fencecheck-capacity-"))
    lines: list[str] = []

    console.rule(
        f"capacity: {args.workers} workers on the no-op system, no faults, {args.duration:g} s"
        + (", through the write-path proxy" if args.proxy else "")
    )
    timers = _Timers()
    cpu = _CpuWatch(store, args.duration)
    result = _throughput(args.workers, args.duration, args.seed, store, timers, cpu, args.proxy)
    if not result.latencies:
        results = json.loads((result.run_dir / "results.json").read_text())
        why = results.get("run_error") or "no operation completed"
        console.print(f"[red]the run measured nothing: {why}[/] ({result.run_dir})")
        return 0
    table = Table(
        "run", "ops", "seconds", "ops/s", "ok / fail / info", "latency p50 / p99", "verdict"
    )
    table.add_row(
        f"{args.workers} holders, {2 * args.workers} locks",
        str(result.ops),
        f"{result.seconds:.1f}",
        f"{result.rate:.0f}",
        " / ".join(str(result.outcomes[t]) for t in ("ok", "fail", "info")),
        f"{_ms(_percentile(result.latencies, 0.5))} / {_ms(_percentile(result.latencies, 0.99))}",
        result.verdict,
    )
    console.print(table)
    console.print(f"run folder: {result.run_dir}", style="dim")
    allowed = _where(result, timers, cpu, console)
    lines.append(
        f"recorded {result.rate:.0f} ops/s with {args.workers} workers, "
        f"{result.rate / _TARGET_OPS_PER_S:.2f} x the target {_TARGET_OPS_PER_S:.0f}: "
        + _mark(result.rate >= _TARGET_OPS_PER_S)
    )
    if allowed is not None:
        # What the code allows, whatever share of the machine this run got: the figure that
        # other work on a shared machine does not set.
        lines.append(
            f"CPU per operation allows {allowed:.0f} ops/s on {os.cpu_count() or 1} cores, "
            f"{allowed / _TARGET_OPS_PER_S:.2f} x the target: "
            + _mark(allowed >= _TARGET_OPS_PER_S)
        )

    if not args.skip_latency:
        console.rule("added latency: agent + history vs the same write on the node")
        samples = _overhead(
            args.writes,
            args.rounds,
            store / "latency-history.jsonl",
            "noop",
            "memory",
            proxy=args.proxy,
        )
        shares = (0.5, 0.99)
        table = Table("path (fenced write, one at a time)", "n", "p50", "p99", "added p99")
        base = _percentile(samples["direct"], 0.99)
        for path, values in samples.items():
            p50, p99 = (_percentile(values, q) for q in shares)
            table.add_row(
                path,
                str(len(values)),
                _ms(p50),
                _ms(p99),
                "" if path == "direct" else _ms(p99 - base),
            )
        console.print(table)
        added = (_percentile(samples["agent + history"], 0.99) - base) * 1000
        lines.append(
            f"added p99 {added:.2f} ms, agent + history vs direct "
            f"(target <= {_TARGET_ADDED_P99_MS:g} ms): " + _mark(added <= _TARGET_ADDED_P99_MS)
        )
    console.rule("against the targets")
    for line in lines:
        console.print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
