"""``sinks``: each unit of work goes to every sink of the write-path inventory.

The holder checks its lease and works once per unit (the critical section a pause makes stale),
then writes the result to every sink in turn without checking again, as a real client fans one
checked result out. Unfenced sinks come first, as a real side effect (a payment, a printed page)
usually happens before its record. Fenced sinks follow in reverse inventory order: adapters list
their primary store first, and the secondary paths (a batch endpoint) are where a missing check
hides, so they meet a stale unit before the primary store refuses it. A refusal ends the unit:
sending the refused epoch anywhere else would be a retry after a reject.
"""

from __future__ import annotations

from workloads.base import Completion, Ops, WorkloadOptions
from workloads.holder import KeyPicker, Lease, run_holder, write_with_flaws

__all__ = ["MultiSink"]


class MultiSink:
    """Each unit works once, then writes one fresh id per sink under the same epoch."""

    name = "sinks"
    description = "each unit of work written to every sink, fenced and unfenced"

    def holder(self, ops: Ops, options: WorkloadOptions) -> None:
        """Write to all sinks under leases until the run stops."""
        keys = KeyPicker(ops.rng, options)

        def unit(ops: Ops, lease: Lease, options: WorkloadOptions) -> Completion:
            return _write_everywhere(ops, lease, options, keys.pick(lease.lock)[0])

        run_holder(ops, options, unit)

    def final_read_sinks(self, options: WorkloadOptions) -> tuple[str, ...]:
        """Every sink it writes."""
        return options.all_sinks


def _write_everywhere(ops: Ops, lease: Lease, options: WorkloadOptions, key: str) -> Completion:
    unfenced = [s for s in options.all_sinks if s not in options.fenced_sinks]
    fenced = [s for s in reversed(options.all_sinks) if s in options.fenced_sinks]
    done = Completion("ok")
    for position, sink in enumerate(unfenced + fenced):
        done = write_with_flaws(ops, lease, options, sink, key, unit_start=position == 0)
        if not done.ok:
            break
    return done
