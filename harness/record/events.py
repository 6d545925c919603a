"""History format v1: the event type and its JSON form.

The history is the contract between the runner and the checkers (docs/design.md §4). It is JSON
Lines, one event per line, written as the run goes so that a crash never loses what already
happened. A nemesis event's ``value`` has its own type and its one reader and writer:
:class:`harness.record.nemesis.NemesisEvent`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from harness.record.vocabulary import OPERATIONS

__all__ = [
    "EVENT_TYPES",
    "NEMESIS",
    "SAID",
    "Event",
    "EventType",
    "HistoryError",
    "Process",
    "event_from_dict",
    "event_to_dict",
    "optional_natural",
]

EventType = Literal["invoke", "ok", "fail", "info"]
Process = int | str
EVENT_TYPES: Final[frozenset[str]] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS: Final = "nemesis"
SAID: Final = "said"
"""A nemesis event's field: what happened at that moment in one sentence ("l1's clock jumped 3 s
forward"), for faults a verb cannot tell; explanations quote it with the event's time."""


class HistoryError(ValueError):
    """A history line that cannot be understood, with the line number (0: the file as a whole)
    and the fix."""

    def __init__(self, line: int, problem: str, fix: str = "") -> None:
        self.line = line
        self.problem = problem
        self.fix = fix
        message = f"history line {line}: {problem}" if line > 0 else f"history: {problem}"
        super().__init__(f"{message}. {fix}" if fix else message)


@dataclass(slots=True)
class Event:
    """One history event.

    ``value`` stays a mapping because its shape depends on ``f`` (workloads may add their own
    operations); the well-known keys are ``lock``, ``epoch``, ``sink``, ``key``, ``id``, ``prev``
    and ``entries``. ``node`` is the holder's identity: a new process number after an ``info`` is
    still the same holder.
    """

    index: int
    time: int
    process: Process
    type: EventType
    f: str
    value: dict[str, Any] = field(default_factory=dict)
    node: str | None = None
    error: str | None = None
    line: int = 0  # 1-based line in the source file, for messages; not serialised


def event_to_dict(event: Event) -> dict[str, Any]:
    """The JSON object for ``event``, with optional fields left out when empty."""
    out: dict[str, Any] = {
        "index": event.index,
        "time": event.time,
        "process": event.process,
    }
    if event.node is not None:
        out["node"] = event.node
    out["type"] = event.type
    out["f"] = event.f
    out["value"] = event.value
    if event.error is not None:
        out["error"] = event.error
    return out


def event_from_dict(raw: Any, line: int = 0) -> Event:
    """Build an :class:`Event` from a decoded JSON object, or raise :class:`HistoryError`."""
    if not isinstance(raw, dict):
        raise HistoryError(line, f"expected a JSON object, got {type(raw).__name__}")
    try:
        index = raw["index"]
        time = raw["time"]
        process = raw["process"]
        etype = raw["type"]
        f = raw["f"]
    except KeyError as missing:
        raise HistoryError(
            line,
            f"missing field {missing.args[0]!r}",
            "every event needs index, time, process, type and f (see docs/design.md §4)",
        ) from None
    if not (type(index) is int and type(time) is int and index >= 0 and time >= 0):
        raise HistoryError(
            line, "index and time must be integers >= 0", "time is in nanoseconds since the start"
        )
    if not isinstance(etype, str) or etype not in EVENT_TYPES:
        raise HistoryError(
            line, f"unknown type {_excerpt(etype)}", "type must be one of invoke, ok, fail, info"
        )
    if not isinstance(f, str):
        raise HistoryError(line, "f must be a string such as 'write' or 'acquire'")
    if process == NEMESIS:
        if etype != "info":
            raise HistoryError(line, f"a nemesis event must be typed info, not {etype!r}")
    elif not (type(process) is int and process >= 0):
        raise HistoryError(
            line, f"process must be an integer >= 0 or 'nemesis', got {_excerpt(process)}"
        )
    value = raw.get("value")
    if not isinstance(value, dict):
        if value is not None and process != NEMESIS and f in OPERATIONS:
            raise HistoryError(line, f"a {f}'s value must be a JSON object")
        # Another f's value (a register's 7, a nemesis's "start") holds nothing a checker
        # reads: the event is counted, its value ignored (docs/design.md §4).
        value = {}
    node = raw.get("node")
    if not (node is None or isinstance(node, str)):
        raise HistoryError(
            line, f"node must be a string, got {_excerpt(node)}", 'write it as "node": "w1"'
        )
    error = raw.get("error")
    return Event(
        index,
        time,
        process,
        cast(EventType, etype),
        f,
        value,
        node,
        error if isinstance(error, str) else None,
        line,
    )


def optional_natural(value: dict[str, Any], name: str, line: int, fix: str) -> int | None:
    """The optional field ``name`` of ``value`` (``seq``, ``grant_seq``, ``waited``...): ``None``
    when absent, else an integer ``>= 0``, or :class:`HistoryError` naming the line and ``fix``."""
    number = value.get(name)
    if number is None:
        return None
    if type(number) is not int or number < 0:
        raise HistoryError(line, f"{name} must be an integer >= 0", fix)
    return number


def _excerpt(item: object) -> str:
    # A malformed field may be arbitrarily large or nested: quote only its beginning.
    if isinstance(item, int) and item.bit_length() > 64:
        return "a very large integer"
    text = repr(item) if isinstance(item, str | int | float | bool) else type(item).__name__
    return text if len(text) <= 40 else text[:37] + "..."
