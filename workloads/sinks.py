"""``sinks``: each unit of work goes to every sink of the write-path inventory.

The holder checks its lease and works once per unit (the critical section a pause makes stale),
then fans the result out to every sink, unfenced ones first, as a real side effect (a payment, a
printed page) usually happens before its record. A refusal does not stop the fan-out: the unit
was decided, and every path must defend itself. So a stale unit reaches every sink, and each
write path shows whether it refuses, is protected by its mitigation, or lets the stale write in.
"""

from __future__ import annotations

from workloads.base import Completion, Ops, WorkloadOptions
from workloads.holder import Lease, run_holder, write_with_flaws

__all__ = ["MultiSink"]


class MultiSink:
    """Each unit works once, then writes one fresh id per sink under the same epoch."""

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
    first, *rest = unfenced + fenced
    outcome = write_with_flaws(ops, lease, options, first, key)
    if not (outcome.ok or outcome.refused):
        return outcome  # never sent, or unknown: the unit did not go out
    for sink in rest:
        done = write_with_flaws(ops, lease, options, sink, key, unit_start=False)
        if outcome.ok and not done.ok:
            outcome = done
        if done.type == "info":
            break
    return outcome
