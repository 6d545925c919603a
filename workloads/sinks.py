"""``sinks``: each unit of work goes to every sink of the write-path inventory.

Unfenced sinks are written first, as a real side effect (a payment, a printed page) usually
happens before its record, so a stale holder reaches them even when the fenced store then refuses
it. Exercises every write path: fenced ones must refuse, mitigated ones must be protected.
"""

from __future__ import annotations

from workloads.base import Completion, Ops, WorkloadOptions
from workloads.holder import Lease, run_holder, write_with_flaws

__all__ = ["MultiSink"]


class MultiSink:
    """Each unit writes one fresh id per sink, unfenced sinks first, under the same epoch."""

    name = "sinks"
    description = "each unit of work written to every sink, fenced and unfenced"

    def holder(self, ops: Ops, options: WorkloadOptions) -> None:
        """Write to all sinks under leases until the run stops."""
        run_holder(ops, options, _write_everywhere)

    def final_reads(self, options: WorkloadOptions) -> list[tuple[str, str]]:
        """Every key of every lock on every sink."""
        return [
            (sink, key)
            for sink in options.all_sinks
            for lock in options.lock_names()
            for key in options.key_names(lock)
        ]


def _write_everywhere(ops: Ops, lease: Lease, options: WorkloadOptions) -> Completion:
    key = ops.rng.choice(options.key_names(lease.lock))
    unfenced = [s for s in options.all_sinks if s not in options.fenced_sinks]
    fenced = [s for s in options.all_sinks if s in options.fenced_sinks]
    done = Completion("ok")
    for sink in unfenced + fenced:
        done = write_with_flaws(ops, lease, options, sink, key)
        if not done.ok:
            break
    return done
