"""The controller's memory against keys x locks: peak RSS of whole ``fencecheck run``s.

Each size is one real run on the no-op system (``systems/noop``: in-memory lock and sink, so the
controller is what is measured), no faults, a short workload, then the final reads of every key of
every lock. The final reads are streamed, so the peak RSS should stay flat as keys x locks grows;
a size above the work bound (``harness.record.spec.MAX_FINAL_READS``) is refused at once, exit 3.

    PYTHONPATH=. python3 bench/work_bound.py [--sizes 3x1,1000x10,1000x100,100000x1000]
                                              [--time-limit 3]

Prints one row per size: keys, locks, final reads, exit code, seconds, peak RSS (MiB) of the
controller (exit 3: refused before anything started). Exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

__all__ = ["main"]


def _sizes(text: str) -> list[tuple[int, int]]:
    pairs = []
    for part in text.split(","):
        keys, locks = part.lower().split("x")
        pairs.append((int(keys), int(locks)))
    return pairs


def _measure(keys: int, locks: int, time_limit: float, store: Path) -> tuple[int, float, float]:
    """One run in a fresh process: (exit code, seconds, peak RSS in MiB).

    ``wait4`` gives this child's own peak, so the peaks of earlier sizes do not hide a later
    one's (``RUSAGE_CHILDREN`` would report the largest of all).
    """
    argv = [sys.executable, "-m", "harness", "run", "--system", "noop", "--nemesis", "none"]
    argv += ["--time-limit", f"{time_limit:g}", "--ttl", "0.5", "--workers", "2", "--seed", "1"]
    argv += ["--keys", str(keys), "--locks", str(locks), "--store", str(store), "--no-progress"]
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait
    # ru_maxrss is in KiB on Linux.
    return child.returncode, time.monotonic() - started, usage.ru_maxrss / 1024


def main() -> None:
    """Measure each size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3x1,1000x10,1000x100,100000x1000")
    parser.add_argument("--time-limit", type=float, default=3.0)
    args = parser.parse_args()
    table = Table("keys", "locks", "final reads", "exit", "seconds", "peak RSS MiB")
    with tempfile.TemporaryDirectory() as folder:
        for keys, locks in _sizes(args.sizes):
            code, seconds, rss = _measure(keys, locks, args.time_limit, Path(folder) / "store")
            table.add_row(
                f"{keys:,}",
                f"{locks:,}",
                f"{keys * locks:,}",
                str(code),
                f"{seconds:.1f}",
                f"{rss:.0f}",
            )
    Console().print(table)


if __name__ == "__main__":
    main()
