"""Holder flaws: mistakes in the lock holder's own logic, the harness's and not a system's.

The holder is fencecheck's agent plus its workload, so these flaws exist with every system: a run
asks for them with ``--bug`` like a system's switches, and they never clash with a system's names
(:func:`check_no_clash`). ``retry-on-reject`` and ``trust-own-timer`` are carried out by the
agent (:mod:`harness.nodeside.agent`), ``reacquire-no-reread`` by the read-modify-write workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from harness.nodeside.agent import RETRY_ON_REJECT, TRUST_OWN_TIMER
from systems.base import PAUSE_PAST_LEASE, BugSwitch, ConfigError, Exposure, switch_table

__all__ = [
    "HOLDER_FLAWS",
    "REACQUIRE_NO_REREAD",
    "RETRY_ON_REJECT",
    "TRUST_OWN_TIMER",
    "check_no_clash",
]

REACQUIRE_NO_REREAD: Final = "reacquire-no-reread"

HOLDER_FLAWS: Final = switch_table(
    BugSwitch(
        RETRY_ON_REJECT,
        "a holder re-sends a write refused as stale with the same epoch (the runner "
        "re-sends; the agent keeps the lease and skips its lease check for the retry)",
        PAUSE_PAST_LEASE,
        ("retry-after-reject",),
    ),
    BugSwitch(
        REACQUIRE_NO_REREAD,
        "after re-acquiring, the read-modify-write workload writes again from its old "
        "read (nothing changes on the nodes)",
        # Few keys: the old read is lost only if another holder wrote its key meanwhile.
        Exposure(faults=("pause",), workload="rmw", ttl_multiples=(3.0,), keys=3),
        ("lost-update",),
    ),
    BugSwitch(
        TRUST_OWN_TIMER,
        "before writing to a sink a lock-delay protects, the holder trusts its own timer for "
        "the whole lease instead of confirming the lease with the lock service in its second "
        "half: a clock that runs slow keeps it writing after the lease and the lock-delay ran "
        "out (only a clock fault shows it)",
        # A slow rate (drawn for a holder: 0.25x or 0.5x) on the holder's agent while it
        # writes, which keeps its lease many writes long, overlapped by a partition of that
        # holder: a slow clock alone is not enough, since the late renewal (TTL/3 by the slow
        # clock, 4/3 TTL of real time at 0.25x) is refused and tells the holder its lease is
        # gone before the lock-delay lets another write; cut from the lock service it hears
        # nothing and trusts its clock. The lock-delay (1.2 TTL of the default 1 s) covers the
        # careful holder at 0.25x (half a TTL by its clock is 2 TTL of real time), not the
        # flawed one (4 TTL); at 0.5x only a write in flight at the end of the lease may be late.
        # Cut from the lock service only (lock-cut): a partition that also cuts the sink holds a
        # careful holder's write in TCP's retransmission past the lock-delay, so the careful
        # holder would be caught too (measured: 5 of 5 control runs invalid with every topology).
        Exposure(
            faults=("clock-rate", "partition"),
            targets=("holder",),
            workload="sinks",
            ttl_multiples=(3.0,),
            lock_delay=1.2,
            writes_per_lease=50,
            overlap=1.0,
            partitions=("lock-cut",),
        ),
        ("stale-write",),
        ("audit",),
    ),
)
"""The holder flaws, by name."""


def check_no_clash(system: str, switches: Mapping[str, BugSwitch]) -> None:
    """Raise :class:`ConfigError` if a system's switch takes a holder flaw's name."""
    clash = sorted(set(switches) & set(HOLDER_FLAWS))
    if clash:
        raise ConfigError(
            f"system {system!r} names bug switch(es) {', '.join(clash)} like the harness's "
            "holder flaws; rename them in the adapter"
        )
