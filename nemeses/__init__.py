"""Faults and their schedules (docs/design.md §7).

The pieces: the :class:`Nemesis` protocol and :class:`Fault`; one nemesis per fault kind (pause,
freeze, throttle, partition, kill) combined by :func:`standard_nemesis`; seeded, lease-aware
schedules (:func:`generate_schedule`); the :class:`NemesisPlayer` that plays a schedule during a
run, records every fault and heals everything at the end; :func:`heal_nodes` for a cluster whose
faults nobody remembers.
"""

from __future__ import annotations

from nemeses.composite import CompositeNemesis
from nemeses.freeze import FreezeNemesis
from nemeses.kill import KillNemesis
from nemeses.kinds import FaultKind
from nemeses.noop import NoopNemesis
from nemeses.partition import PartitionNemesis
from nemeses.pause import PauseNemesis
from nemeses.player import NemesisPlayer
from nemeses.processes import Restarter
from nemeses.protocol import Fault, HealReport, Nemesis, NemesisError
from nemeses.recovery import heal_nodes
from nemeses.registry import DEFAULT_NEMESES, FAULT_KINDS, KINDS, fault_kind, standard_nemesis
from nemeses.restart_while_paused import RESTART_WHILE_PAUSED
from nemeses.schedule import (
    DEFAULT_OVERLAP,
    DEFAULT_TTL_MULTIPLES,
    END_AFTER_WRITES,
    HOLDER,
    HOLDER_MEMBER,
    LOCK_FOLLOWER,
    LOCK_LEADER,
    WAITER,
    Refusal,
    Schedule,
    Window,
    generate_schedule,
    playable,
    resolve,
)
from nemeses.throttle import ThrottleNemesis
from nemeses.topology import TOPOLOGIES, partition_fault

__all__ = [
    "DEFAULT_NEMESES",
    "DEFAULT_OVERLAP",
    "DEFAULT_TTL_MULTIPLES",
    "END_AFTER_WRITES",
    "FAULT_KINDS",
    "HOLDER",
    "HOLDER_MEMBER",
    "KINDS",
    "LOCK_FOLLOWER",
    "LOCK_LEADER",
    "RESTART_WHILE_PAUSED",
    "TOPOLOGIES",
    "WAITER",
    "CompositeNemesis",
    "Fault",
    "FaultKind",
    "FreezeNemesis",
    "HealReport",
    "KillNemesis",
    "Nemesis",
    "NemesisError",
    "NemesisPlayer",
    "NoopNemesis",
    "PartitionNemesis",
    "PauseNemesis",
    "Refusal",
    "Restarter",
    "Schedule",
    "ThrottleNemesis",
    "Window",
    "fault_kind",
    "generate_schedule",
    "heal_nodes",
    "partition_fault",
    "playable",
    "resolve",
    "standard_nemesis",
]
