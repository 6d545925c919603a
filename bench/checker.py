"""Benchmark the checker against plain JSON parsing of the same history.

Run it from the checkout as ``python3 -m bench.checker`` (so the checkout's code is what runs).

Generates a valid history of ``--events`` events (default 1,000,000) from the fenced-system model
(several holders, pauses, refusals, indeterminate writes, read-modify-writes, keys retired after a
final read, the store reporting ``seq``), then measures, each in a fresh subprocess so peak RSS is
clean:

- ``check``: ``checkers.check_file`` on the file (orjson, streaming): the whole verdict, its
  coverage counted in the same pass;
- ``parse``: the baseline, ``[json.loads(l) for l in open(F)]`` with the standard library.

Then the shapes that used to be quadratic (a read of never-written ids; read-modify-writes whose
``prev`` is not in the log; grants of falling or shuffled epochs; one holder writing falling
epochs) at 10k and 100k, with the growth factor (linear: about 10) and its exponent (1: linear).

Targets (issues 10 and 21): the whole check of 1M events within 1x the stdlib parse time (compared
in CPU seconds, which a busy machine does not skew; wall time is printed too), peak RSS under
256 MiB and bounded by keys and open operations, not by history length (try ``--events
10000000``); each shape growing less than 20x for 10x the input. Exits 1 if a target is missed
or the generated history is not judged valid (a bug in the model or the checker).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from checkers import check_file
from harness.record import Sink
from tests.support.shapes import SHAPES
from tests.support.simulation import MS, FencedSystem, Outcome

_INVENTORY = {
    "store": Sink("store", fenced=True, seq=True),
    "recorder": Sink("recorder", fenced=False),
}
_TIME_RATIO_TARGET = 1.0
_RSS_TARGET = 256 * 2**20
_SHAPE_SIZES = (10_000, 100_000)
_GROWTH_TARGET = 20.0
_INDETERMINATE: tuple[Outcome, ...] = ("info-landed", "info-lost")


def generate(path: Path, events: int, seed: int, holders: int = 5, per_key: int = 40) -> int:
    """Write a valid history of at least ``events`` events to ``path``; returns the count."""
    rng = random.Random(seed)
    with path.open("wb", buffering=1 << 20) as out:
        dumps = orjson.dumps

        def emit(event: dict[str, Any]) -> None:
            out.write(dumps(event) + b"\n")

        model = FencedSystem(
            holders, emit, ttl=500 * MS, unfenced=("recorder",), sequenced=("store",)
        )
        active = {sink: [f"k{number}" for number in range(4)] for sink in model.sinks}
        serial = 4
        written: dict[tuple[str, str], int] = {}
        leader = 0
        resume_at: dict[int, int] = {}
        steps = 0
        while model.events < events:
            steps += 1
            for number, when in list(resume_at.items()):
                if when <= steps:
                    model.stop_pause(number)
                    del resume_at[number]
            if rng.random() < 0.01 or model.paused(leader):
                if rng.random() < 0.8:
                    model.release(leader)  # a handover; otherwise the next waits out the lease
                leader = rng.randrange(holders)
            if model.paused(leader):
                continue
            if not model.holds(leader):
                model.acquire(leader)
                if not model.holds(leader):
                    model.wait(model.ttl // 5)
                continue
            sink = rng.choice(model.sinks)
            key = rng.choice(active[sink])
            roll = rng.random()
            if roll < 0.5:
                outcome: Outcome = "ok" if rng.random() > 0.02 else rng.choice(_INDETERMINATE)
                model.write(leader, sink, key, rmw=roll < 0.25, outcome=outcome)
                written[sink, key] = written.get((sink, key), 0) + 1
                if written[sink, key] >= per_key:
                    model.retire(sink, key, leader)
                    del written[sink, key]
                    active[sink][active[sink].index(key)] = f"k{serial}"
                    serial += 1
            elif roll < 0.85:
                model.read(leader, sink, key)
            elif roll < 0.88:
                model.release(leader)
            elif roll < 0.885 and model.start_pause(leader, sink, key, rmw=True):
                resume_at[leader] = steps + rng.randrange(5, 60)
                model.wait(rng.choice((1, 2, 6)) * model.ttl // 2)
            else:
                model.wait(rng.randrange(1, 50) * MS)
        model.finish()
        return model.events


def _child(mode: str, path: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = before.ru_utime + before.ru_stime
    start = time.perf_counter()
    if mode == "parse":
        with open(path) as stream:
            parsed = [json.loads(line) for line in stream]
        outcome: dict[str, Any] = {"events": len(parsed)}
    else:
        result = check_file(path, inventory=_INVENTORY)
        outcome = {
            "valid": result.valid,
            "anomalies": result.anomaly_counts,
            "expected": result.expected_counts,
            "unknown": list(result.unknown_reasons),
            "events": result.counts.events,
            "stale_attempts": result.coverage.stale_attempts,
        }
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - cpu_before
    print(json.dumps({"wall": wall, "cpu": cpu, "rss": usage.ru_maxrss * 1024, **outcome}))


def _measure(mode: str, path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.checker", "--child", mode, str(path)],
        cwd=Path(__file__).resolve().parents[1],
        check=True,
        capture_output=True,
        text=True,
    )
    measured: dict[str, Any] = json.loads(done.stdout)
    return measured


def _mib(size: float) -> str:
    return f"{size / 2**20:,.0f} MiB"


def _shapes(scratch: Path) -> bool:
    """Time each quadratic-prone shape at two sizes; True if both grow about linearly."""
    linear = True
    for name, shape in SHAPES.items():
        took = []
        for size in _SHAPE_SIZES:
            path = scratch / f"shape-{size}.jsonl"
            with path.open("wb") as out:
                out.writelines(orjson.dumps(event) + b"\n" for event in shape(size))
            began = time.perf_counter()
            check_file(path)
            took.append(time.perf_counter() - began)
        growth = took[1] / took[0]
        exponent = math.log(growth) / math.log(_SHAPE_SIZES[1] / _SHAPE_SIZES[0])
        ok = growth < _GROWTH_TARGET
        linear = linear and ok
        sizes = " -> ".join(
            f"{size // 1000}k {spent:.2f} s" for size, spent in zip(_SHAPE_SIZES, took, strict=True)
        )
        print(
            f"{name:>30}: {sizes}, growth {growth:.1f}x for 10x the input (exponent "
            f"{exponent:.2f}) "
            f"(target < {_GROWTH_TARGET:.0f}x: {'met' if ok else 'MISSED'})"
        )
    return linear


def main() -> int:
    """Generate, measure, print; 1 if the history is not valid or a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--history", type=Path, help="use (or keep) this file")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="fencecheck-bench-") as scratch:
        path = args.history or Path(scratch) / "history.jsonl"
        if not path.exists():
            began = time.perf_counter()
            count = generate(path, args.events, args.seed)
            took = time.perf_counter() - began
            size = os.path.getsize(path)
            print(f"generated {count:,} events ({_mib(size)}) in {took:.1f} s -> {path}")
        parse = _measure("parse", path)
        checked = _measure("check", path)
        linear = _shapes(Path(scratch))
    events = checked["events"]
    for name, measured in (("stdlib json parse", parse), ("fencecheck check", checked)):
        print(
            f"{name:>18}: {events / measured['wall']:>10,.0f} events/s  "
            f"wall {measured['wall']:7.2f} s  cpu {measured['cpu']:7.2f} s  "
            f"peak RSS {_mib(measured['rss'])}"
        )
    print(
        f"verdict: {checked['valid']}  anomalies {checked['anomalies']}  expected "
        f"{checked['expected']}  unknown {checked['unknown']}"
    )
    # CPU time is the fair comparison on a shared machine; wall time is printed beside it.
    ratio = checked["cpu"] / parse["cpu"]
    wall_ratio = checked["wall"] / parse["wall"]
    time_ok = ratio <= _TIME_RATIO_TARGET
    rss_ok = checked["rss"] < _RSS_TARGET
    print(
        f"check/parse time ratio {ratio:.2f} cpu, {wall_ratio:.2f} wall (target <= "
        f"{_TIME_RATIO_TARGET}: {'met' if time_ok else 'MISSED'}); check peak RSS "
        f"{_mib(checked['rss'])} (target < {_mib(_RSS_TARGET)}: {'met' if rss_ok else 'MISSED'})"
    )
    return 0 if checked["valid"] is True and time_ok and rss_ok and linear else 1


if __name__ == "__main__":
    sys.exit(main())
