"""``append``: fenced appends of unique ids to the fenced store, the plainest fencing test."""

from __future__ import annotations

from workloads.base import Completion, Ops, WorkloadOptions
from workloads.holder import Lease, run_holder, write_with_flaws

__all__ = ["Append"]


class Append:
    """Each unit appends one fresh id to a random key of the lease's lock on the first sink."""

    name = "append"
    description = "fenced appends with unique ids; reads during the run and a final read per key"

    def holder(self, ops: Ops, options: WorkloadOptions) -> None:
        """Append under leases until the run stops."""
        run_holder(ops, options, _append_one)

    def final_reads(self, options: WorkloadOptions) -> list[tuple[str, str]]:
        """Every key of every lock on the fenced sink."""
        sink = options.fenced_sinks[0]
        return [(sink, key) for lock in options.lock_names() for key in options.key_names(lock)]


def _append_one(ops: Ops, lease: Lease, options: WorkloadOptions) -> Completion:
    key = ops.rng.choice(options.key_names(lease.lock))
    return write_with_flaws(ops, lease, options, options.fenced_sinks[0], key)
