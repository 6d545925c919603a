"""The history reader: malformed input is a clear error naming the line; a cut history is fine."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest

from checkers import check
from harness.record import HistoryError, paired, read_history, validated


def jsonl(*events: dict[str, Any] | bytes) -> io.BytesIO:
    lines = [item if isinstance(item, bytes) else orjson.dumps(item) + b"\n" for item in events]
    return io.BytesIO(b"".join(lines))


def op(index: int, process: int | str, kind: str, f: str, **value: Any) -> dict[str, Any]:
    return {
        "index": index,
        "time": index * 1000,
        "process": process,
        "type": kind,
        "f": f,
        "value": value,
    }


def problem(stream: io.BytesIO) -> HistoryError:
    with pytest.raises(HistoryError) as caught:
        list(validated(read_history(stream)))
    return caught.value


def test_bad_json_names_its_line_and_the_fix() -> None:
    error = problem(jsonl(op(0, 1, "invoke", "read"), b"{not json\n", op(1, 1, "ok", "read")))
    assert error.line == 2
    assert str(error).startswith("history line 2: not valid JSON: '{not json'")
    assert "each line must be one JSON object" in str(error)


def test_a_line_that_is_not_an_object_is_refused() -> None:
    assert problem(jsonl(b"[1, 2]\n")).problem == "expected a JSON object, got list"


def test_a_missing_field_is_named() -> None:
    event = op(0, 1, "invoke", "read")
    del event["f"]
    error = problem(jsonl(event))
    assert (error.line, error.problem) == (1, "missing field 'f'")
    assert "every event needs index, time, process, type and f" in error.fix


def test_a_completion_without_invoke_is_refused() -> None:
    error = problem(jsonl(op(0, 1, "invoke", "read"), op(1, 2, "ok", "read")))
    assert error.line == 2
    assert error.problem == "ok of 'read' on process 2 has no invoke"


def test_two_open_operations_on_one_process_are_refused() -> None:
    error = problem(jsonl(op(0, 1, "invoke", "read"), op(1, 1, "invoke", "write")))
    assert error.line == 2
    assert "process 1 invoked 'write' while its 'read' from line 1 is still open" in error.problem
    assert "new process number" in error.fix


def test_a_completion_of_another_f_is_refused() -> None:
    error = problem(jsonl(op(0, 1, "invoke", "read"), op(1, 1, "ok", "write")))
    assert error.problem == "ok of 'write' completes an invoke of 'read' (line 1)"


def test_a_torn_last_line_is_dropped_but_a_torn_middle_line_is_not() -> None:
    torn = jsonl(op(0, 1, "invoke", "read"), b'{"index": 1, "ti')
    assert [event.index for event in read_history(torn)] == [0]
    assert problem(jsonl(b'{"index": 1, "ti\n', op(0, 1, "invoke", "read"))).line == 1


def test_paired_gives_each_completion_its_invoke_and_leaves_open_ops_open() -> None:
    stream = jsonl(
        op(0, 1, "invoke", "read"),
        op(1, "nemesis", "info", "start-pause", targets=["w1"]),
        op(2, 1, "ok", "read"),
        op(3, 2, "invoke", "write"),
    )
    pairs = [
        (event.index, None if invoke is None else invoke.index)
        for event, invoke in paired(read_history(stream))
    ]
    assert pairs == [(0, None), (1, None), (2, 0), (3, None)]


def test_a_history_that_ends_early_is_valid_input_with_open_operations_as_info() -> None:
    write = {"lock": "L", "sink": "store", "key": "k", "id": "a", "epoch": 1}
    entries = [{"id": "a", "epoch": 1}]
    stream = jsonl(
        {**op(0, 1, "invoke", "acquire", lock="L"), "node": "w1"},
        {**op(1, 1, "ok", "acquire", lock="L", epoch=1), "node": "w1"},
        {**op(2, 1, "invoke", "write", **write), "node": "w1"},
        {**op(3, 1, "ok", "write", **write), "node": "w1"},
        {**op(4, 2, "invoke", "read", sink="store", key="k"), "node": "w2"},
        {**op(5, 2, "ok", "read", sink="store", key="k", entries=entries), "node": "w2"},
        {**op(6, 1, "invoke", "write", **{**write, "id": "b"}), "node": "w1"},
        {**op(7, 2, "invoke", "read", sink="store", key="k"), "node": "w2"},
    )
    result = check(read_history(stream))
    assert result.valid is True
    assert result.counts.ops["write"]["open"] == 1
    assert result.counts.ops["read"]["open"] == 1


@pytest.mark.parametrize(
    ("value", "problem_text"),
    [
        ({"lock": "L", "sink": "s", "key": "k", "epoch": 1}, "write lacks 'id' in its value"),
        (
            {"lock": "L", "sink": "s", "key": "k", "id": "a", "epoch": "1"},
            "write value has a field of the wrong type",
        ),
    ],
)
def test_a_write_without_its_fields_is_an_error_naming_the_line(
    value: dict[str, Any], problem_text: str
) -> None:
    stream = jsonl(
        op(0, 1, "invoke", "read"),
        op(1, 1, "ok", "read", sink="s", key="k", entries=[]),
        op(2, 1, "invoke", "write", **value),
    )
    with pytest.raises(HistoryError) as caught:
        check(read_history(stream))
    assert (caught.value.line, caught.value.problem) == (3, problem_text)


def test_read_entries_without_ids_are_an_error_naming_the_line() -> None:
    stream = jsonl(
        op(0, 1, "invoke", "read"),
        op(1, 1, "ok", "read", sink="s", key="k", entries=[{"epoch": 1}]),
    )
    with pytest.raises(HistoryError) as caught:
        check(read_history(stream))
    assert caught.value.line == 2
    assert caught.value.problem == "read entries must be objects with a string id and an epoch"


def test_an_ok_acquire_without_an_epoch_is_an_error() -> None:
    stream = jsonl(op(0, 1, "invoke", "acquire", lock="L"), op(1, 1, "ok", "acquire", lock="L"))
    with pytest.raises(HistoryError) as caught:
        check(read_history(stream))
    assert caught.value.line == 2
    assert "integer epoch" in caught.value.problem


def test_a_reused_write_id_is_an_error() -> None:
    write = {"lock": "L", "sink": "s", "key": "k", "id": "a", "epoch": 1}
    stream = jsonl(op(0, 1, "invoke", "write", **write), op(1, 2, "invoke", "write", **write))
    with pytest.raises(HistoryError) as caught:
        check(read_history(stream))
    assert caught.value.problem == "write id 'a' was already used at line 1"
