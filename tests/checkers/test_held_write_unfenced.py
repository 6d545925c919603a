"""Issue 29's "on an unfenced sink it is accepted and reported as expected": a write the proxy
held across a takeover, accepted by an unfenced sink with no mitigation, is an expected
stale-write (the run stays valid) whose explanation names the hold; on a sink without ``seq``
another key's write cannot order it, and the sink's coverage says so instead."""

from __future__ import annotations

from harness.record import Sink
from tests.checkers.test_checker_anomalies import HistoryBuilder, judged

_HELD = "w2's write old (epoch 7) was held 1.1 s"


def _held_across_a_takeover(sink: str, seqs: tuple[int, int] | None) -> HistoryBuilder:
    """w2 sends ``old`` (epoch 7) to ``sink``/k2, its proxy holds it while w3 takes over and
    writes ``new`` (epoch 8) to k1; then ``old`` is delivered and accepted."""
    history = HistoryBuilder().acquire("w2", 2, 7).send("w2", 2, "old", 7, key="k2", sink=sink)
    history.nemesis("start-hold", "w2").acquire("w3", 3, 8)
    history.write("w3", 3, "new", 8, key="k1", sink=sink)
    history.nemesis("stop-hold", "w2", said=_HELD).done("w2", 2, "old")
    for key, wid, epoch, seq in (("k1", "new", 8, 0), ("k2", "old", 7, 1)):
        entry: dict[str, object] = {"id": wid, "epoch": epoch}
        if seqs is not None:
            entry["seq"] = seqs[seq]
        history.event(1, "invoke", "read", {"sink": sink, "key": key}, node="w1")
        history.event(1, "ok", "read", {"sink": sink, "key": key, "entries": [entry]}, node="w1")
    return history


def test_a_held_write_an_unfenced_sink_accepted_is_expected_and_names_the_hold() -> None:
    history = _held_across_a_takeover("audit", (1, 2))
    result = judged(history, inventory={"audit": Sink("audit", False, "none", seq=True)})
    assert result.valid is True
    assert result.anomaly_counts == {}
    assert result.expected_counts == {"stale-write": 1}
    explanation = result.expected["stale-write"][0].explanation
    assert "accepted by unfenced (none) audit/k2 at seq 2" in explanation
    assert "w2 was held from" in explanation and _HELD in explanation


def test_the_same_hold_on_a_fenced_sink_counts_against_the_run() -> None:
    history = _held_across_a_takeover("store", (1, 2))
    result = judged(history, inventory={"store": Sink("store", True, seq=True)})
    assert result.valid is False
    assert result.anomaly_counts == {"stale-write": 1}
    assert _HELD in result.anomalies["stale-write"][0].explanation


def test_without_seq_a_held_write_to_another_key_is_not_observable_and_said_so() -> None:
    history = _held_across_a_takeover("log", None)
    result = judged(history, inventory={"log": Sink("log", False, "none")})
    assert result.valid is True
    assert result.expected_counts == {}
    assert "cross-key staleness not observable" in result.sinks["log"].coverage[0]
