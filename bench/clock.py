"""Clock faults: how often the mistakes only they expose are caught, and false alarms without them.

Detection: for each switch (the reference's ``wall-clock-expiry`` and ``timestamp-token``, the
holder flaw ``trust-own-timer`` on the reference, Redis's ``owned-trusts-lease`` by default) N
seeded runs of its system with what ``fencecheck run --bug X`` picks from the switch's
``exposed_by`` (faults, targets, workload, fault lengths, lock-delay, writes per lease: every
field but the bench's length and seed); per switch the runs whose verdict was invalid with one of
its own anomalies (detections out of N) and the median time, from the run's start, to the first
such violation.

False alarms: N seeded runs of each correct system (``reference``, ``redis``, ``zookeeper`` by
default) under ``--nemesis clock-step,clock-rate`` with every other setting the run's default but
the targets (``--target``, default the run's own: the holders' agents; ``holder,lock`` moves the
lock service's clocks too); per system the verdicts (invalid is a false alarm). A run the harness
refuses before it starts (a clock fault aimed at a daemon that cannot take one) is counted as
refused, with the reason. Every run prints one line (its verdict and its folder, which a false
alarm keeps) as it ends.

    PYTHONPATH=. python3 bench/clock.py [--runs 20] [--time-limit 60] [--seed 1] [--store DIR]
        [--switch NAME ...] [--system NAME ...] [--target T,T] [--no-detection]
        [--no-false-alarms] [--max-load 6]

Each run is a real Docker cluster (about the time limit plus 10 s); on a shared machine run a
few (``--runs 3 --time-limit 30``). Exit status 0 whatever the numbers. The shared part is
:mod:`bench.switch_runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bench import switch_runs

__all__ = ["CLOCK", "main"]

CLOCK: Final = switch_runs.Family(
    switches={
        "wall-clock-expiry": "reference",
        "trust-own-timer": "reference",
        "timestamp-token": "reference",
        "owned-trusts-lease": "redis",
    },
    nemeses=("clock-step", "clock-rate"),
    systems=("reference", "redis", "zookeeper"),
    default_systems=("reference", "redis", "zookeeper"),
)
"""The clock family: its switches, the faults of its false-alarm runs, its systems."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts and print their tables."""
    return switch_runs.main(CLOCK, __doc__ or "", argv)


if __name__ == "__main__":
    raise SystemExit(main())
