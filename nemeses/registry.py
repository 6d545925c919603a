"""The fault-kind registry: one entry per kind (:class:`nemeses.kinds.FaultKind`).

Adding a fault kind is one module that defines its nemesis and its ``KIND`` entry, plus one line
here. Everything that lists kinds or needs a fact of one (``--nemesis`` help, ``fencecheck
list``, manual commands, schedules, healing, the exposure and durability checks, replay's
pinning, the report's colours, the verbs of explanations) reads this table; readers below the
nemeses read the facts the player records from it in each event.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

# The default kinds are the spec's default (the schema's, in the record layer); re-exported here.
from harness.record.spec import DEFAULT_NEMESES
from nemeses import (
    clock,
    disk,
    freeze,
    kill,
    partition,
    pause,
    proxy,
    restart_while_paused,
    throttle,
)
from nemeses.composite import CompositeNemesis
from nemeses.kinds import FaultKind
from nemeses.processes import Locator, Restarter, recorded_daemons, restart
from nemeses.protocol import NemesisError

__all__ = [
    "DEFAULT_NEMESES",
    "FAULT_KINDS",
    "KINDS",
    "fault_kind",
    "fault_words",
    "healing_order",
    "standard_nemesis",
]

KINDS: Final[Mapping[str, FaultKind]] = {
    kind.name: kind
    for kind in (
        pause.KIND,
        freeze.KIND,
        throttle.KIND,
        partition.KIND,
        kill.KIND,
        restart_while_paused.KIND,
        clock.STEP_KIND,
        clock.RATE_KIND,
        proxy.HOLD_KIND,
        proxy.DELAY_KIND,
        proxy.LOSS_KIND,
        proxy.RESET_KIND,
        proxy.REPLAY_KIND,
        disk.POWER_LOSS_KIND,
        disk.DISK_FULL_KIND,
        disk.FSYNC_ERROR_KIND,
        disk.SLOW_DISK_KIND,
    )
}
"""Every fault kind fencecheck injects (docs/design.md §7), by name, in the order help lists
them."""

FAULT_KINDS: Final[tuple[str, ...]] = tuple(KINDS)
"""The names of :data:`KINDS`."""


def fault_kind(name: str) -> FaultKind:
    """The entry of ``name``; an unknown name is an error that lists the kinds."""
    try:
        return KINDS[name]
    except KeyError:
        raise NemesisError(
            f"unknown fault kind {name!r}; choose from {', '.join(FAULT_KINDS)}"
        ) from None


def fault_words(name: str) -> dict[str, Any]:
    """What a fault of kind ``name`` does to its targets, in words (``verb``), and to each part of
    a compound (``part_verbs``): recorded with its start so that histories explain themselves."""
    kind = fault_kind(name)
    words: dict[str, Any] = {"verb": kind.verb}
    if kind.parts:
        words["part_verbs"] = [fault_kind(part).verb for part in kind.parts]
    return words


def healing_order(kinds: Collection[str] = FAULT_KINDS) -> list[FaultKind]:
    """The entries of ``kinds`` in the order they must heal (see :attr:`FaultKind.heal_rank`)."""
    return sorted((fault_kind(name) for name in kinds), key=lambda kind: kind.heal_rank)


def _composed_of(name: str) -> tuple[str, ...]:
    composed = fault_kind(name).composed
    return composed.kinds if composed is not None else ()


def standard_nemesis(
    kinds: Collection[str] = FAULT_KINDS,
    *,
    locate: Locator = recorded_daemons,
    restarter: Restarter = restart,
) -> CompositeNemesis:
    """One nemesis for every fault kind in ``kinds`` and every kind their windows are played as
    (:attr:`~nemeses.kinds.FaultKind.composed`: a compound has no nemesis of its own), healing
    in :func:`healing_order`.

    ``locate`` finds the daemons process faults aim at (the nodes' own records by default);
    ``restarter`` starts a daemon the kill fault killed again (the plain relaunch by default).
    """
    played = dict.fromkeys(part for name in kinds for part in (name, *_composed_of(name)))
    return CompositeNemesis(
        *(kind.build(locate, restarter) for kind in healing_order(played) if kind.build is not None)
    )
