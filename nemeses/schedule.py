"""Fault schedules: seeded, lease-aware windows over a run (docs/design.md §7).

A schedule is a list of :class:`Window` (start, duration, kind, targets, parameters), generated
from a seed so that the same seed and inputs give the same schedule. Durations are multiples of the
lease TTL drawn from a table, by default 0.15 (shorter than a lease: harmless if the system is
right), 0.8 (just under it), 1.1 and 1.5 (just over it: the next holder has only begun when the
fault ends, the moment a store that saves its mark lazily has not saved it yet), 3 (the lease
lapses and someone else gets it) and 8 (far beyond: a whole new holder's tenure fits inside).
Windows never overlap one another: after each one the system gets at least 1.25 TTL (up to 2) to
recover, the first starts after 1-2 TTL (someone must hold the lease), and the last ends a TTL
before the run does.

Faults that overlap live inside one window, as a compound kind whose parameters place its second
fault (``restart-while-paused``: a store or lock-service restart inside a holder's pause). Two
parameters, drawn by the kind and kept with the window so that a replay plays them again, tell
the player (:class:`nemeses.player.NemesisPlayer`) when: :data:`STEP_AT_NS`, the offset from the
window's start at which it performs the kind's middle step (``step-<kind>``), and
:data:`END_AFTER_WRITES`, which ends the window once another node took the lease over from the
window's targets and had that many writes accepted (at its scheduled end at the latest).

A target may be the symbolic ``"holder"``: whoever holds the lease when the window starts, asked
of the runner then (see :class:`nemeses.player.NemesisPlayer`), or, when nobody does, a worker drawn
from the seed at generation time (``fallback``). Likewise ``"lock-leader"``: the lock-service member
that leads when the window starts (for systems that can say), else a lock node drawn from the seed;
``"lock-follower"``: a member that does not lead then (the drawn lock node if it follows, else the
next follower by name); ``"holder-member"``: the member the holder's client talks to (for systems
that can say), else the drawn lock node; ``"waiter"``: a worker that is waiting for a lock when the
window starts (its acquire open, holding none), else a worker drawn from the seed. A
partition aimed at a follower cuts it from the other members only: its clients still reach it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from nemeses.kinds import END_AFTER_WRITES, LOCK_FOLLOWER, STEP_AT_NS, Draw
from nemeses.protocol import Fault, NemesisError
from nemeses.registry import FAULT_KINDS, fault_kind
from nemeses.throttle import DEFAULT_CPU
from nemeses.topology import partition_fault

__all__ = [
    "DEFAULT_TTL_MULTIPLES",
    "END_AFTER_WRITES",
    "HOLDER",
    "HOLDER_MEMBER",
    "LOCK_FOLLOWER",
    "LOCK_LEADER",
    "STEP_AT_NS",
    "WAITER",
    "Schedule",
    "Window",
    "generate_schedule",
    "resolve",
]

HOLDER: Final = "holder"
"""The symbolic target: whoever holds the lease when the window starts."""
LOCK_LEADER: Final = "lock-leader"
"""The symbolic target: the lock-service member that leads when the window starts."""
HOLDER_MEMBER: Final = "holder-member"
"""The symbolic target: the lock-service member the holder's client talks to."""
WAITER: Final = "waiter"
"""The symbolic target: a worker waiting for a lock when the window starts, holding none."""
_SYMBOLIC: Final = (HOLDER, LOCK_LEADER, LOCK_FOLLOWER, HOLDER_MEMBER, WAITER)
_WORKER_SYMBOLS: Final = (HOLDER, WAITER)
_MEMBER_SYMBOLS: Final = (LOCK_LEADER, LOCK_FOLLOWER, HOLDER_MEMBER)

DEFAULT_TTL_MULTIPLES: Final[tuple[float, ...]] = (0.15, 0.8, 1.1, 1.5, 3.0, 8.0)
"""Fault durations, as multiples of the lease TTL."""

_LEAD_IN_TTL: Final = (1.0, 2.0)
_GAP_TTL: Final = (1.25, 2.0)
_TAIL_TTL: Final = 1.0
_ROLES: Final = ("lock", "store", "worker")
_WORKER: Final = "worker"
_OUTLIVING: Final = frozenset(name for name in FAULT_KINDS if fault_kind(name).outlives_lease)


@dataclass(frozen=True, slots=True)
class Window:
    """One scheduled fault: from ``start_ns`` for ``duration_ns`` on the run clock.

    ``targets`` are node names, or contain a symbolic target (:data:`HOLDER`, :data:`LOCK_LEADER`,
    :data:`LOCK_FOLLOWER`, :data:`HOLDER_MEMBER`, :data:`WAITER`); ``fallback`` is the node that
    stands in for it when nobody holds the lease (or leads, waits, or the system cannot say).
    ``params`` are the fault's parameters (``process``, ``cpu``, ``topology``, ``peers``,
    ``direction``).
    """

    index: int
    start_ns: int
    duration_ns: int
    kind: str
    targets: tuple[str, ...]
    ttl_multiple: float
    fallback: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def end_ns(self) -> int:
        """When the fault is scheduled to end."""
        return self.start_ns + self.duration_ns

    @property
    def wants_holder(self) -> bool:
        """True when a target is the symbolic holder."""
        return HOLDER in self.targets

    @property
    def wants_leader(self) -> bool:
        """True when a target is the symbolic lock leader, or a follower (which is not it)."""
        return LOCK_LEADER in self.targets or LOCK_FOLLOWER in self.targets

    @property
    def wants_waiter(self) -> bool:
        """True when a target is a worker waiting for a lock."""
        return WAITER in self.targets

    @property
    def wants_member(self) -> bool:
        """True when a target is the member the holder's client talks to."""
        return HOLDER_MEMBER in self.targets

    @property
    def symbolic(self) -> bool:
        """True when a target is decided only when the window starts."""
        return any(symbol in self.targets for symbol in _SYMBOLIC)

    @property
    def wants_follower(self) -> bool:
        """True when a target is the symbolic lock follower."""
        return LOCK_FOLLOWER in self.targets

    def to_json(self) -> dict[str, Any]:
        """The window as JSON data."""
        return {
            "index": self.index,
            "start_ns": self.start_ns,
            "duration_ns": self.duration_ns,
            "kind": self.kind,
            "targets": list(self.targets),
            "ttl_multiple": self.ttl_multiple,
            "fallback": self.fallback,
            "params": dict(self.params),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Window:
        """Rebuild a window from :meth:`to_json` output."""
        try:
            return cls(
                index=int(data["index"]),
                start_ns=int(data["start_ns"]),
                duration_ns=int(data["duration_ns"]),
                kind=str(data["kind"]),
                targets=tuple(str(t) for t in data["targets"]),
                ttl_multiple=float(data["ttl_multiple"]),
                fallback=data.get("fallback"),
                params=dict(data.get("params") or {}),
            )
        except (KeyError, TypeError, ValueError) as problem:
            raise NemesisError(
                f"bad schedule window {data!r}: {problem}; windows come from Window.to_json"
            ) from None


@dataclass(frozen=True, slots=True)
class Schedule:
    """The windows of one run, with what they were generated from."""

    seed: int
    lease_ttl_ns: int
    duration_ns: int
    windows: tuple[Window, ...]

    def to_json(self) -> dict[str, Any]:
        """The schedule as JSON data (the runner writes it into the run's spec)."""
        return {
            "seed": self.seed,
            "lease_ttl_ns": self.lease_ttl_ns,
            "duration_ns": self.duration_ns,
            "windows": [window.to_json() for window in self.windows],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schedule:
        """Rebuild a schedule from :meth:`to_json` output."""
        try:
            return cls(
                seed=int(data["seed"]),
                lease_ttl_ns=int(data["lease_ttl_ns"]),
                duration_ns=int(data["duration_ns"]),
                windows=tuple(Window.from_json(w) for w in data["windows"]),
            )
        except (KeyError, TypeError, ValueError) as problem:
            raise NemesisError(
                f"bad schedule: {problem}; schedules come from Schedule.to_json"
            ) from None


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
) -> Schedule:
    """Draw a schedule from ``seed``.

    ``nodes`` maps node name to role. ``targets`` are selectors, each drawn with equal chance:
    ``"holder"``, ``"lock-leader"``, a role (a node of it is drawn), or a node name.
    ``processes`` maps a role to the daemon that pause and kill aim at on its nodes (absent: every
    daemon of the node). ``cpu`` is a throttled node's share of one CPU. Raises
    :class:`NemesisError` for inputs that cannot make a schedule.
    """
    _check_inputs(nodes, lease_ttl_ns, duration_ns, kinds, targets, ttl_multiples)
    rng = random.Random(seed)
    windows: list[Window] = []
    ttl = lease_ttl_ns
    start = round(ttl * rng.uniform(*_LEAD_IN_TTL))
    last_end = duration_ns - round(ttl * _TAIL_TTL)
    deck: list[str] = []
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
        earlier = sum(1 for window in windows if window.kind == kind.name)
        chosen, params = kind.draw(
            Draw(rng, target, role, nodes, processes or {}, cpu, duration, ttl, earlier)
        )
        windows.append(
            Window(len(windows), start, duration, kind.name, chosen, multiple, fallback, params)
        )
        start = windows[-1].end_ns + round(ttl * rng.uniform(*_GAP_TTL))
    return Schedule(seed, lease_ttl_ns, duration_ns, tuple(windows))


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
    if window.kind != "partition":
        return Fault(window.kind, targets, dict(window.params))
    params = window.params
    peers = [peer for peer in params.get("peers") or () if peer not in targets]
    return partition_fault(
        str(params.get("topology", "isolate")),
        targets,
        nodes,
        peers or None,
        inbound=params.get("direction") == "in",
    )


def _check_inputs(
    nodes: Mapping[str, str],
    lease_ttl_ns: int,
    duration_ns: int,
    kinds: Sequence[str],
    targets: Sequence[str],
    ttl_multiples: Sequence[float],
) -> None:
    if lease_ttl_ns <= 0 or duration_ns <= 0:
        raise NemesisError("the lease TTL and the run's duration must be positive")
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown or not kinds:
        raise NemesisError(
            f"unknown fault kind(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(FAULT_KINDS)}"
        )
    if not ttl_multiples or min(ttl_multiples) <= 0:
        raise NemesisError("TTL multiples must be positive numbers, e.g. 0.15 0.8 3 8")
    if not targets:
        raise NemesisError("give at least one target: holder, a role or a node name")
    for selector in targets:
        if selector not in (*_SYMBOLIC, *_ROLES) and selector not in nodes:
            raise NemesisError(
                f"unknown target {selector!r}; use {', '.join(_SYMBOLIC)}, a role "
                f"({', '.join(_ROLES)}) or a node ({', '.join(nodes)})"
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


def _draw_target(
    rng: random.Random, selector: str, nodes: Mapping[str, str]
) -> tuple[str, str, str | None]:
    """The drawn target, its role, and (for a symbol) the seeded fallback node."""
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
