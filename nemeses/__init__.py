"""Faults and their schedules (docs/design.md §7).

The pieces: the :class:`Nemesis` protocol and :class:`Fault`; one nemesis per fault kind (pause,
freeze, throttle, partition, kill) combined by :func:`standard_nemesis`; seeded, lease-aware
schedules (:func:`generate_schedule`); the :class:`NemesisPlayer` that plays a schedule during a
run, records every fault and heals everything at the end; :func:`heal_nodes` for a cluster whose
faults nobody remembers.
"""

from __future__ import annotations

from collections.abc import Collection

from nemeses.composite import CompositeNemesis
from nemeses.freeze import FreezeNemesis
from nemeses.kill import KillNemesis
from nemeses.noop import NoopNemesis
from nemeses.partition import PartitionNemesis
from nemeses.pause import PauseNemesis
from nemeses.player import NemesisPlayer
from nemeses.processes import Locator, Restarter, recorded_daemons, restart
from nemeses.protocol import FAULT_KINDS, Fault, HealReport, Nemesis, NemesisError
from nemeses.recovery import heal_nodes
from nemeses.restart_while_paused import RESTART_WHILE_PAUSED, RestartWhilePausedNemesis
from nemeses.schedule import (
    DEFAULT_TTL_MULTIPLES,
    HOLDER,
    LOCK_LEADER,
    Schedule,
    Window,
    generate_schedule,
    resolve,
)
from nemeses.throttle import ThrottleNemesis
from nemeses.topology import TOPOLOGIES, partition_fault

__all__ = [
    "DEFAULT_TTL_MULTIPLES",
    "FAULT_KINDS",
    "HOLDER",
    "LOCK_LEADER",
    "RESTART_WHILE_PAUSED",
    "TOPOLOGIES",
    "CompositeNemesis",
    "Fault",
    "FreezeNemesis",
    "HealReport",
    "KillNemesis",
    "Nemesis",
    "NemesisError",
    "NemesisPlayer",
    "NoopNemesis",
    "PartitionNemesis",
    "PauseNemesis",
    "RestartWhilePausedNemesis",
    "Restarter",
    "Schedule",
    "ThrottleNemesis",
    "Window",
    "generate_schedule",
    "heal_nodes",
    "partition_fault",
    "resolve",
    "standard_nemesis",
]


def standard_nemesis(
    kinds: Collection[str] = FAULT_KINDS,
    *,
    locate: Locator = recorded_daemons,
    restarter: Restarter = restart,
) -> CompositeNemesis:
    """One nemesis for every fault kind in ``kinds``.

    Members heal in the order restart-while-paused, freeze, throttle, partition, pause, kill:
    a frozen node runs no commands, and restarting a daemon needs a node that runs them.
    ``locate`` finds the daemons pause and kill aim at (the nodes' own records by default);
    ``restarter`` starts a daemon the kill fault killed again (the plain relaunch by default).
    """
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        raise NemesisError(
            f"unknown fault kind(s) {', '.join(unknown)}; choose from {', '.join(FAULT_KINDS)}"
        )
    members: dict[str, Nemesis] = {
        # Its relaunch stays the plain one: the paused holder must run again the instant the
        # store listens, before a system's readiness wait lets others re-teach the mark.
        RESTART_WHILE_PAUSED: RestartWhilePausedNemesis(locate),
        "freeze": FreezeNemesis(),
        "throttle": ThrottleNemesis(),
        "partition": PartitionNemesis(),
        "pause": PauseNemesis(locate),
        "kill": KillNemesis(locate, restarter=restarter),
    }
    return CompositeNemesis(*(nemesis for kind, nemesis in members.items() if kind in kinds))
