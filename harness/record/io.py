"""Reading and writing history files: a streaming reader, the operation discipline, a writer."""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

import orjson

from harness.record.events import (
    NEMESIS,
    Event,
    EventType,
    HistoryError,
    Process,
    event_from_dict,
    event_to_dict,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "HistoryWriter",
    "json_bytes",
    "last_time",
    "paired",
    "read_history",
    "validated",
]

_GZIP_MAGIC: Final = b"\x1f\x8b"
_TAIL_BYTES: Final = 64 * 1024  # far more than one history line
# orjson turns integers beyond 64 bits into floats without a word; a line holding a run of 19
# digits may carry one, so it is parsed by the standard library, which keeps integers exact. The
# run is found by mapping every digit to "0" and everything else to " " (one C pass over the line,
# a tenth of the cost of a regular expression's search on a history's lines).
_DIGITS_ONLY: Final = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_RUN: Final = b"0" * 19
MAX_DEPTH: Final = 512
"""How deeply arrays and objects may nest in one history line. Checked by the reader itself before
any parser sees the line: JSON parsers differ (orjson 3.8 recursed until the stack ran out and
crashed the process at ~150,000 levels; 3.13 refuses beyond 1,024; the standard library raises
RecursionError near 1,000), and a history's verdict must not depend on which one is installed."""
MAX_LINE_BYTES: Final = 256 * 1024 * 1024
"""The longest history line the reader takes (the largest real line, a final read of a key with
every write of a long run, is a few megabytes). A longer one is refused rather than buffered: a
history that is a link to ``/dev/zero`` or a stream with no newline would otherwise be read until
memory runs out."""
_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET: Final = bytes(set(range(256)) - set(b"[]{}"))
_STEP: Final = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_bytes(data: Any, *, indent: bool = False) -> bytes:
    """``data`` as JSON, integers of any size kept exact.

    orjson is fast but refuses integers beyond 64 bits (``TypeError``); such a value, which a
    history may hold (docs/design.md §4), is written by the standard library instead. Anything
    neither can write raises ``TypeError``.
    """
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    try:
        return orjson.dumps(data, option=option)
    except TypeError:
        separators = (",", ": ") if indent else (",", ":")
        text = json.dumps(data, indent=2 if indent else None, separators=separators)
        return text.encode("utf-8")


def _too_deep(line: bytes) -> bool:
    """True if ``line`` nests arrays and objects more than :data:`MAX_DEPTH` deep.

    Linear and nearly free for ordinary lines: fewer opening brackets than the limit cannot nest
    beyond it. Otherwise strings (which may hold brackets) are dropped and the depth counted.
    """
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for byte in _STRING.sub(b"", line).translate(None, _NOT_BRACKET):
        depth += _STEP[byte]
        if depth > MAX_DEPTH:
            return True
    return False


def read_history(
    source: str | os.PathLike[str] | IO[bytes], *, notes: list[str] | None = None
) -> Iterator[Event]:
    """Stream events from a JSON Lines file, FIFO or binary stream (gzip'd or not), one at a time.

    Raises :class:`HistoryError` naming the line for malformed JSON or missing fields, for binary
    data (a NUL byte, which JSON text never holds) and for a line beyond :data:`MAX_LINE_BYTES`.
    Blank lines are skipped. A torn last line (a run killed mid-write) is tolerated: it is the only
    line that may be cut short, and it is dropped, saying so in ``notes`` when given. Integers keep
    their exact value whatever their size.
    """
    if isinstance(source, str | os.PathLike):
        with Path(source).open("rb") as stream:
            yield from _read_stream(stream, notes)
    else:
        yield from _read_stream(source, notes)


def _lines(stream: IO[bytes] | gzip.GzipFile) -> Iterator[bytes]:
    """The stream's lines, none longer than :data:`MAX_LINE_BYTES` (else :class:`HistoryError`)."""
    number = 0
    while line := stream.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(line) > MAX_LINE_BYTES:
            raise HistoryError(
                number,
                f"longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB without a line break: this is "
                "not a history (a device such as /dev/zero, or binary data?)",
                "pass the history.jsonl a run wrote",
            )
        yield line


def _read_stream(stream: IO[bytes], notes: list[str] | None) -> Iterator[Event]:
    # peek() sniffs the gzip magic without consuming it, so pipes and FIFOs work as well as files.
    buffered = stream if isinstance(stream, io.BufferedReader) else _buffered(stream)
    source: IO[bytes] | gzip.GzipFile = buffered
    if buffered.peek(2)[:2] == _GZIP_MAGIC:
        source = gzip.GzipFile(fileobj=buffered, mode="rb")
    loads = orjson.loads
    digits_only = _DIGITS_ONLY
    pending: tuple[int, bytes] | None = None
    number = 0
    try:
        for number, line in enumerate(_lines(source), 1):
            if pending is not None:
                raise _bad_json(*pending)
            if b"\0" in line:
                raise HistoryError(
                    number,
                    "holds NUL bytes: this is not a history (binary data, or a file zeroed by a "
                    "crash?)",
                    "pass the history.jsonl a run wrote (JSON Lines text)",
                )
            if not line.strip():
                continue
            if _too_deep(line):
                raise _bad_json(number, line, f"nested more than {MAX_DEPTH} levels deep")
            try:
                raw = _exact(line) if _LONG_RUN in line.translate(digits_only) else loads(line)
            except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
                if not line.endswith(b"\n") and line.lstrip().startswith(b"{"):
                    # Only the final line can lack its newline; a crash mid-write leaves the
                    # beginning of an object. A line that is no object at all is not torn.
                    if notes is not None:
                        notes.append(
                            f"the last line ({number}) was torn (cut short mid-write: the run was "
                            "killed or crashed while writing it) and the history was judged "
                            "without it"
                        )
                    return
                pending = (number, line)
                continue
            yield event_from_dict(raw, number)
    except (OSError, EOFError, gzip.BadGzipFile) as problem:
        where = f" after line {number}" if number else ""
        damaged = "a .gz cut short or damaged cannot be read past that point; pass a whole file"
        fix = damaged if isinstance(source, gzip.GzipFile) else ""
        raise HistoryError(0, f"cannot be read{where}: {problem}", fix) from None
    if pending is not None:
        raise _bad_json(*pending)


def last_time(path: str | os.PathLike[str]) -> int | None:
    """The ``time`` (ns) of the last whole event of the history at ``path``, read from its tail
    only (a store of many large runs is listed fast); ``None`` when it has none or is unreadable.
    A torn last line, or the cut-off first line of the tail, is passed over."""
    try:
        with open(path, "rb") as stream:
            size = stream.seek(0, os.SEEK_END)
            stream.seek(max(0, size - _TAIL_BYTES))
            lines = stream.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if _too_deep(line):
            continue
        try:
            time = json.loads(line).get("time")
        except (ValueError, AttributeError):
            continue
        if isinstance(time, int) and not isinstance(time, bool):
            return time
    return None


def _buffered(stream: IO[bytes]) -> io.BufferedReader:
    return io.BufferedReader(stream)  # type: ignore[arg-type]  # any readable binary stream


def _exact(line: bytes) -> Any:
    return json.loads(line, parse_constant=_no_constant)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _bad_json(number: int, line: bytes, problem: str = "not valid JSON") -> HistoryError:
    excerpt = line[:80].decode("utf-8", "replace").rstrip()
    return HistoryError(
        number,
        f"{problem}: {excerpt!r}",
        f"each line must be one JSON object, nested at most {MAX_DEPTH} levels",
    )


def paired(events: Iterable[Event]) -> Iterator[tuple[Event, Event | None]]:
    """Yield each event with the invoke it completes, checking the discipline of docs/design.md §4.

    Invokes and nemesis events come with ``None``. Indexes must rise strictly and times never go
    back, so that index order is real-time order (on equal times the index decides). A completion
    must follow an invoke on the same process with the same ``f``, and a process may not have two
    open operations. A breach raises :class:`HistoryError` naming the line. Operations still open
    when the events run out are simply never completed: a history cut short is valid input.
    """
    open_ops: dict[Process, Event] = {}
    last: Event | None = None
    for event in events:
        if last is not None and (event.index <= last.index or event.time < last.time):
            raise _disorder(event, last)
        last = event
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


def _disorder(event: Event, last: Event) -> HistoryError:
    if event.index <= last.index:
        problem = f"index {event.index} does not follow index {last.index} (line {last.line})"
    else:
        problem = (
            f"time {event.time} is earlier than time {last.time} of index {last.index} "
            f"(line {last.line})"
        )
    return HistoryError(
        event.line,
        problem,
        "indexes must rise strictly and times never go back, line by line",
    )


def validated(events: Iterable[Event]) -> Iterator[Event]:
    """Pass events through, checking the operation discipline of docs/design.md §4 (see
    :func:`paired`).

    Nemesis events are exempt (they are all ``info``).
    """
    for event, _ in paired(events):
        yield event


class HistoryWriter:
    """Append events to a history file, each handed to the kernel before :meth:`append`
    returns, so a killed process loses nothing it recorded.

    Assigns ``index`` in order. Use as a context manager; :meth:`append` is the only writer, so a
    single thread (the runner's recorder) should own it.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # Unbuffered: one write(2) per event, where a buffered file's write and flush cost two
        # calls through its buffer for the same system call.
        self._file = self.path.open("ab", buffering=0)
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
        line = json_bytes(event_to_dict(event)) + b"\n"
        if self._file.write(line) != len(line):
            # A regular file writes short only when its disk is full; the line is torn, and the
            # caller must write nothing after it.
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
        return event

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        if not self._file.closed:
            os.fsync(self._file.fileno())
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
