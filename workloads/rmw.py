"""``rmw``: read-modify-write, each write naming the entry it was computed from (``prev``).

Two accepted writes with the same ``prev`` are a lost update. The correct holder reads under its
current lease (a fenced read, which also raises the store's mark so an older holder's write that
lands later is refused) before every write; the ``reacquire_no_reread`` flaw re-sends a refused
write's stale computation under the next lease without reading again.
"""

from __future__ import annotations

from workloads.base import Completion, Ops, WorkloadOptions
from workloads.holder import KeyPicker, Lease, run_holder, write_with_flaws

__all__ = ["ReadModifyWrite"]


class ReadModifyWrite:
    """Read the key's log, think for ``work_ms``, write an entry based on the last one read."""

    name = "rmw"
    description = "read-modify-write with prev, to expose lost updates"

    def holder(self, ops: Ops, options: WorkloadOptions) -> None:
        """Read-modify-write under leases until the run stops."""
        sink = options.fenced_sinks[0]
        # A refused computation, per lock: the flawed holder replays it after re-acquiring.
        refused: dict[str, tuple[str, str | None]] = {}
        keys = KeyPicker(ops.rng, options)

        def unit(ops: Ops, lease: Lease, options: WorkloadOptions) -> Completion:
            replay = refused.pop(lease.lock, None)
            if replay is not None and options.flaws.reacquire_no_reread:
                key, prev = replay
            else:
                key = keys.pick(lease.lock)[0]
                seen = ops.read(sink, key, lease.lock, lease.epoch)
                if not seen.ok:
                    return seen
                entries = seen.value.get("entries") or []
                prev = str(entries[-1]["id"]) if entries else None
            done = write_with_flaws(ops, lease, options, sink, key, prev)
            if done.refused:
                refused[lease.lock] = (key, prev)
            return done

        run_holder(ops, options, unit)

    def final_read_sinks(self, options: WorkloadOptions) -> tuple[str, ...]:
        """The fenced sink it writes."""
        return options.fenced_sinks[:1]
