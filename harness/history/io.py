"""Reading and writing history files: a streaming reader, the operation discipline, a writer."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from harness.history.events import (
    NEMESIS,
    Event,
    EventType,
    HistoryError,
    Process,
    event_from_dict,
    event_to_dict,
)

__all__ = ["HistoryWriter", "paired", "read_history", "validated"]


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
