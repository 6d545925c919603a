"""Writes that span keys (``also`` in a write's value) and several locks sharing one sink: the
checker judges every key of a spanning write, across keys, per sink and lock."""

from __future__ import annotations

from typing import Any

import pytest

from harness.record import HistoryError, Sink
from tests.checkers.test_checker_anomalies import HistoryBuilder, judged, only
from tests.checkers.test_checker_rules import seq_read

_SEQ = {"store": Sink("store", True, seq=True)}


def spanning(
    history: HistoryBuilder,
    node: str,
    process: int,
    epoch: int,
    items: list[tuple[str, str, int]],
    *,
    paused: bool = False,
) -> HistoryBuilder:
    """One write spanning ``items`` (``(key, id, seq)``), acknowledged ok with every seq; with
    ``paused`` its holder is paused between the invoke and the ack, while w3 takes over."""
    (key, wid, seq), rest = items[0], items[1:]
    value: dict[str, Any] = {"lock": "L", "sink": "store", "key": key, "id": wid, "epoch": epoch}
    value["also"] = [{"key": k, "id": i} for k, i, _ in rest]
    history.event(process, "invoke", "write", value, node=node)
    if paused:
        history.nemesis("start-pause", node).acquire("w3", 3, epoch + 1)
        history.send("w3", 3, "new", epoch + 1, key="k0")
        acked = {"lock": "L", "sink": "store", "key": "k0", "id": "new", "epoch": epoch + 1}
        history.event(3, "ok", "write", {**acked, "seq": items[0][2] - 1}, node="w3")
        history.nemesis("stop-pause", node)
    done = {**value, "seq": seq, "also": [{"key": k, "id": i, "seq": s} for k, i, s in rest]}
    history.event(process, "ok", "write", done, node=node)
    return history


def test_a_stale_spanning_write_to_untouched_keys_is_caught_in_seq_order() -> None:
    # w2 sends a write spanning k1..k3, is paused past its lease, w3 takes over and writes k0;
    # w2's write lands after (seq 3..5): none of its keys was touched by w3, only seq shows it.
    history = HistoryBuilder().acquire("w2", 2, 7)
    spanning(history, "w2", 2, 7, [("k1", "a", 3), ("k2", "b", 4), ("k3", "c", 5)], paused=True)
    seq_read(history, "k0", [("new", 8, 2)])
    for key, wid, seq in (("k1", "a", 3), ("k2", "b", 4), ("k3", "c", 5)):
        seq_read(history, key, [(wid, 7, seq)])
    result = judged(history, inventory=_SEQ)
    assert result.valid is False
    assert result.anomaly_types == ["stale-write"]
    # Every key of the stale write is its own accepted stale write.
    assert result.anomaly_counts == {"stale-write": 3}
    stale = {a.details["rule"] for a in result.anomalies["stale-write"]}
    assert stale == {"seq"}
    keys = sorted(
        op.key for a in result.anomalies["stale-write"] for op in a.ops if op.role == "stale"
    )
    assert keys == ["k1", "k2", "k3"]


def test_a_spanning_write_acknowledged_in_order_is_valid_and_all_its_keys_are_verified() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7)
    spanning(history, "w2", 2, 7, [("k1", "a", 1), ("k2", "b", 2)])
    history.acquire("w3", 3, 8).write("w3", 3, "new", 8, key="k1")
    seq_read(history, "k1", [("a", 7, 1), ("new", 8, 3)])
    seq_read(history, "k2", [("b", 7, 2)])
    result = judged(history, inventory=_SEQ)
    assert result.valid is True
    assert result.counts.accepted_writes == 3


def test_a_spanning_write_whose_other_key_is_never_read_leaves_the_verdict_unknown() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7)
    spanning(history, "w2", 2, 7, [("k1", "a", 1), ("k2", "b", 2)])
    seq_read(history, "k1", [("a", 7, 1)])
    result = judged(history, inventory=_SEQ)
    assert result.valid == "unknown"
    assert any("store/k2" in reason for reason in result.unknown_reasons)


def test_a_failed_spanning_write_that_appears_in_a_read_is_a_phantom_on_that_key() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).write("w2", 2, "c", 7, key="k1")
    value = {"lock": "L", "sink": "store", "key": "k1", "id": "a", "epoch": 7}
    value["also"] = [{"key": "k2", "id": "b"}]
    history.event(2, "invoke", "write", value, node="w2")
    history.event(2, "fail", "write", value, node="w2", error="unavailable")
    history.read("w1", 1, [("c", 7)], key="k1").read("w1", 1, [("b", 7)], key="k2")
    result = judged(history)
    assert result.anomaly_types == ["phantom-write"]
    assert result.anomalies["phantom-write"][0].details["id"] == "b"


def test_a_spanning_write_refused_as_stale_counts_once_and_is_valid() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).acquire("w3", 3, 8)
    history.write("w3", 3, "new", 8, key="k1")
    value = {"lock": "L", "sink": "store", "key": "k2", "id": "a", "epoch": 7}
    value["also"] = [{"key": "k3", "id": "b"}, {"key": "k4", "id": "c"}]
    history.event(2, "invoke", "write", value, node="w2")
    history.event(2, "fail", "write", value, node="w2", error="stale-epoch")
    history.read("w1", 1, [("new", 8)], key="k1")
    for key in ("k2", "k3", "k4"):
        history.read("w1", 1, [], key=key)
    result = judged(history)
    assert result.valid is True
    assert result.counts.refused_writes == 1


@pytest.mark.parametrize(
    "also",
    [
        "k2",
        [{"key": "k2"}],
        [{"key": "k2", "id": 3}],
        [{"key": "k2", "id": "a"}],  # the first key's id again
    ],
)
def test_a_malformed_also_is_a_history_error_naming_the_fix(also: object) -> None:
    history = HistoryBuilder().acquire("w2", 2, 7)
    value = {"lock": "L", "sink": "store", "key": "k1", "id": "a", "epoch": 7, "also": also}
    history.event(2, "invoke", "write", value, node="w2")
    with pytest.raises(HistoryError, match=r"also|already used"):
        judged(history)


def test_several_locks_share_one_sink_and_are_judged_per_lock() -> None:
    # Lock M's epoch 9 on the shared store says nothing about lock L's epoch 7; L's own newer
    # epoch 8 does.
    history = HistoryBuilder().acquire("w1", 1, 9, lock="M").acquire("w2", 2, 7)
    history.write("w1", 1, "m", 9, key="M-k0", lock="M").write("w2", 2, "ok7", 7, key="L-k0")
    assert (
        judged(
            history.read("w1", 1, [("m", 9)], key="M-k0").read("w1", 1, [("ok7", 7)], key="L-k0")
        ).valid
        is True
    )
    history.acquire("w3", 3, 8).write("w3", 3, "new", 8, key="L-k1")
    history.write("w2", 2, "old", 7, key="L-k2")
    history.read("w1", 1, [("new", 8)], key="L-k1").read("w1", 1, [("old", 7)], key="L-k2")
    explanation = only(judged(history), "stale-write")
    assert "old (epoch 7)" in explanation
    anomaly = judged(history).anomalies["stale-write"][0]
    assert anomaly.lock == "L"
    assert anomaly.sink == "store"
