"""Malformed histories are refused with the line named (exit 3 in the CLI), never judged; large
integers, gzip'd input and order rules of history format v1."""

from __future__ import annotations

import gzip
import io
from typing import Any

import orjson
import pytest

from checkers import check
from harness.record import MAX_DEPTH, HistoryError, read_history


def line(index: int, process: int | str, kind: str, f: str, **fields: Any) -> bytes:
    event = {"index": index, "time": index * 1000, "process": process, "type": kind, "f": f}
    event.update(fields)
    return orjson.dumps(event) + b"\n"


def write(wid: str = "a", epoch: object = 1, **extra: Any) -> dict[str, Any]:
    return {"lock": "L", "sink": "s", "key": "k", "id": wid, "epoch": epoch, **extra}


def problem(*lines: bytes) -> HistoryError:
    with pytest.raises(HistoryError) as caught:
        check(read_history(io.BytesIO(b"".join(lines))))
    return caught.value


@pytest.mark.parametrize(
    ("lines", "number", "text"),
    [
        ([line(0, 1, "invoke", "write", value=write(epoch=-1))], 1, "negative"),
        (
            [
                line(0, 1, "invoke", "acquire", value={"lock": "L"}),
                line(1, 1, "ok", "acquire", value={"lock": "L", "epoch": -3}),
            ],
            2,
            "integer epoch >= 0",
        ),
        (
            [
                line(0, 1, "invoke", "read", value={"sink": "s", "key": "k"}),
                line(
                    1,
                    1,
                    "ok",
                    "read",
                    value={"sink": "s", "key": "k", "entries": [{"id": "a", "epoch": "6"}]},
                ),
            ],
            2,
            "epoch is not an integer >= 0",
        ),
        (
            [
                line(0, 1, "invoke", "read", value={"sink": "s", "key": "k"}),
                line(
                    1,
                    1,
                    "ok",
                    "read",
                    value={"sink": "s", "key": "k", "entries": [{"id": "a", "epoch": -1}]},
                ),
            ],
            2,
            "epoch is not an integer >= 0",
        ),
        ([line(0, 1, "invoke", "read", node=7)], 1, "node must be a string"),
        ([line(0, "nemesis", "ok", "start-pause")], 1, "must be typed info"),
        ([line(0, 1, "invoke", "read"), line(0, 2, "invoke", "read")], 2, "does not follow"),
        (
            [line(5, 1, "invoke", "read"), line(3, 2, "invoke", "read")],
            2,
            "index 3 does not follow index 5",
        ),
        (
            [
                line(0, 1, "invoke", "read"),
                orjson.dumps({"index": 1, "time": -5, "process": 1, "type": "ok", "f": "read"})
                + b"\n",
            ],
            2,
            "index and time must be integers >= 0",
        ),
        (
            [
                orjson.dumps(
                    {"index": 0, "time": 5000, "process": 1, "type": "invoke", "f": "read"}
                )
                + b"\n",
                line(1, 2, "invoke", "read"),
            ],
            2,
            "time 1000 is earlier than time 5000",
        ),
        (
            [line(0, "nemesis", "info", "start-pause", value={"targets": [[["w1"]]]})],
            1,
            "targets are malformed",
        ),
        (
            [line(0, 1, "invoke", "read", value={"sink": "s", "key": "k", "epoch": 1})],
            1,
            "a fenced read needs a lock",
        ),
        (
            [
                line(0, 1, "invoke", "write", value=write()),
                line(1, 1, "ok", "write", value=write(seq="3")),
            ],
            2,
            "seq must be an integer >= 0",
        ),
        ([line(0, 1.5, "invoke", "read")], 1, "process must be an integer"),  # type: ignore[arg-type]
    ],
)
def test_malformed_input_is_refused_naming_the_line(
    lines: list[bytes], number: int, text: str
) -> None:
    error = problem(*lines)
    assert error.line == number
    assert text in str(error)


def test_deep_nesting_is_malformed_where_it_is_read_and_never_a_recursion_error() -> None:
    # The reader's own depth guard refuses the line before any parser sees it, so the verdict is
    # the same with every orjson (3.8 crashed the process here; 3.13 refuses beyond 1,024).
    deep = b"[" * 150_000 + b"]" * 150_000
    nested = b'{"index":0,"time":0,"process":"nemesis","type":"info","f":"x","value":{"t":' + deep
    for tail in (b"}}\n" + line(1, 1, "invoke", "read"), b"}}", b""):
        error = problem(nested + tail)  # a field nobody reads, a whole or a torn last line
        assert error.line == 1
        assert f"nested more than {MAX_DEPTH} levels deep" in str(error)
    event = b'{"index":0,"time":0,"process":"nemesis","type":"info","f":"start-pause",'
    inside = MAX_DEPTH - 2  # within the event's own object and its value: exactly the limit
    shallow = b"[" * inside + b'"w1"' + b"]" * inside
    error = problem(event + b'"value":{"targets":' + shallow + b"}}\n")
    assert "targets are malformed" in str(error)
    brackets = "[" * 5000  # brackets inside a string nest nothing
    (only,) = list(read_history(io.BytesIO(line(0, 1, "invoke", "read", value={"k": brackets}))))
    assert only.value["k"] == brackets
    deeper = b"[" * (inside + 1) + b'"w1"' + b"]" * (inside + 1)
    error = problem(event + b'"value":{"targets":' + deeper + b"}}\n")
    assert "levels deep" in str(error)


def test_a_one_line_file_that_is_no_json_object_is_malformed_not_a_torn_line() -> None:
    assert problem(b"hello, world").line == 1
    assert problem(b"[1, 2").line == 1
    assert list(read_history(io.BytesIO(b'{"index": 0, "ti'))) == []  # torn: cut mid-write


def test_integers_beyond_64_bits_keep_their_value() -> None:
    huge = 2**64 + 7
    text = line(0, 1, "invoke", "write", value=write(epoch=0))
    for field in (b'"index":0', b'"time":0', b'"epoch":0'):
        text = text.replace(field, field[:-1] + str(huge).encode())
    (event,) = list(read_history(io.BytesIO(text)))
    assert (event.index, event.time, event.value["epoch"]) == (huge, huge, huge)
    assert type(event.value["epoch"]) is int


def test_a_gzipped_history_is_read_directly() -> None:
    data = line(0, 1, "invoke", "read") + line(1, 1, "ok", "read")
    events = list(read_history(io.BytesIO(gzip.compress(data))))
    assert [event.index for event in events] == [0, 1]
