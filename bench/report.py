"""Benchmark writing a run's report.html against checking the same history.

Generates a valid history of ``--events`` events (default 1,000,000) with the checker benchmark's
model (``bench/checker.py``), checks it (``results.json``), then measures ``write_report``: the
history is read once more, paired, laid out and rendered with its data embedded.

Targets: the report of 1M events within 3x the check's CPU time (the report pairs and lays out what
the checker only scans), and a page under 64 MiB (the timeline keeps the first
``MAX_TIMELINE_OPS`` operations, so the page stops growing beyond that). Prints CPU and wall time,
the page size, how many operations the timeline carries, and the ratios; exits 1 if a target is
missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkers import check_file
from harness.record import Sink
from harness.report import write_report
from harness.report.data import MAX_TIMELINE_OPS
from harness.run.store import RunDir

_INVENTORY = {"store": Sink("store", fenced=True), "recorder": Sink("recorder", fenced=False)}
_TIME_RATIO_TARGET = 3.0
_SIZE_TARGET = 64 * 2**20


def _generator() -> Callable[[Path, int, int], int]:
    """``generate`` from bench/checker.py: one model of a fenced system for both benchmarks."""
    spec = importlib.util.spec_from_file_location(
        "bench_checker", Path(__file__).with_name("checker.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate: Callable[[Path, int, int], int] = module.generate
    return generate


def _timed(action: Callable[[], Any]) -> tuple[Any, float, float]:
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    value = action()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return value, wall, cpu


def main() -> int:
    """Generate, check, report, print; 1 if a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fencecheck-bench-report-") as folder:
        run = RunDir(Path(folder))
        run.write_json(
            run.test_json,
            {
                "spec": {"system": "model", "nemeses": ["pause"], "seed": args.seed},
                "inventory": [
                    {"sink": name, "fenced": spec.fenced, "mitigation": spec.mitigation}
                    for name, spec in _INVENTORY.items()
                ],
            },
        )
        events = _generator()(run.history, args.events, args.seed)
        result, check_wall, check_cpu = _timed(
            lambda: check_file(run.history, inventory=_INVENTORY)
        )
        run.write_json(run.results, result.to_json())
        page, wall, cpu = _timed(lambda: write_report(run))
        size = page.stat().st_size
        operations = result.counts.to_json()["ops"]
        total_ops = sum(per["invoke"] for per in operations.values())
    ratio = cpu / check_cpu if check_cpu else float("inf")
    print(f"events            {events:,}  ({total_ops:,} operations, verdict {result.valid})")
    print(f"check             {check_cpu:.2f} s CPU  {check_wall:.2f} s wall")
    print(f"report            {cpu:.2f} s CPU  {wall:.2f} s wall  ({events / wall:,.0f} events/s)")
    print(f"report / check    {ratio:.2f}x CPU  (target <= {_TIME_RATIO_TARGET:g}x)")
    shown = min(total_ops, MAX_TIMELINE_OPS)
    print(f"page              {size / 2**20:.1f} MiB  (target < {_SIZE_TARGET / 2**20:.0f} MiB)")
    print(f"timeline carries  {shown:,} of {total_ops:,} operations")
    print(json.dumps({"report_cpu": cpu, "check_cpu": check_cpu, "ratio": ratio, "bytes": size}))
    return 0 if ratio <= _TIME_RATIO_TARGET and size < _SIZE_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
