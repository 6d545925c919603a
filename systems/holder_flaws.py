"""Holder flaws: mistakes in the lock holder's own logic, the harness's and not a system's.

The holder is fencecheck's agent plus its workload, so these flaws exist with every system: a run
asks for them with ``--bug`` like a system's switches, and they never clash with a system's names
(:func:`check_no_clash`). ``retry-on-reject`` is carried out by the agent
(:mod:`harness.nodeside.agent`), ``reacquire-no-reread`` by the read-modify-write workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from harness.nodeside.agent import RETRY_ON_REJECT
from systems.base import PAUSE_PAST_LEASE, BugSwitch, ConfigError, Exposure, switch_table

__all__ = ["HOLDER_FLAWS", "REACQUIRE_NO_REREAD", "RETRY_ON_REJECT", "check_no_clash"]

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
