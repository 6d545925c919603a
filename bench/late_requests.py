"""Requests that arrive late: how often a default run catches the switches only the write-path
proxy's faults expose, and whether the correct systems stay valid under them.

Detection: for each of the reference system's ``fence-per-connection`` (exposed by ``hold``),
``non-idempotent-write`` (exposed by ``replay``), ``grant-to-expired-waiter`` (a waiter paused
past its session) and ``equal-epoch-any-holder`` (a store that admits one epoch from two
holders, beside the lock service's ``counter-no-fsync`` under a power loss), N seeded runs with
what ``fencecheck run --bug X`` picks by itself: the runs invalid with one of the switch's own
anomalies (caught out of N) and the median time to the first violation. False alarms: N
seeded runs of each correct system (``reference``, ``etcd``, ``redis``, ``zookeeper`` by
default) under ``--nemesis hold,delay,reset`` at the run's default targets (or ``--target``):
invalid (should be 0), valid and unknown.

    PYTHONPATH=. python3 bench/late_requests.py [--runs 20] [--time-limit 60] [--seed 1]
        [--switch NAME ...] [--system NAME ...] [--target T,T] [--no-detection]
        [--no-false-alarms] [--store DIR] [--max-load 6]

Each run prints one line (seed, verdict, time to the first violation, run folder); each switch
and each system ends with one SUMMARY line. Each run is a real Docker cluster (about the time
limit plus 10 s); on a shared machine run a few (``--runs 3 --time-limit 30``). Exit status 0
whatever the numbers. The shared part is :mod:`bench.switch_runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bench import switch_runs

__all__ = ["LATE_REQUESTS", "main"]

LATE_REQUESTS: Final = switch_runs.Family(
    switches={
        "fence-per-connection": "reference",
        "non-idempotent-write": "reference",
        "grant-to-expired-waiter": "reference",
        "equal-epoch-any-holder": "reference",
    },
    nemeses=("hold", "delay", "reset"),
    systems=("reference", "etcd", "redis", "zookeeper"),
    default_systems=("reference", "etcd", "redis", "zookeeper"),
)
"""The late-request family: its switches, the faults of its false-alarm runs, its systems."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts and print their tables."""
    return switch_runs.main(LATE_REQUESTS, __doc__ or "", argv)


if __name__ == "__main__":
    raise SystemExit(main())
