"""``run-all --parallel`` bench: the wall time of a 4-row matrix one run at a time, then two side
by side (issue 16: ``--parallel 2`` halves it, within noise).

The rows are short runs of the correct reference system under holder pauses, each on its own
fresh cluster and network as ``run-all`` makes them. Prints both wall times and their ratio
against the target (<= 0.6: half, plus noise).

    python bench/run_all_parallel.py [--time-limit 10] [--rows 4]

Exit status is 0 whatever the numbers: on a shared 2-core machine the figure is for people to
read, not a gate. Run directories go to a fresh temporary folder.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Final

from rich.console import Console

from harness.cli.run_all import run_matrix
from harness.record.spec import TestSpec
from harness.run.judge import RunOutcome
from harness.run.matrix import entries_from
from harness.run.runner import run_test

__all__ = ["main"]

_TARGET_RATIO: Final = 0.6


def _timed(rows: int, time_limit: float, store: Path, parallel: int, console: Console) -> float:
    defaults = {"time_limit": time_limit, "store": str(store)}
    entries = entries_from({"defaults": defaults, "cross": {"seed": list(range(1, rows + 1))}})

    def runner(spec: TestSpec) -> RunOutcome:
        return run_test(spec, console=console, progress=False)

    started = time.monotonic()
    results = run_matrix(entries, runner, console, parallel=parallel)
    took = time.monotonic() - started
    crashed = [r.error for r in results if r.summary is None]
    if crashed:
        console.print(f"[red]{len(crashed)} run(s) crashed:[/] {crashed[0]}")
    return took


def main() -> None:
    """Time the matrix sequentially and with ``--parallel 2``; print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--rows", type=int, default=4)
    args = parser.parse_args()
    quiet = Console(stderr=True, quiet=True)
    with tempfile.TemporaryDirectory(prefix="fencecheck-bench-") as folder:
        one = _timed(args.rows, args.time_limit, Path(folder) / "one", 1, quiet)
        two = _timed(args.rows, args.time_limit, Path(folder) / "two", 2, quiet)
    ratio = two / one
    mark = "ok" if ratio <= _TARGET_RATIO else "over target"
    print(f"{args.rows} rows of {args.time_limit:g} s: one at a time {one:.1f} s")
    print(f"--parallel 2: {two:.1f} s; ratio {ratio:.2f} (target <= {_TARGET_RATIO}) {mark}")


if __name__ == "__main__":
    main()
