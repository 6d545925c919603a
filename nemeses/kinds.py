"""What a fault kind is, as one registry entry (see :mod:`nemeses.registry`).

An entry holds everything the rest of fencecheck needs to know about one kind of fault: how to
build its nemesis, how a schedule draws a window's targets and parameters, how a heal that
remembers nothing undoes it, the verb its sentences use, its colour in the report, and its manual
command. The CLI help, ``fencecheck list``, the history's fault events, the explanations and the
report's colours are all derived from the entries, so a new kind is one module and one entry.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from harness.node import Node
from harness.record.schedule import LOCK_FOLLOWER
from nemeses.processes import Locator, ProcessImage, Restarter
from nemeses.protocol import Fault, Nemesis, NemesisError

__all__ = [
    "END_AFTER_WRITES",
    "LOCK_FOLLOWER",
    "STEP_AT_NS",
    "Draw",
    "FaultKind",
    "Leftovers",
    "ManualCommand",
    "ManualOption",
    "conflict",
    "node_names",
]


STEP_AT_NS: Final = "step_at_ns"
"""Window parameter: when (ns after the window's start) the player performs ``step-<kind>``; a
step at or past the window's end is not performed (the kind's stop does its work then)."""
END_AFTER_WRITES: Final = "end_after_writes"
"""Window parameter: end the window once a node other than its targets holds the lease and has
had this many writes accepted since its grant (a lease-aware end: "right after the takeover, while
the new holder has written only a few times"), at its scheduled end at the latest. Counted in
writes, not time: what a store loses on a restart is writes, and their pace depends on the run."""


@dataclass(frozen=True, slots=True)
class Draw:
    """What a schedule knows when it draws one window's targets and parameters.

    ``target`` is a node name or the symbolic holder; ``role`` is its role; ``nodes`` maps every
    node to its role; ``processes`` maps a role to the daemon that process faults aim at there;
    ``duration_ns`` is the window's length and ``ttl_ns`` the lease TTL (for kinds that place a
    second fault inside the window); ``earlier`` counts the windows of the same kind drawn before
    this one (a kind may make its first one the shape it exists for).
    """

    rng: random.Random
    target: str
    role: str
    nodes: Mapping[str, str]
    processes: Mapping[str, str]
    cpu: float
    duration_ns: int = 0
    ttl_ns: int = 0
    earlier: int = 0

    def of_role(self, role: str) -> list[str]:
        """The nodes of ``role``, sorted."""
        return sorted(name for name, node_role in self.nodes.items() if node_role == role)


@dataclass(frozen=True, slots=True)
class Leftovers:
    """What a heal that did not apply the faults is told about one node."""

    frozen: bool = False
    killed: Sequence[ProcessImage] = ()


@dataclass(frozen=True, slots=True)
class ManualOption:
    """One option of a manual fault command (``fencecheck nemesis KIND``).

    ``kind``: ``text`` (a string, e.g. node names), ``cpu`` (a share of a CPU), or ``flag``.
    """

    name: str
    help: str
    kind: Literal["text", "cpu", "flag"] = "text"
    default: Any = None


@dataclass(frozen=True, slots=True)
class ManualCommand:
    """The manual command of a fault kind: its arguments and how they become a :class:`Fault`.

    ``takes_nodes``: the command takes node names as arguments. ``fault`` gets those names
    (checked), the options' values by name, and every node's role.
    """

    help: str
    fault: Callable[[tuple[str, ...], Mapping[str, Any], Mapping[str, str]], Fault]
    options: tuple[ManualOption, ...] = ()
    takes_nodes: bool = True
    examples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FaultKind:
    """One kind of fault (docs/design.md §7), with everything derived tables need.

    ``heal_rank``: kinds heal in ascending rank (a frozen node runs no commands, so thaw first;
    restarting a daemon needs a node that runs commands, so restart last). ``outlives_lease``: the
    schedule prefers durations longer than the lease (the shape means nothing otherwise).
    ``recover`` undoes the kind on one node without knowing what was applied (``None``: another
    kind's recovery covers it). ``build`` gets how to find the daemons a fault aims at and how
    to start a killed one again (a run passes the system's own restart where it has one).
    """

    name: str
    summary: str
    verb: str
    colour: str
    heal_rank: int
    build: Callable[[Locator, Restarter], Nemesis]
    draw: Callable[[Draw], tuple[tuple[str, ...], dict[str, Any]]]
    recover: Callable[[Node, Leftovers], object] | None = None
    manual: ManualCommand | None = None
    outlives_lease: bool = False
    parts: tuple[str, ...] = field(default=())
    """For a compound kind, the kinds it is made of, in order (their verbs tell its story)."""
    holds: str = "processes"
    """What the fault takes hold of on a node it targets (``processes``, ``cpu``, ``network``,
    ``clock``...): two overlapping faults on one node compose unless they hold the same thing
    (see :func:`conflict`)."""
    blocks_commands: bool = False
    """The faulted node runs no commands while the fault is in force (a frozen cgroup): no other
    fault can start or stop there meanwhile."""
    cluster_wide: bool = False
    """The fault holds its resource on every node, not only its targets (one partition at a
    time replaces the whole cluster's rules)."""
    restarts: bool = False
    """The fault's stop starts a daemon again: an overlap can be aimed at that restart."""
    touched: Callable[[Mapping[str, Any]], tuple[str, ...]] = field(default=lambda params: ())
    """The nodes a window's parameters name besides its targets (a compound's restarted node)."""


def conflict(first: FaultKind, second: FaultKind) -> str | None:
    """Why ``first`` and ``second`` cannot be in force on one node at once, or ``None`` when
    they compose (a paused daemon on a throttled node, a throttled node whose clock steps)."""
    if first.holds == second.holds:
        return (
            f"{first.name} and {second.name} both take hold of a node's {first.holds}, so one "
            "would undo or hide the other"
        )
    for blocking, other in ((first, second), (second, first)):
        if blocking.blocks_commands:
            return (
                f"{blocking.name} leaves the node running no commands, which {other.name} "
                "needs to start and stop"
            )
    return None


def node_names(text: str | None, nodes: Mapping[str, str]) -> tuple[str, ...]:
    """Node names from a comma-separated option value; an unknown name is an error."""
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    unknown = [name for name in names if name not in nodes]
    if unknown:
        raise NemesisError(
            f"no node {', '.join(unknown)} in this cluster; its nodes: {', '.join(nodes)}"
        )
    return tuple(dict.fromkeys(names))
