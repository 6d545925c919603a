"""A run's fault schedule as data: :class:`Window`, :class:`Refusal` and :class:`Schedule`, and
their JSON form (the ``schedule`` of ``test.json``, a matrix row's fixed windows).

The drawing of a schedule from a seed, and what each window means to the player, stay in
:mod:`nemeses.schedule`; this module is only the record of it, so that the layers that read a
stored run (the report, replay, the matrix) need not import the fault kinds to read one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "DEFAULT_OVERLAP",
    "DEFAULT_TTL_MULTIPLES",
    "GROUPS",
    "HOLDER",
    "HOLDER_MEMBER",
    "LOCK_FOLLOWER",
    "LOCK_LEADER",
    "SYMBOLIC_TARGETS",
    "TOPOLOGIES",
    "WAITER",
    "Refusal",
    "Schedule",
    "ScheduleError",
    "Window",
    "group_of",
    "group_size",
]

HOLDER: Final = "holder"
"""The symbolic target: whoever holds the lease when the window starts."""
LOCK_LEADER: Final = "lock-leader"
"""The symbolic target: the lock-service member that leads when the window starts."""
LOCK_FOLLOWER: Final = "lock-follower"
"""The symbolic target: a lock-service member that does not lead when the window starts."""
HOLDER_MEMBER: Final = "holder-member"
"""The symbolic target: the lock-service member the holder's client talks to."""
WAITER: Final = "waiter"
"""The symbolic target: a worker waiting for a lock when the window starts, holding none."""
SYMBOLIC_TARGETS: Final = (HOLDER, LOCK_LEADER, LOCK_FOLLOWER, HOLDER_MEMBER, WAITER)
"""Every target that names a node only once its window starts."""
TOPOLOGIES: Final[tuple[str, ...]] = ("isolate", "halves", "bridge", "one-way", "lock-cut")
"""Every partition topology, by name (a partition window's ``topology``; ``--partitions`` picks
among them)."""
GROUPS: Final = {"majority": "a majority of the", "all": "every"}
"""Group targets, ``<role>-<group>`` (``lock-majority``, ``lock-all``): one window on that many
of the role's nodes at once, drawn when the schedule is (a correlated outage: a rack or the whole
cluster losing power). Only the kinds whose registry entry lists the group take one
(``nemeses.FaultKind.groups``); the words say how many, for messages."""
_GROUPED_ROLES: Final = ("lock", "store")


def group_of(selector: str) -> tuple[str, str] | None:
    """``("lock", "majority")`` for the group target ``lock-majority``; ``None`` for any other
    selector."""
    role, _, group = selector.rpartition("-")
    return (role, group) if role in _GROUPED_ROLES and group in GROUPS else None


def group_size(group: str, count: int) -> int:
    """How many of a role's ``count`` nodes the group ``group`` takes: a majority, or all."""
    return count // 2 + 1 if group == "majority" else count


DEFAULT_TTL_MULTIPLES: Final[tuple[float, ...]] = (0.15, 0.8, 1.1, 1.5, 3.0, 8.0)
"""Fault durations, as multiples of the lease TTL (the spec's ``fault_lengths`` default;
:mod:`nemeses.schedule` says why each)."""

DEFAULT_OVERLAP: Final = 0.3
"""The default share of base windows that get an overlapping window of another kind. About one
pair in a 30 s run of the default kinds (5-6 base windows) and four in a minute's, while most base
windows still stand alone: the base windows do not move with the rate, so every shape a run drew
before is still drawn, and the overlays only add pairs."""


class ScheduleError(ValueError):
    """Schedule data that is not what :meth:`Schedule.to_json` writes; the message names it."""


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
        return any(symbol in self.targets for symbol in SYMBOLIC_TARGETS)

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
        """Rebuild a window from :meth:`to_json` output; :class:`ScheduleError` names a bad one."""
        try:
            fallback = data.get("fallback")
            return cls(
                index=int(data["index"]),
                start_ns=int(data["start_ns"]),
                duration_ns=int(data["duration_ns"]),
                kind=str(data["kind"]),
                targets=tuple(str(t) for t in data["targets"]),
                ttl_multiple=float(data["ttl_multiple"]),
                fallback=None if fallback is None else str(fallback),
                params=dict(data.get("params") or {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as problem:
            raise ScheduleError(
                f"bad schedule window {data!r}: {problem}; windows come from Window.to_json"
            ) from None


@dataclass(frozen=True, slots=True)
class Refusal:
    """An overlay the schedule drew and refused: its kind and targets could not be in force
    together with window ``window``'s, for ``reason``."""

    window: int
    kind: str
    targets: tuple[str, ...]
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The refusal as JSON data."""
        return {
            "window": self.window,
            "kind": self.kind,
            "targets": list(self.targets),
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Refusal:
        """Rebuild a refusal from :meth:`to_json` output (``KeyError``/``TypeError`` if bad)."""
        return cls(
            int(data["window"]),
            str(data["kind"]),
            tuple(str(t) for t in data["targets"]),
            str(data["reason"]),
        )


@dataclass(frozen=True, slots=True)
class Schedule:
    """The windows of one run, with what they were generated from, and the overlays refused."""

    seed: int
    lease_ttl_ns: int
    duration_ns: int
    windows: tuple[Window, ...]
    refused: tuple[Refusal, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The schedule as JSON data (the runner writes it into the run's record)."""
        return {
            "seed": self.seed,
            "lease_ttl_ns": self.lease_ttl_ns,
            "duration_ns": self.duration_ns,
            "windows": [window.to_json() for window in self.windows],
            "refused": [refusal.to_json() for refusal in self.refused],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schedule:
        """Rebuild a schedule from :meth:`to_json` output; :class:`ScheduleError` names a bad
        one."""
        try:
            return cls(
                seed=int(data["seed"]),
                lease_ttl_ns=int(data["lease_ttl_ns"]),
                duration_ns=int(data["duration_ns"]),
                windows=tuple(Window.from_json(w) for w in data["windows"]),
                refused=tuple(Refusal.from_json(r) for r in data.get("refused") or ()),
            )
        except ScheduleError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as problem:
            raise ScheduleError(
                f"bad schedule: {problem}; schedules come from Schedule.to_json"
            ) from None
