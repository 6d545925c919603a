"""``append``: fenced appends of unique ids to the fenced store, the plainest fencing test."""

from __future__ import annotations

from workloads.base import Completion, Ops, WorkloadOptions
from workloads.holder import KeyPicker, Lease, run_holder, write_with_flaws

__all__ = ["Append"]


class Append:
    """Each unit appends one fresh id to the next key of the lease's lock on the first sink;
    with ``keys_per_write`` above 1, one fresh id to each of that many keys in one write."""

    name = "append"
    description = "fenced appends with unique ids; reads during the run and a final read per key"

    def holder(self, ops: Ops, options: WorkloadOptions) -> None:
        """Append under leases until the run stops."""
        keys = KeyPicker(ops.rng, options)

        def unit(ops: Ops, lease: Lease, options: WorkloadOptions) -> Completion:
            return _append_one(ops, lease, options, keys)

        run_holder(ops, options, unit)

    def final_read_sinks(self, options: WorkloadOptions) -> tuple[str, ...]:
        """The fenced sink it writes."""
        return options.fenced_sinks[:1]


def _append_one(ops: Ops, lease: Lease, options: WorkloadOptions, keys: KeyPicker) -> Completion:
    picked = keys.pick(lease.lock, options.keys_per_write)
    key = picked[0] if options.keys_per_write == 1 else picked
    return write_with_flaws(ops, lease, options, options.fenced_sinks[0], key)
