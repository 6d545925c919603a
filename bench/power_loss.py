"""Power loss: how often a default run catches the switches only it exposes, and whether the
correct systems stay valid under it.

Detection: for each of ``mark-no-fsync``, ``ack-before-fsync`` and ``counter-no-fsync`` (the
reference system's), ``appendfsync-everysec`` and ``appendfsync-no`` (Redis's),
``force-sync-no`` (ZooKeeper's) and ``pg-fsync-off`` (etcd's PostgreSQL), N seeded runs with
what ``fencecheck run --bug X`` picks by itself: detections out of N (invalid with one of the
switch's own anomalies) and the median time to the first violation. False alarms: N seeded runs
of each correct system (reference, Redis, ZooKeeper, and etcd with the ``sinks`` workload,
which writes its PostgreSQL where ``append`` on etcd never does) under ``--nemesis
power-loss,kill,pause`` (or the ``--nemesis``, ``--target``, ``--fault-lengths`` and ``--ttl``
given: ``--nemesis power-loss --target lock-all --fault-lengths 1.1`` is the whole ZooKeeper
ensemble losing power, as ``force-sync-no``'s exposure has it): the runs whose verdict was
invalid (should be 0).

    PYTHONPATH=. python3 bench/power_loss.py [--runs 20] [--time-limit 60] [--seed 1]
        [--switch NAME ...] [--system NAME ...] [--workload NAME] [--no-detection]
        [--no-false-alarms] [--nemesis KINDS] [--target TARGETS] [--fault-lengths MULTIPLES]
        [--ttl S] [--max-load LOAD] [--store DIR]

Each run prints one line (seed, verdict, time to the first violation, run folder); each switch
and each system ends with one SUMMARY line. Each run is a real Docker cluster: the defaults take
about 20 x 11 x 70 s. On a shared machine run a few (``--runs 3 --time-limit 30``). Exit status 0
whatever the numbers. The shared part is :mod:`bench.switch_runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bench import switch_runs

__all__ = ["POWER_LOSS", "main"]

POWER_LOSS: Final = switch_runs.Family(
    switches={
        "mark-no-fsync": "reference",
        "ack-before-fsync": "reference",
        "counter-no-fsync": "reference",
        "appendfsync-everysec": "redis",
        "appendfsync-no": "redis",
        "force-sync-no": "zookeeper",
        "pg-fsync-off": "etcd",
    },
    nemeses=("power-loss", "kill", "pause"),
    systems=("reference", "redis", "zookeeper", "etcd"),
    default_systems=("reference", "redis", "zookeeper", "etcd"),
    workloads={"etcd": "sinks"},
)
"""The power-loss family: its switches, the faults of its false-alarm runs, its systems (etcd's
false alarms write its PostgreSQL sink)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts and print their tables."""
    return switch_runs.main(POWER_LOSS, __doc__ or "", argv)


if __name__ == "__main__":
    raise SystemExit(main())
