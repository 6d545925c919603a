"""History format v1: typed events, a streaming reader and an appending writer.

The history is the contract between the runner and the checkers (DESIGN.md §4). It is JSON Lines,
one event per line, written as the run goes so that a crash never loses what already happened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Literal

import orjson

__all__ = [
    "EVENT_TYPES",
    "NEMESIS",
    "Event",
    "EventType",
    "HistoryError",
    "HistoryWriter",
    "Process",
    "event_from_dict",
    "event_to_dict",
    "paired",
    "read_history",
    "validated",
]

EventType = Literal["invoke", "ok", "fail", "info"]
Process = int | str
EVENT_TYPES: Final[frozenset[str]] = frozenset(("invoke", "ok", "fail", "info"))
NEMESIS: Final = "nemesis"
_COMPLETIONS: Final[frozenset[str]] = frozenset(("ok", "fail", "info"))


class HistoryError(ValueError):
    """A history line that cannot be understood, with the line number and the fix."""

    def __init__(self, line: int, problem: str, fix: str = "") -> None:
        self.line = line
        self.problem = problem
        self.fix = fix
        message = f"history line {line}: {problem}"
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
            "every event needs index, time, process, type and f (see DESIGN.md §4)",
        ) from None
    if type(index) is not int or type(time) is not int:
        raise HistoryError(line, "index and time must be integers (time in nanoseconds)")
    if etype not in EVENT_TYPES:
        raise HistoryError(
            line, f"unknown type {etype!r}", "type must be one of invoke, ok, fail, info"
        )
    if not isinstance(f, str):
        raise HistoryError(line, "f must be a string such as 'write' or 'acquire'")
    if not (type(process) is int or process == NEMESIS):
        raise HistoryError(line, f"process must be an integer or 'nemesis', got {process!r}")
    value = raw.get("value")
    if value is None:
        value = {}
    elif not isinstance(value, dict):
        raise HistoryError(line, "value must be a JSON object")
    node = raw.get("node")
    error = raw.get("error")
    return Event(
        index,
        time,
        process,
        etype,
        f,
        value,
        node if isinstance(node, str) else None,
        error if isinstance(error, str) else None,
        line,
    )


def read_history(source: str | os.PathLike[str] | IO[bytes]) -> Iterator[Event]:
    """Stream events from a JSON Lines file (or binary stream), one at a time.

    Raises :class:`HistoryError` naming the line for malformed JSON or missing fields. Blank lines
    are skipped. A torn last line (a run killed mid-write) is tolerated: it is the only line that
    may be cut short, and it is dropped.
    """
    if isinstance(source, str | os.PathLike):
        with Path(source).open("rb") as stream:
            yield from _read_stream(stream)
    else:
        yield from _read_stream(source)


def _read_stream(stream: IO[bytes]) -> Iterator[Event]:
    loads = orjson.loads
    pending: tuple[int, bytes] | None = None
    for number, line in enumerate(stream, 1):
        if pending is not None:
            raise _bad_json(*pending)
        if not line.strip():
            continue
        try:
            raw = loads(line)
        except orjson.JSONDecodeError:
            if not line.endswith(b"\n"):
                # Only the final line can lack its newline; a crash mid-write leaves exactly this.
                return
            pending = (number, line)
            continue
        yield event_from_dict(raw, number)
    if pending is not None:
        raise _bad_json(*pending)


def _bad_json(number: int, line: bytes) -> HistoryError:
    excerpt = line[:80].decode("utf-8", "replace").rstrip()
    return HistoryError(number, f"not valid JSON: {excerpt!r}", "each line must be one JSON object")


def paired(events: Iterable[Event]) -> Iterator[tuple[Event, Event | None]]:
    """Yield each event with the invoke it completes, checking the discipline of DESIGN.md §4.

    Invokes and nemesis events come with ``None``. A completion must follow an invoke on the same
    process with the same ``f``, and a process may not have two open operations; a breach raises
    :class:`HistoryError` naming the line. Operations still open when the events run out are
    simply never completed: a history cut short is valid input.
    """
    open_ops: dict[Process, Event] = {}
    for event in events:
        process = event.process
        if process == NEMESIS:
            yield event, None
        elif event.type == "invoke":
            earlier = open_ops.get(process)
            if earlier is not None:
                raise HistoryError(
                    event.line,
                    f"process {process} invoked {event.f!r} while its {earlier.f!r} "
                    f"from line {earlier.line} is still open",
                    "after an info completion a worker must continue under a new process number",
                )
            open_ops[process] = event
            yield event, None
        else:
            invoke = open_ops.pop(process, None)
            if invoke is None:
                raise HistoryError(
                    event.line,
                    f"{event.type} of {event.f!r} on process {process} has no invoke",
                    "every completion must follow an invoke on the same process",
                )
            if invoke.f != event.f:
                raise HistoryError(
                    event.line,
                    f"{event.type} of {event.f!r} completes an invoke of {invoke.f!r} "
                    f"(line {invoke.line})",
                    "a completion must carry the same f as its invoke",
                )
            yield event, invoke


def validated(events: Iterable[Event]) -> Iterator[Event]:
    """Pass events through, checking the operation discipline of DESIGN.md §4 (see :func:`paired`).

    Nemesis events are exempt (they are all ``info``).
    """
    for event, _ in paired(events):
        yield event


class HistoryWriter:
    """Append events to a history file, flushed per event so a crash loses nothing recorded.

    Assigns ``index`` in order. Use as a context manager; :meth:`append` is the only writer, so a
    single thread (the runner's recorder) should own it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: IO[bytes] = self.path.open("ab")
        self._next_index = 0

    @property
    def count(self) -> int:
        """How many events this writer has appended."""
        return self._next_index

    def append(
        self,
        *,
        time: int,
        process: Process,
        type: EventType,
        f: str,
        value: dict[str, Any] | None = None,
        node: str | None = None,
        error: str | None = None,
    ) -> Event:
        """Record one event; returns it with its index."""
        event = Event(self._next_index, time, process, type, f, value or {}, node, error)
        self._next_index += 1
        self._file.write(orjson.dumps(event_to_dict(event)) + b"\n")
        self._file.flush()
        return event

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        if not self._file.closed:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
