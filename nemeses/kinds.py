"""What a fault kind is, as one registry entry (see :mod:`nemeses.registry`).

An entry holds everything the rest of fencecheck needs to know about one kind of fault: how to build
its nemesis, how a schedule draws a window's targets and parameters and how they become its fault,
how a heal that remembers nothing undoes it, the verb its sentences use, its colour in the report,
its manual command and what that leaves behind, and its facts: whether it stops a holder, moves a
clock, needs the lazy file system or the requests' framing, whose daemons it kills and which nodes
its stop restarted, its parts. The CLI help,
``fencecheck list``, the history's fault events (which carry the facts, :meth:`FaultKind.facts`),
the exposure and durability checks, coverage, the explanations, replay and the report's colours are
all derived from the entries, so a new kind is one module and one entry (docs/design.md §7).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from harness.node import Node
from harness.record import NemesisFacts
from harness.record.schedule import LOCK_FOLLOWER, TOPOLOGIES, Window
from nemeses.processes import Locator, ProcessImage, Restarter
from nemeses.protocol import Fault, Nemesis, NemesisError

__all__ = [
    "ANCHOR",
    "COMPOUND",
    "END_AFTER_WRITES",
    "LOCK_FOLLOWER",
    "OVERLAPS",
    "RESUMES_BASE",
    "STAND_IN",
    "START_AFTER_WRITES",
    "Composition",
    "Draw",
    "FaultKind",
    "Leftovers",
    "ManualCommand",
    "ManualOption",
    "conflict",
    "node_names",
]


END_AFTER_WRITES: Final = "end_after_writes"
"""Window parameter: end the window once a node other than its targets holds the lease and has
had this many writes accepted since its grant (a lease-aware end: "right after the takeover, while
the new holder has written only a few times"), at its scheduled end at the latest. Counted in
writes, not time: what a store loses on a restart is writes, and their pace depends on the run."""
STAND_IN: Final = "stand_in"
"""What a kind's draw may return among its parameters when it aims at a symbolic target it chose
itself (``lock-leader`` for the node of record): the node that stands in for that symbol when it
cannot be resolved at play time. The schedule takes it out of the parameters and makes it the
window's ``fallback``, which the one drawn for the window's own target (a worker, for the
holder) would otherwise be."""
OVERLAPS: Final = "overlaps"
"""Overlay parameter: the index of the base window it overlaps (:mod:`nemeses.schedule`)."""
ANCHOR: Final = "anchor"
"""Overlay parameter: the moment of the base window it is aimed at (``inside``, ``grant``,
``takeover``, ``restart``; :data:`nemeses.schedule.ANCHORS`)."""
START_AFTER_WRITES: Final = "start_after_writes"
"""Overlay parameter (``grant``, ``takeover``): start once another node than the base's targets
holds the lease and had this many writes accepted since its grant."""
RESUMES_BASE: Final = "resumes_base"
"""Overlay parameter (of a kind whose stop restarts a daemon, on a base aimed at the holder): the
base ends as soon as this overlay's stop is done, the daemon restarted and serving, so the stale
holder's write meets the restarted daemon before anyone else's does."""
COMPOUND: Final = "compound"
"""Window parameter: the kind a window plays a part of (:attr:`FaultKind.composed`), kept on both
windows of the pair so that histories, replays and reports say what the pair stands for."""


@dataclass(frozen=True, slots=True)
class Draw:
    """What a schedule knows when it draws one window's targets and parameters.

    ``target`` is a node name or the symbolic holder; ``role`` is its role; ``nodes`` maps every
    node to its role; ``processes`` maps a role to the daemon that process faults aim at there;
    ``duration_ns`` is the window's length and ``ttl_ns`` the lease TTL (for kinds that place a
    second fault inside the window); ``earlier`` counts the windows of the same kind drawn before
    this one (a kind may make its first one the shape it exists for); ``records`` maps a role to
    the symbolic target of the node that keeps its data of record, where the system names one
    (``systems.KeepsRecord``: Redis's primary, ``lock-leader``); ``topologies`` are the
    partition topologies the run allows (``--partitions``).
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
    records: Mapping[str, str] = field(default_factory=dict)
    topologies: tuple[str, ...] = TOPOLOGIES

    def of_role(self, role: str) -> list[str]:
        """The nodes of ``role``, sorted."""
        return sorted(name for name, node_role in self.nodes.items() if node_role == role)


@dataclass(frozen=True, slots=True)
class Composition:
    """How a kind's drawn window is played as overlapping windows of other kinds (a compound, or
    a shape of one such as a power loss aimed at a holder), by the general overlap mechanism of
    :mod:`nemeses.schedule` and :class:`nemeses.player.NemesisPlayer`.

    ``kinds``: the kinds the windows play (a run builds their nemeses). ``play`` gets the drawn
    window, the index its second window takes and the lease TTL, and returns the windows that play
    it (the first keeps its index), or ``None`` when this window plays as itself.
    """

    kinds: tuple[str, ...]
    play: Callable[[Window, int, int], tuple[Window, ...] | None]


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
    leaves_frozen: bool = False
    """Run without ``--for``, the command leaves its nodes frozen: the ledger remembers them so
    that a later ``heal`` thaws them (what it kills the nemesis reports itself)."""


@dataclass(frozen=True, slots=True)
class FaultKind:
    """One kind of fault (docs/design.md §7), with everything derived tables need.

    ``heal_rank``: kinds heal in ascending rank (a frozen node runs no commands, so thaw first;
    restarting a daemon needs a node that runs commands, so restart last). ``outlives_lease``: the
    schedule prefers durations longer than the lease (the shape means nothing otherwise).
    ``recover`` undoes the kind on one node without knowing what was applied (``None``: another
    kind's recovery covers it). ``build`` gets how to find the daemons a fault aims at and how
    to start a killed one again (a run passes the system's own restart where it has one);
    ``None`` for a kind only ever played as windows of others (:attr:`composed`).
    """

    name: str
    summary: str
    verb: str
    colour: str
    heal_rank: int
    build: Callable[[Locator, Restarter], Nemesis] | None
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
    stops_holder: bool = False
    """A fault on a holder keeps it from renewing its lease while it still means to write (a
    pause, a frozen cgroup, a starved CPU, a cut network; a compound made of a pause). A plain
    one (no :attr:`parts`) can stand in for another in a switch's exposure."""
    moves_clock: bool = False
    """The fault moves a clock (``by_s`` steps it, ``rate`` runs it fast or slow), stopping
    nobody: coverage asks whether it moved a held lease across its expiry."""
    kills: Literal["targets", "service"] | None = None
    """Whose daemons the fault kills and starts again: its ``targets``' or, whatever they are, a
    lock or store daemon's (``service``, a compound's restart). A system keeping that state in
    memory only is refused such faults."""
    restarted: Callable[[tuple[str, ...], Mapping[str, Any]], tuple[str, ...]] = field(
        default=lambda targets, params: targets
    )
    """For a kind that :attr:`restarts`: the nodes a window's stop started again, from its
    resolved targets and parameters (the player records them as ``restarted``)."""
    fault: Callable[[tuple[str, ...], Mapping[str, Any], Sequence[str]], Fault] | None = None
    """How a window's resolved targets and parameters become its fault, given every node's
    name (``None``: ``Fault(name, targets, params)``); a partition works out its drops here."""
    needs_disk: bool = False
    """The fault acts on the lazy file system under the daemons' data (a power loss, a full
    disk, a failing or slow fsync): a run with one mounts it (``SystemConfig.lazy_disks``), and
    a system that does not say where its data is (``systems.TakesDiskFaults``) is refused it."""
    needs_framing: bool = False
    """The fault sends a holder's request again, so the proxy must know where one ends: a
    system that does not say (``systems.FramesRequests``) is refused it."""
    pinnable: bool = True
    """A replay may aim a window at the very nodes it landed on; false for a kind whose fault
    is worked out from the symbolic targets (a partition's drops)."""
    composed: Composition | None = None
    """How a drawn window of this kind is played as overlapping windows of other kinds, when it
    is (``restart-while-paused``: a holder pause and a kill of the store inside it)."""
    groups: tuple[str, ...] = ()
    """The group targets it takes (``majority``, ``all``: :data:`harness.record.schedule.GROUPS`),
    aimed as ``lock-majority`` or ``lock-all``: one window on that many of a role's nodes at once
    (its draw picks them). A run whose targets include one and whose kinds include one without
    it is refused: that kind would have no node to aim at."""

    def facts(self) -> NemesisFacts:
        """What readers below the nemeses (checkers, the report) need to know of this kind: the
        player records it on each of its events (``facts``)."""
        return NemesisFacts(
            stops_holder=self.stops_holder,
            moves_clock=self.moves_clock,
            restarts=self.restarts,
            parts=self.parts,
        )


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
