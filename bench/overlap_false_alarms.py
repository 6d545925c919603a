"""Correct systems under overlapping faults: no run may end invalid.

For each system, ``--runs`` seeded runs (seeds ``--first-seed`` onwards) of ``--time-limit``
seconds with ``--nemesis`` (default ``pause,kill,partition``) at ``--overlap`` (default 1: every
window that can get a partner of another kind gets one), the default targets and everything else
the run's default. A correct system must never be judged invalid: each such run is a false alarm
(or a real bug of the system) and its run directory is printed to look at.

    PYTHONPATH=. python3 bench/overlap_false_alarms.py [--runs 20] [--time-limit 20]
        [--systems reference,etcd,redis,zookeeper] [--nemesis pause,kill,partition]
        [--overlap 1] [--first-seed 1] [--store /tmp/overlap-false-alarms]

Prints one line per run (seed, verdict, anomaly types, the fault windows and the pairs of kinds
that were in force together) and one summary line per system (valid / invalid / unknown /
error); exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from bench.two_faults import run_json

__all__ = ["main"]

_OUTCOMES = ("valid", "invalid", "unknown", "error")


def _overlapped(coverage: dict[str, Any]) -> str:
    """The pairs of kinds in force together: ``kill+pause 2x 3.1 s``, or ``none``."""
    pairs = coverage.get("overlaps", {})
    return (
        ", ".join(f"{pair} {row['count']}x {row['seconds']:.1f} s" for pair, row in pairs.items())
        or "none"
    )


def _one(system: str, options: list[str], seed: int, time_limit: float, store: Path) -> str:
    """One run of ``system``: its outcome (one of ``_OUTCOMES``) after its printed line."""
    done = run_json(["--system", system, *options], seed, time_limit, store)
    result = done.result
    if result is None or done.code == 3:
        why = done.why_none() if result is None else result.get("run_error", done.stderr[-200:])
        print(f"{system} seed {seed}: error: {why}", flush=True)
        return "error"
    valid = result["valid"]
    outcome = {True: "valid", False: "invalid"}.get(valid, "unknown")
    line = (
        f"{system} seed {seed}: {outcome}; anomalies {','.join(result['anomaly_types']) or '-'}; "
        f"windows {len(result['faults'])}, overlapped {_overlapped(result['coverage'])}"
    )
    if outcome == "invalid":
        line += f"; FALSE ALARM, run dir {result['run_dir']}"
    if outcome == "unknown":
        line += f"; why: {'; '.join(result['unknown_reasons'])} ({result['run_dir']})"
    print(line, flush=True)
    return outcome


def main(argv: list[str] | None = None) -> int:
    """Run every system asked for and print the counts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--systems", default="reference,etcd,redis,zookeeper")
    parser.add_argument("--nemesis", default="pause,kill,partition")
    parser.add_argument("--overlap", default="1")
    parser.add_argument("--store", type=Path, default=Path("/tmp/overlap-false-alarms"))
    args = parser.parse_args(argv)
    options = ["--nemesis", args.nemesis, "--overlap", args.overlap]
    totals: dict[str, Counter[str]] = {}
    for system in args.systems.split(","):
        seeds = range(args.first_seed, args.first_seed + args.runs)
        totals[system] = Counter(
            _one(system, options, seed, args.time_limit, args.store) for seed in seeds
        )
    for system, counts in totals.items():
        print(
            f"{system} --nemesis {args.nemesis} --overlap {args.overlap}, {args.runs} runs of "
            f"{args.time_limit:g} s: " + ", ".join(f"{counts[o]} {o}" for o in _OUTCOMES)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
