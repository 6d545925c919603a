"""Fault schedules: seeded, lease-aware windows over a run (docs/design.md §7).

A schedule is a list of :class:`Window` (start, duration, kind, targets, parameters), generated
from a seed so that the same seed and inputs give the same schedule. Durations are multiples of the
lease TTL drawn from a table, by default 0.15 (shorter than a lease: harmless if the system is
right), 0.8 (just under it), 1.1 and 1.5 (just over it: the next holder has only begun when the
fault ends, the moment a store that saves its mark lazily has not saved it yet), 3 (the lease
lapses and someone else gets it) and 8 (far beyond: a whole new holder's tenure fits inside).
The base windows never overlap one another: after each one the system gets at least 1.25 TTL (up
to 2) to recover, the first starts after 1-2 TTL (someone must hold the lease), and the last ends
a TTL before the run does.

Overlaps. With a seeded rate (``overlap``, :data:`DEFAULT_OVERLAP`), a base window gets one
overlapping window of another kind among those asked for (an *overlay*, drawn from a random stream
of its own, so that the base windows of a seed are the same at every rate). Its parameter
:data:`OVERLAPS` names the base window; :data:`ANCHOR` says which moment of it the overlay is aimed
at (:data:`ANCHORS`): ``inside`` (a drawn offset, 10-90 % of the base), ``grant`` and ``takeover``
(for a base aimed at the holder: once another node holds the lease, having had
:data:`START_AFTER_WRITES` writes accepted since its grant, 0 or 1; at the overlay's scheduled
start at the latest) and ``restart`` (for a base whose stop restarts a daemon, as that stop begins,
so the restart happens inside the overlay). An overlay of a kind that restarts a daemon on a holder
base is aimed at the ``takeover`` three times in four (else ``inside``), and there at the daemon
that holds the state (a store or the lock leader among the targets asked for, else one of each the
cluster has) and resumes its base (:data:`RESUMES_BASE`): the restart then meets a stale holder,
the shape a daemon that forgets on restart needs (``store-forgets``); drawn from the targets like
any other overlay, it hit a worker half the time and let the other holders re-teach the store half
the rest. An overlay ends its duration after it actually started, at most half a TTL after its
base's scheduled end. Two kinds overlapping on one node compose unless
:func:`nemeses.kinds.conflict` says why not; then, if their nodes could be the same, the overlay is
refused at draw time and the reason kept in :attr:`Schedule.refused` (a symbolic target steers
clear of a node a conflicting fault holds when the window starts, so refusal is needed only when no
node could be left).

A compound kind (``restart-while-paused``: a store or lock-service restart inside a holder's
pause) is played by this same mechanism: its drawn window becomes the windows of its parts
(:attr:`nemeses.kinds.FaultKind.composed`), a base and an overlay aimed at the moment the
compound exists for, both marked with :data:`COMPOUND`; so does a kind's shape that is one (a
power loss aimed at a holder). A schedule recorded before a kind was composed is composed the
same way when it is played again (:func:`playable`).

A target may be the symbolic ``"holder"``: whoever holds the lease when the window starts, asked
of the runner then (see :class:`nemeses.player.NemesisPlayer`), or, when nobody does, a worker drawn
from the seed at generation time (``fallback``). Likewise ``"lock-leader"``: the lock-service member
that leads when the window starts (for systems that can say), else a lock node drawn from the seed;
``"lock-follower"``: a member that does not lead then (the drawn lock node if it follows, else the
next follower by name); ``"holder-member"``: the member the holder's client talks to (for systems
that can say), else the drawn lock node; ``"waiter"``: a worker that is waiting for a lock when the
window starts (its acquire open, holding none), else a worker drawn from the seed. A
partition aimed at a follower cuts it from the other members only: its clients still reach it.
A group target, ``lock-majority`` or ``lock-all`` (:data:`~harness.record.schedule.GROUPS`), is
one window on that many of the role's nodes at once, drawn now (a rack or the whole cluster
losing power): only a kind whose entry lists the group takes it (``power-loss``), and a run
that asks for another kind with it is refused.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from harness.record.schedule import (
    DEFAULT_OVERLAP,
    DEFAULT_TTL_MULTIPLES,
    GROUPS,
    HOLDER,
    HOLDER_MEMBER,
    LOCK_FOLLOWER,
    LOCK_LEADER,
    SYMBOLIC_TARGETS,
    TOPOLOGIES,
    WAITER,
    Refusal,
    Schedule,
    ScheduleError,
    Window,
    group_of,
)
from nemeses.kinds import (
    ANCHOR,
    COMPOUND,
    END_AFTER_WRITES,
    OVERLAPS,
    RESUMES_BASE,
    STAND_IN,
    START_AFTER_WRITES,
    Draw,
    FaultKind,
    conflict,
)
from nemeses.protocol import Fault, NemesisError
from nemeses.registry import FAULT_KINDS, fault_kind
from nemeses.throttle import DEFAULT_CPU

__all__ = [
    "AIM",
    "ANCHOR",
    "ANCHORS",
    "CALL_SHARE",
    "COMPOUND",
    "DEFAULT_OVERLAP",
    "DEFAULT_TTL_MULTIPLES",
    "END_AFTER_WRITES",
    "HOLDER",
    "HOLDER_MEMBER",
    "LOCK_FOLLOWER",
    "LOCK_LEADER",
    "OVERLAPS",
    "RELEASE_WITH",
    "RESUME",
    "RESUMES_BASE",
    "START_AFTER_WRITES",
    "WAITER",
    "Refusal",
    "Schedule",
    "ScheduleError",
    "Window",
    "generate_schedule",
    "playable",
    "resolve",
]

_WORKER_SYMBOLS: Final = (HOLDER, WAITER)
_MEMBER_SYMBOLS: Final = (LOCK_LEADER, LOCK_FOLLOWER, HOLDER_MEMBER)

ANCHORS: Final[tuple[str, ...]] = ("inside", "grant", "takeover", "restart")
"""The moments an overlay is aimed at (see the module documentation)."""
AIM: Final = "aim"
"""Holder-window parameter: ``"call"`` starts the fault inside one of the holder's write calls
(after its agent's work, before the reply), :data:`CALL_SHARE` of a typical call in; absent, the
fault starts inside the work before the send (the lease checked, the write still to come)."""
CALL_SHARE: Final = "call_share"
"""Holder-window parameter (with ``aim: call``): how far into the write call, 0-1 of a typical
call's length (the harness cannot see inside an adapter's client, so any point may split its
steps)."""
RESUME: Final = "resume"
"""Holder-window parameter: ``"in-flight"`` ends the fault only once another holder has a write
in flight (a quarter TTL at most past the scheduled end): the stale write meets the current one."""
RELEASE_WITH: Final = "release_with"
"""Overlay parameter: the index of the base window whose end also ends this one (two stale
holders released at once)."""
_RESUME_ON_RESTART: Final = 1 / 2
_INSTANT_RESTART_TTL: Final = 0.01
"""A ``resumes_base`` overlay's length, in TTLs: killed and started again at once."""
_CALL_AIMED: Final = 1 / 3
_RESUME_IN_FLIGHT: Final = 1 / 3
_RELEASE_TOGETHER: Final = 1 / 2
# A third of the holder windows aim inside the write call and a third resume on another's write:
# the other shapes (the pause inside the work, the resume whenever) still come in most windows.

_INSIDE_SHARE: Final = (0.1, 0.9)
_OVERLAY_TAIL_TTL: Final = 0.5
"""An overlay ends at most this many TTLs after its base's scheduled end (the next base window
starts at least 1.25 TTL after it: the system still gets time to recover)."""
_LATEST_TAKEOVER_TTL: Final = 1.5
"""A ``grant`` or ``takeover`` overlay starts this many TTLs into its base at the latest, or at
the base's end when that comes first (a paused holder's lease lapses up to a TTL in, and the next
is granted soon after: 0.9 of a 1.1 TTL pause, the bound this replaced, came before the takeover
in slow runs, and a store kill aimed at it then found nothing newer to forget)."""
_LEAD_IN_TTL: Final = (1.0, 2.0)
_GAP_TTL: Final = (1.25, 2.0)
_TAIL_TTL: Final = 1.0
_ROLES: Final = ("lock", "store", "worker")
_WORKER: Final = "worker"
_OUTLIVING: Final = frozenset(name for name in FAULT_KINDS if fault_kind(name).outlives_lease)


def generate_schedule(
    seed: int,
    nodes: Mapping[str, str],
    *,
    lease_ttl_ns: int,
    duration_ns: int,
    kinds: Sequence[str] = FAULT_KINDS,
    targets: Sequence[str] = (HOLDER,),
    ttl_multiples: Sequence[float] = DEFAULT_TTL_MULTIPLES,
    processes: Mapping[str, str] | None = None,
    cpu: float = DEFAULT_CPU,
    overlap: float = 0.0,
    records: Mapping[str, str] | None = None,
    topologies: Sequence[str] = TOPOLOGIES,
) -> Schedule:
    """Draw a schedule from ``seed``.

    ``nodes`` maps node name to role. ``targets`` are selectors, each drawn with equal chance:
    ``"holder"``, ``"lock-leader"``, a role (a node of it is drawn), a group target
    (``lock-all``: :data:`~harness.record.schedule.GROUPS`, for the kinds that take one), or a
    node name. ``processes`` maps a role to the daemon that pause and kill aim at on its nodes
    (absent: every daemon of the node). ``cpu`` is a throttled node's share of one CPU.
    ``overlap`` is the chance that a base window gets an overlay of another kind (module
    documentation). ``records`` maps a role to the symbolic target of the node that keeps its
    data of record, where the system names one (:class:`nemeses.kinds.Draw`). ``topologies``
    are the partition topologies a partition window is drawn among. Raises
    :class:`NemesisError` for inputs that cannot make a schedule.
    """
    _check_inputs(nodes, lease_ttl_ns, duration_ns, kinds, targets, ttl_multiples, topologies)
    if not 0.0 <= overlap <= 1.0:
        raise NemesisError(f"the overlap rate must be within 0 and 1, not {overlap:g}; e.g. 0.3")
    rng = random.Random(seed)
    refused: list[Refusal] = []
    windows: list[Window] = []
    ttl = lease_ttl_ns
    start = round(ttl * rng.uniform(*_LEAD_IN_TTL))
    last_end = duration_ns - round(ttl * _TAIL_TTL)
    # A stream of its own: the base windows of a seed are the same at every overlap rate.
    overlay_rng = random.Random(f"overlap-{seed}")
    records = dict(records or {})
    allowed_topologies = tuple(topologies)
    overlays = _Overlays(
        overlay_rng,
        nodes,
        processes or {},
        cpu,
        lease_ttl_ns,
        targets,
        ttl_multiples,
        last_end,
        records,
        allowed_topologies,
    )
    deck: list[str] = []
    # Counted as windows are added, not re-summed per window: a day-long run has ~60,000.
    played: Counter[str] = Counter()
    while True:
        fitting = [m for m in ttl_multiples if start + round(m * ttl) <= last_end]
        if not fitting:
            break
        if not deck:
            # Dealt from a shuffled deck, not drawn: every kind asked for is played once before
            # any is played twice, so a short run cannot miss the one that would have exposed it.
            deck = list(dict.fromkeys(kinds))
            rng.shuffle(deck)
        kind = fault_kind(deck.pop())
        longer = [m for m in fitting if m > 1]
        if kind.outlives_lease and longer:
            fitting = longer
        elif kind.outlives_lease and (brief := [k for k in kinds if k not in _OUTLIVING]):
            # Only lengths within the lease fit here, which such a shape would waste.
            kind = fault_kind(rng.choice(brief))
        multiple = rng.choice(fitting)
        selector = rng.choice(list(targets))
        target, role, fallback = _draw_target(rng, selector, nodes)
        duration = round(multiple * ttl)
        earlier = played[kind.name]
        chosen, params = kind.draw(
            Draw(
                rng,
                target,
                role,
                nodes,
                processes or {},
                cpu,
                duration,
                ttl,
                earlier,
                records,
                allowed_topologies,
            )
        )
        fallback = params.pop(STAND_IN, fallback)
        ordinal = played.total()
        aimed = _aimed(random.Random(f"aim-{seed}-{ordinal}"), kind, chosen, params)
        base = Window(len(windows), start, duration, kind.name, chosen, multiple, fallback, aimed)
        pair = _composed(base, len(windows) + 1, ttl)
        added = pair or (base,)
        windows.extend(added)
        for window in added:
            if OVERLAPS not in window.params:
                played[window.params.get(COMPOUND, window.kind)] += 1
        others = [
            name
            for name in dict.fromkeys(kinds)
            if name != kind.name and not fault_kind(name).parts
        ]
        # A compound is an overlap already: a third fault on it is left to a later base window.
        if others and pair is None and overlay_rng.random() < overlap:
            drawn = overlays.draw(base, fault_kind(overlay_rng.choice(others)), len(windows))
            if isinstance(drawn, Refusal):
                refused.append(drawn)
            else:
                aims = random.Random(f"aim-{seed}-{ordinal}-overlay")
                windows.append(
                    replace(
                        drawn,
                        params=_aimed(aims, fault_kind(drawn.kind), drawn.targets, drawn.params),
                    )
                )
        start = base.end_ns + round(ttl * rng.uniform(*_GAP_TTL))
    return Schedule(seed, lease_ttl_ns, duration_ns, tuple(windows), tuple(refused))


@dataclass(frozen=True, slots=True)
class _Overlays:
    """Draws the overlay of one base window (module documentation)."""

    rng: random.Random
    nodes: Mapping[str, str]
    processes: Mapping[str, str]
    cpu: float
    ttl: int
    targets: Sequence[str]
    ttl_multiples: Sequence[float]
    last_end_ns: int
    records: Mapping[str, str]
    topologies: tuple[str, ...]

    def draw(self, base: Window, kind: FaultKind, index: int) -> Window | Refusal:
        """The overlay of ``kind`` on ``base`` (window ``index``), or why it was refused."""
        rng, ttl = self.rng, self.ttl
        anchors = ["inside"]
        if base.wants_holder:
            anchors += ["grant", "takeover"]
        if fault_kind(base.kind).restarts:
            anchors.append("restart")
        if base.wants_holder and kind.restarts and not kind.parts:
            # A restart overlay on a holder window is aimed at the takeover three times in four:
            # the moment a forgetful daemon loses the new mark (module docs). Never at the grant:
            # no newer write has reached the daemon then, so forgetting loses nothing.
            anchors = ["inside", "takeover", "takeover", "takeover"]
        anchor = rng.choice(anchors)
        params: dict[str, Any] = {OVERLAPS: base.index, ANCHOR: anchor}
        if anchor == "inside":
            start = base.start_ns + round(base.duration_ns * rng.uniform(*_INSIDE_SHARE))
        elif anchor == "restart":
            start = base.end_ns
        else:
            latest = min(base.duration_ns, _LATEST_TAKEOVER_TTL * ttl)
            start = base.start_ns + round(latest)
            params[START_AFTER_WRITES] = 0 if anchor == "grant" else 1
        end = min(base.end_ns + round(_OVERLAY_TAIL_TTL * ttl), self.last_end_ns)
        room = max(end - start, 1)
        fitting = [m for m in self.ttl_multiples if round(m * ttl) <= room]
        if kind.outlives_lease and (longer := [m for m in fitting if m > 1]):
            fitting = longer
        multiple = rng.choice(fitting) if fitting else room / ttl
        duration = round(multiple * ttl)
        selector = rng.choice(list(self.targets))
        # A restart aimed at a holder's takeover is the shape a forgetful daemon needs (module
        # docs): it must hit the daemon that holds the state, never another worker, and the stale
        # holder must be continued once it serves again, or the other holders re-teach it.
        # (A compound places its own restart: its target is the holder it pauses.)
        at_restart = anchor in ("grant", "takeover") and kind.restarts
        stateful = self._stateful() if at_restart and not kind.parts else []
        if stateful:
            selector = rng.choice(stateful)
        target, role, fallback = _draw_target(rng, selector, self.nodes)
        draw = Draw(
            rng,
            target,
            role,
            self.nodes,
            self.processes,
            self.cpu,
            duration,
            ttl,
            0,
            self.records,
            self.topologies,
        )
        chosen, drawn = kind.draw(draw)
        fallback = drawn.pop(STAND_IN, fallback)
        if (
            anchor in ("grant", "takeover")
            and HOLDER in chosen
            and rng.random() < _RELEASE_TOGETHER
        ):
            params[RELEASE_WITH] = base.index
        if stateful or (at_restart and rng.random() < _RESUME_ON_RESTART):
            # Killed and restarted at once: an outage the other holders notice would have them
            # retry and re-teach a forgetful store its mark before the stale holder resumes.
            params[RESUMES_BASE] = True
            multiple = _INSTANT_RESTART_TTL
            duration = round(multiple * ttl)
        overlay = Window(
            index, start, duration, kind.name, chosen, multiple, fallback, {**drawn, **params}
        )
        if _composed(overlay, index + 1, ttl) is not None:
            why = f"{kind.name} aimed at the holder is a pair of its own, not an overlay"
            return Refusal(base.index, kind.name, chosen, why)
        reason = composition_problem(base, overlay, self.nodes)
        if reason is not None:
            return Refusal(base.index, kind.name, chosen, reason)
        return overlay

    def _stateful(self) -> list[str]:
        """The selectors that aim at a daemon holding state (a store, the lock leader): those
        asked for, else one per such role the cluster has (empty for a workers-only cluster)."""
        asked = [
            t
            for t in dict.fromkeys(self.targets)
            if t in ("store", "lock", LOCK_LEADER) or self.nodes.get(t) in ("store", "lock")
        ]
        if asked:
            return asked
        roles = set(self.nodes.values())
        return [s for s, role in ((LOCK_LEADER, "lock"), ("store", "store")) if role in roles]


def _composed(window: Window, index: int, ttl_ns: int) -> tuple[Window, ...] | None:
    """The windows that play ``window`` when its kind is played as others
    (:attr:`nemeses.kinds.FaultKind.composed`), the second numbered ``index``; else ``None``."""
    composed = fault_kind(window.kind).composed
    return None if composed is None else composed.play(window, index, ttl_ns)


def playable(schedule: Schedule) -> Schedule:
    """``schedule`` with every window of a kind that is played as others composed (a schedule
    recorded before its kind was: one ``restart-while-paused`` window becomes its pause and its
    kill), each new window right after the one it overlaps and numbered after every recorded
    one, so the recorded windows keep their indices."""
    windows: list[Window] = []
    free = max((w.index for w in schedule.windows), default=-1) + 1
    for window in schedule.windows:
        pair = _composed(window, free, schedule.lease_ttl_ns)
        if pair is None:
            windows.append(window)
            continue
        windows.extend(pair)
        free += len(pair) - 1
    return replace(schedule, windows=tuple(windows))


def _aimed(
    rng: random.Random, kind: FaultKind, targets: tuple[str, ...], params: Mapping[str, Any]
) -> dict[str, Any]:
    """``params`` with where a holder window's fault lands in a write and when it ends (module
    docs: :data:`AIM`, :data:`RESUME`), drawn from ``rng``; unchanged for other windows."""
    aimed = dict(params)
    if HOLDER not in targets:
        return aimed
    if rng.random() < _CALL_AIMED:
        aimed.update({AIM: "call", CALL_SHARE: round(rng.random(), 3)})
    # A compound or a window ending at a takeover times its own end.
    timed = kind.parts or END_AFTER_WRITES in params or RELEASE_WITH in params
    if rng.random() < _RESUME_IN_FLIGHT and not timed:
        aimed[RESUME] = "in-flight"
    return aimed


def composition_problem(first: Window, second: Window, nodes: Mapping[str, str]) -> str | None:
    """Why ``first`` and ``second`` cannot be in force together on ``nodes``, or ``None``.

    ``first`` starts first. Kinds that compose (:func:`nemeses.kinds.conflict`) always may;
    others may when no node can be both's: ``first``'s symbols cannot land on ``second``'s named
    nodes, and ``second``'s symbols have a node of their role left (the player steers them clear
    of the nodes conflicting faults hold when they start)."""
    kinds = fault_kind(first.kind), fault_kind(second.kind)
    why = conflict(*kinds)
    if why is None:
        return None
    fixed = [
        _fixed_nodes(window, kind, nodes)
        for window, kind in zip((first, second), kinds, strict=True)
    ]
    shared = sorted(fixed[0] & fixed[1])
    if shared:
        return f"both would be on {', '.join(shared)}: {why}"
    # The earlier window resolves its symbols first, so only the later one can steer clear.
    for target in first.targets:
        role = _role_of(target)
        met = sorted(name for name in fixed[1] if nodes.get(name) == role)
        if role is not None and met:
            return f"the {target} of window {first.index} could be {', '.join(met)}: {why}"
    for target in second.targets:
        role = _role_of(target)
        if role is None:
            continue
        left = [name for name in _of_role(nodes, role) if name not in fixed[0]]
        taken = sum(1 for t in first.targets if _role_of(t) == role)
        if len(left) <= taken:
            return (
                f"no {role} node would be left for the {target} ({len(left)} free, "
                f"{taken} taken by window {first.index}'s symbols): {why}"
            )
    return None


def _role_of(target: str) -> str | None:
    """The role a symbolic target stands for, or ``None`` for a node name."""
    if target == HOLDER:
        return _WORKER
    return "lock" if target in _MEMBER_SYMBOLS else None


def _fixed_nodes(window: Window, kind: FaultKind, nodes: Mapping[str, str]) -> set[str]:
    """The nodes ``window`` holds whatever its symbols turn out to be (all, cluster-wide)."""
    if kind.cluster_wide:
        return set(nodes)
    named = {target for target in window.targets if target not in SYMBOLIC_TARGETS}
    return named | set(kind.touched(window.params))


def resolve(
    window: Window,
    nodes: Sequence[str],
    holder: str | None,
    leader: str | None = None,
    *,
    follower: str | None = None,
    member: str | None = None,
    waiter: str | None = None,
) -> Fault:
    """The concrete fault of ``window``: the holder (``holder``), the lock leader (``leader``),
    a follower (``follower``), the holder's member (``member``) or a waiting worker (``waiter``)
    substituted, or the window's
    fallback when ``None``, a partition's drops worked out among ``nodes`` (peers that turned out
    to be a target are left out: a follower is cut from the other members)."""
    targets = window.targets
    actuals = (
        (HOLDER, holder),
        (LOCK_LEADER, leader),
        (LOCK_FOLLOWER, follower),
        (HOLDER_MEMBER, member),
        (WAITER, waiter),
    )
    for symbol, actual in actuals:
        if symbol not in targets:
            continue
        stand_in = actual or window.fallback
        if stand_in is None:
            raise NemesisError(
                f"window {window.index} targets the {symbol}, there is none, and the "
                "window has no fallback node"
            )
        targets = tuple(dict.fromkeys(stand_in if t == symbol else t for t in targets))
    make = fault_kind(window.kind).fault
    if make is None:
        return Fault(window.kind, targets, dict(window.params))
    return make(targets, window.params, nodes)


def _check_inputs(
    nodes: Mapping[str, str],
    lease_ttl_ns: int,
    duration_ns: int,
    kinds: Sequence[str],
    targets: Sequence[str],
    ttl_multiples: Sequence[float],
    topologies: Sequence[str],
) -> None:
    if lease_ttl_ns <= 0 or duration_ns <= 0:
        raise NemesisError("the lease TTL and the run's duration must be positive")
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown or not kinds:
        raise NemesisError(
            f"unknown fault kind(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(FAULT_KINDS)}"
        )
    unknown_shapes = sorted(set(topologies) - set(TOPOLOGIES))
    if unknown_shapes or not topologies:
        what = f"unknown partition topology {', '.join(unknown_shapes)}" if topologies else ""
        raise NemesisError(
            f"{what or 'give at least one partition topology'}; choose from "
            f"{', '.join(TOPOLOGIES)}, e.g. --partitions lock-cut"
        )
    if not ttl_multiples or min(ttl_multiples) <= 0:
        raise NemesisError("TTL multiples must be positive numbers, e.g. 0.15 0.8 3 8")
    if not targets:
        raise NemesisError("give at least one target: holder, a role or a node name")
    for selector in targets:
        grouped = group_of(selector)
        if grouped is not None:
            _check_group(selector, *grouped, nodes, kinds)
            continue
        if selector not in (*SYMBOLIC_TARGETS, *_ROLES) and selector not in nodes:
            raise NemesisError(
                f"unknown target {selector!r}; use {', '.join(SYMBOLIC_TARGETS)}, a role "
                f"({', '.join(_ROLES)}), a group (lock-{', lock-'.join(GROUPS)}) or a node "
                f"({', '.join(nodes)})"
            )
        if selector in _ROLES and selector not in nodes.values():
            raise NemesisError(f"target role {selector!r} has no node in this cluster")
    needs_worker = (HOLDER, HOLDER_MEMBER, WAITER)
    if any(symbol in targets for symbol in needs_worker) and _WORKER not in nodes.values():
        raise NemesisError(
            "the holder, holder-member and waiter targets need at least one worker node"
        )
    for symbol in _MEMBER_SYMBOLS:
        if symbol in targets and "lock" not in nodes.values():
            raise NemesisError(f"the {symbol} target needs at least one lock node")
    if LOCK_FOLLOWER in targets and len(_of_role(nodes, "lock")) < 2:
        raise NemesisError("the lock-follower target needs at least two lock nodes")


def _check_group(
    selector: str, role: str, group: str, nodes: Mapping[str, str], kinds: Sequence[str]
) -> None:
    """Refuse the group target ``selector`` where its role has no node or a kind of the run does
    not take the group (its window would have nothing to aim at)."""
    if role not in nodes.values():
        raise NemesisError(f"target {selector!r}: this cluster has no {role} node")
    others = [name for name in dict.fromkeys(kinds) if group not in fault_kind(name).groups]
    if others:
        takers = [name for name in FAULT_KINDS if group in fault_kind(name).groups]
        raise NemesisError(
            f"target {selector!r} aims one window at {GROUPS[group]} {role} nodes at once, "
            f"which only {', '.join(takers)} can; drop {', '.join(others)} from --nemesis or "
            f"aim at {role} instead"
        )


def _draw_target(
    rng: random.Random, selector: str, nodes: Mapping[str, str]
) -> tuple[str, str, str | None]:
    """The drawn target, its role, and (for a symbol) the seeded fallback node; a group target
    stays itself (its kind's draw picks the nodes)."""
    if (grouped := group_of(selector)) is not None:
        return selector, grouped[0], None
    if selector in _WORKER_SYMBOLS:
        return selector, _WORKER, rng.choice(_of_role(nodes, _WORKER))
    if selector in _MEMBER_SYMBOLS:
        return selector, "lock", rng.choice(_of_role(nodes, "lock"))
    if selector in _ROLES:
        node = rng.choice(_of_role(nodes, selector))
        return node, selector, None
    return selector, nodes[selector], None


def _of_role(nodes: Mapping[str, str], role: str) -> list[str]:
    return sorted(name for name, node_role in nodes.items() if node_role == role)
