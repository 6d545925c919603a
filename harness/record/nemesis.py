"""The nemesis event: what the fault player records of one fault window, as a type.

A nemesis event is a history event of process ``nemesis`` (docs/design.md §4). Its ``f`` is
``start-<kind>`` once a fault is confirmed in force, ``stop-<kind>`` once it is confirmed undone,
``step-<kind>`` for a compound's middle step (histories recorded before compounds were played as
pairs of windows), or any other word for an instant. Its ``value`` is
written by one writer, :meth:`NemesisEvent.to_json` (called by the player, ``nemeses/player.py``),
and read by one reader, :meth:`NemesisEvent.of` / :meth:`NemesisEvent.from_json`, which names the
field at fault. Readers (checkers, coverage, the report, replay) use its attributes.

The kind's facts (:class:`NemesisFacts`) travel in the event, so that readers below the nemeses
never test a kind's name: whether it stops a holder, moves a clock, restarts a daemon, and the
kinds a compound is made of. Histories written before the facts were recorded (2026-12-02 and
earlier) get the facts of the kinds of that time from :data:`_FACTS_BEFORE_RECORDING`, a frozen
table that never grows: every kind added since records its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from harness.record.events import NEMESIS, SAID, Event, HistoryError

__all__ = ["FACTS", "RESTARTED", "NemesisEvent", "NemesisFacts", "PowerLoss"]

FACTS: Final = "facts"
"""A nemesis event's field: the kind's facts (:class:`NemesisFacts`), as a JSON object."""
RESTARTED: Final = "restarted"
"""A stop event's field: the nodes whose daemons the fault's stop started again."""

_TARGET_FIELDS: Final = ("targets", "nodes", "target", "node")
_TARGETS_FIX: Final = (
    'targets are node names: "w1", ["w1", "w2"], or groups of a partition [["w1"], ["w2", "l1"]]'
)
# The fields this module types; everything else a window records (its fault's parameters and
# the facts observed, such as ``pids`` or ``drops``) stays in ``params`` as written.
_TYPED: Final = frozenset(
    (
        "id",
        "targets",
        "applied",
        "error",
        "verb",
        "part_verbs",
        "scheduled",
        "confirmed",
        "interrupted",
        "ttl_multiple",
        "holder",
        "mid_write",
        SAID,
        FACTS,
        RESTARTED,
        "step_scheduled",
        "step_confirmed",
        "by_s",
        "rate",
        "lost",
    )
)


@dataclass(frozen=True, slots=True)
class NemesisFacts:
    """What a fault kind is, as its registry entry says (``nemeses.kinds.FaultKind``)."""

    stops_holder: bool = False
    """A fault on a holder keeps it from renewing its lease (a pause, freeze, throttle, cut)."""
    moves_clock: bool = False
    """The fault moves a clock (``by_s``, ``rate``) and stops nobody."""
    restarts: bool = False
    """The fault's stop starts a daemon again (the nodes: :attr:`NemesisEvent.restarted`)."""
    parts: tuple[str, ...] = ()
    """For a compound kind, the kinds it is made of, in order."""

    def to_json(self) -> dict[str, Any]:
        """The facts as the event's ``facts`` object."""
        return {
            "stops_holder": self.stops_holder,
            "moves_clock": self.moves_clock,
            "restarts": self.restarts,
            "parts": list(self.parts),
        }

    @classmethod
    def from_json(cls, raw: Any, line: int) -> NemesisFacts:
        """The facts of a ``facts`` object, or :class:`HistoryError` naming the field."""
        if not isinstance(raw, dict):
            raise HistoryError(line, "a nemesis event's facts must be a JSON object")
        flags = {}
        for name in ("stops_holder", "moves_clock", "restarts"):
            flag = raw.get(name, False)
            if not isinstance(flag, bool):
                raise HistoryError(line, f"a nemesis event's facts.{name} must be true or false")
            flags[name] = flag
        parts = raw.get("parts", [])
        if not (isinstance(parts, list) and all(isinstance(p, str) for p in parts)):
            raise HistoryError(line, "a nemesis event's facts.parts must be a list of kinds")
        return cls(**flags, parts=tuple(parts))


_FACTS_BEFORE_RECORDING: Final[Mapping[str, NemesisFacts]] = {
    "pause": NemesisFacts(stops_holder=True),
    "freeze": NemesisFacts(stops_holder=True),
    "throttle": NemesisFacts(stops_holder=True),
    "partition": NemesisFacts(stops_holder=True),
    "kill": NemesisFacts(restarts=True),
    "restart-while-paused": NemesisFacts(stops_holder=True, restarts=True, parts=("pause", "kill")),
    "clock-step": NemesisFacts(moves_clock=True),
    "clock-rate": NemesisFacts(moves_clock=True),
    "power-loss": NemesisFacts(restarts=True),
}
"""The facts of the kinds whose histories were written before events recorded them (format 1
of 2026-12-02): frozen, it never grows; a kind not in it recorded its facts from the start."""


@dataclass(frozen=True, slots=True)
class PowerLoss:
    """What a power loss dropped, by the lazy file system's own count (the event's ``lost``)."""

    writes: int = 0
    bytes: int = 0
    files: int = 0
    entry_changes: int = 0

    def to_json(self) -> dict[str, int]:
        """The counts as the event's ``lost`` object."""
        return {
            "writes": self.writes,
            "bytes": self.bytes,
            "files": self.files,
            "entry_changes": self.entry_changes,
        }

    @classmethod
    def from_json(cls, raw: Any, line: int) -> PowerLoss:
        """The counts of a ``lost`` object (a count that is not a natural number counts 0)."""
        if not isinstance(raw, dict):
            raise HistoryError(line, "a nemesis event's lost must be a JSON object of counts")
        return cls(*(_count(raw.get(k)) for k in ("writes", "bytes", "files", "entry_changes")))


@dataclass(frozen=True, slots=True)
class NemesisEvent:
    """One nemesis event's value, typed (see the module documentation).

    ``window`` is the schedule's window index (``id``; ``None`` for a hand-written event with no
    usable one), ``targets`` the node names it hit (a partition's groups flattened),
    ``scheduled`` and ``confirmed`` run-clock nanoseconds, ``restarted`` the nodes a stop started
    again (for a kind that :attr:`NemesisFacts.restarts`), ``by_s`` and ``rate`` a clock fault's
    step and rate, ``lost`` what a power loss dropped. ``params`` keeps every other field as
    written: the fault's parameters and the facts observed (``pids``, ``restart``, ``drops``…).
    """

    f: str
    window: int | str | None = None
    targets: tuple[str, ...] = ()
    applied: bool = True
    error: str | None = None
    facts: NemesisFacts = field(default_factory=NemesisFacts)
    verb: str | None = None
    part_verbs: tuple[str, ...] = ()
    scheduled: int | None = None
    confirmed: int | None = None
    interrupted: bool = False
    ttl_multiple: float | None = None
    holder: str | None = None
    mid_write: bool | None = None
    said: str | None = None
    restarted: tuple[str, ...] = ()
    step_scheduled: int | None = None
    step_confirmed: int | None = None
    by_s: float | None = None
    rate: float | None = None
    lost: PowerLoss | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def action(self) -> str:
        """``start``, ``stop`` or ``step`` for a window's event; the whole ``f`` otherwise."""
        action, _, kind = self.f.partition("-")
        return action if kind and action in ("start", "stop", "step") else self.f

    @property
    def process(self) -> str | None:
        """The daemon a fault aimed at (its ``process`` parameter; ``None``: every daemon of
        its targets). Read from :attr:`params`, where the fault's parameters stay as written."""
        process = self.params.get("process")
        return process if isinstance(process, str) else None

    @property
    def kind(self) -> str:
        """The fault kind of a window's event (``pause`` of ``start-pause``); ``""`` else."""
        action, _, kind = self.f.partition("-")
        return kind if action in ("start", "stop", "step") else ""

    def to_json(self) -> dict[str, Any]:
        """The event's ``value``: the one writer of the nemesis event's JSON form."""
        out: dict[str, Any] = {}
        if self.window is not None:
            out["id"] = self.window
        out["targets"] = list(self.targets)
        out.update(self.params)
        if self.ttl_multiple is not None:
            out["ttl_multiple"] = self.ttl_multiple
        if self.verb is not None:
            out["verb"] = self.verb
        if self.part_verbs:
            out["part_verbs"] = list(self.part_verbs)
        out[FACTS] = self.facts.to_json()
        for name in ("holder", "mid_write", "by_s", "rate", "step_scheduled", "step_confirmed"):
            if (value := getattr(self, name)) is not None:
                out[name] = value
        if self.said is not None:
            out[SAID] = self.said
        if self.lost is not None:
            out["lost"] = self.lost.to_json()
        if self.restarted:
            out[RESTARTED] = list(self.restarted)
        if self.scheduled is not None:
            out["scheduled"] = self.scheduled
        if self.applied:
            if self.confirmed is not None:
                out["confirmed"] = self.confirmed
            out["applied"] = True
        else:
            out["applied"] = False
            out["error"] = self.error or "not applied"
        if self.interrupted:
            out["interrupted"] = True
        return out

    @classmethod
    def of(cls, event: Event) -> NemesisEvent:
        """The nemesis event ``event`` is (its ``f`` and ``value``); :class:`HistoryError`
        naming the line and the field when it is not one."""
        if event.process != NEMESIS:
            raise HistoryError(event.line, f"event {event.index} is not a nemesis event")
        return cls.from_json(event.f, event.value, event.line)

    @classmethod
    def from_json(cls, f: str, value: Mapping[str, Any], line: int = 0) -> NemesisEvent:
        """The one reader of a nemesis event's ``value``; :class:`HistoryError` names the field
        at fault. Fields a hand-written history may leave out get their neutral value."""
        raw_id = value.get("id")
        window = raw_id if isinstance(raw_id, int | str) and not isinstance(raw_id, bool) else None
        error = value.get("error")
        if error is not None and not isinstance(error, str):
            error = str(error)
        kind = f.partition("-")[2]
        raw_facts = value.get(FACTS)
        if raw_facts is None:
            facts = _FACTS_BEFORE_RECORDING.get(kind, NemesisFacts())
        else:
            facts = NemesisFacts.from_json(raw_facts, line)
        targets = _targets(value, line)
        action = f.partition("-")[0]
        restarted = value.get(RESTARTED)
        if restarted is not None:
            named = _flatten(restarted, line, RESTARTED)
        elif raw_facts is not None or not facts.restarts or action != "stop":
            named = ()  # a player that records facts names what it restarted
        else:
            # Written before stops recorded ``restarted``: a compound (or a power loss at the
            # holder) named its restarted node ``restart``; any other kind restarted its targets.
            restart = value.get("restart")
            named = (restart,) if isinstance(restart, str) else targets
        verbs = _words(value.get("verb"))
        lost = value.get("lost")
        return cls(
            f=f,
            window=window,
            targets=targets,
            applied=value.get("applied") is not False and not error,
            error=error or None,
            facts=facts,
            verb=verbs[0] if verbs else None,
            part_verbs=_words(value.get("part_verbs")),
            scheduled=_natural(value, "scheduled", line),
            confirmed=_natural(value, "confirmed", line),
            interrupted=value.get("interrupted") is True,
            ttl_multiple=_number(value, "ttl_multiple", line),
            holder=_text(value, "holder", line),
            mid_write=_flag(value, "mid_write"),
            said=_said(value),
            restarted=named,
            step_scheduled=_natural(value, "step_scheduled", line),
            step_confirmed=_natural(value, "step_confirmed", line),
            by_s=_number(value, "by_s", line),
            rate=_number(value, "rate", line),
            lost=PowerLoss.from_json(lost, line) if lost is not None else None,
            params={k: v for k, v in value.items() if k not in _TYPED},
        )


def _said(value: Mapping[str, Any]) -> str | None:
    said = value.get(SAID)
    return said if isinstance(said, str) and said else None


def _words(raw: object) -> tuple[str, ...]:
    """A string or a list of strings; anything else is no words (a sentence goes without)."""
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return tuple(raw)
    return ()


def _natural(value: Mapping[str, Any], name: str, line: int) -> int | None:
    raw = value.get(name)
    if raw is None:
        return None
    if type(raw) is not int or raw < 0:
        raise HistoryError(
            line, f"a nemesis event's {name} must be an integer >= 0", "it is run-clock ns"
        )
    return raw


def _number(value: Mapping[str, Any], name: str, line: int) -> float | None:
    raw = value.get(name)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise HistoryError(line, f"a nemesis event's {name} must be a number")
    return float(raw)


def _text(value: Mapping[str, Any], name: str, line: int) -> str | None:
    raw = value.get(name)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise HistoryError(line, f"a nemesis event's {name} must be a string")
    return raw


def _flag(value: Mapping[str, Any], name: str) -> bool | None:
    raw = value.get(name)
    return raw if isinstance(raw, bool) else None


def _count(raw: Any) -> int:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0 else 0


def _targets(value: Mapping[str, Any], line: int) -> tuple[str, ...]:
    for name in _TARGET_FIELDS:
        raw = value.get(name)
        if raw is not None:
            return _flatten(raw, line, name)
    return ()


def _flatten(raw: object, line: int, name: str) -> tuple[str, ...]:
    # Partitions name groups ("halves": [["w1"], ["w2", "l1"]]); every node in them is a target.
    # Two levels at most: anything deeper is not a target list, and must not recurse.
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list):
        out: list[str] = []
        for item in raw:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, list) and all(isinstance(node, str) for node in item):
                out.extend(item)
            else:
                raise HistoryError(line, f"a nemesis event's {name} are malformed", _TARGETS_FIX)
        return tuple(out)
    raise HistoryError(line, f"a nemesis event's {name} are malformed", _TARGETS_FIX)
