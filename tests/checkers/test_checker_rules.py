"""The rules of issue 10, one hand-built history each: across keys, refusals, ties, divergent reads,
big numbers, the faults an explanation names, and the anomaly registry."""

from __future__ import annotations

import pytest

from checkers import ANOMALY_NAMES, FaultWindow
from checkers.explain import describe_fault
from checkers.registry import REGISTRY
from harness.record import EXPECTED_WHEN_UNGUARDED, Event, Sink
from tests.checkers.test_checker_anomalies import MS, HistoryBuilder, judged, only


def seq_read(history: HistoryBuilder, key: str, entries: list[tuple[str, int, int]]) -> None:
    """A read whose entries carry ``(id, epoch, seq)``."""
    history.event(1, "invoke", "read", {"sink": "store", "key": key}, node="w1")
    listed = [{"id": wid, "epoch": epoch, "seq": seq} for wid, epoch, seq in entries]
    history.event(1, "ok", "read", {"sink": "store", "key": key, "entries": listed}, node="w1")


# -- 1. stale-write across keys ---------------------------------------------------------------


def test_a_write_acknowledged_before_a_lower_epoch_was_sent_makes_it_stale_on_any_key() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).acquire("w3", 3, 8)
    history.write("w3", 3, "new", 8, key="k1").write("w2", 2, "old", 7, key="k2")
    history.read("w1", 1, [("new", 8)], key="k1").read("w1", 1, [("old", 7)], key="k2")
    explanation = only(judged(history), "stale-write")
    assert explanation.startswith(
        "w2's write old (epoch 7) was accepted by fenced store/k2 although w3's write new "
        "(epoch 8) to store/k1 was acknowledged at"
    )
    anomaly = judged(history).anomalies["stale-write"][0]
    assert anomaly.details["rule"] == "realtime"


def test_other_locks_and_other_sinks_do_not_count_across_keys() -> None:
    history = HistoryBuilder().acquire("w3", 3, 8, lock="M").acquire("w2", 2, 7)
    history.write("w3", 3, "new", 8, key="k1", lock="M").write("w3", 3, "x", 9, sink="other")
    history.write("w2", 2, "old", 7, key="k2")
    history.read("w1", 1, [("new", 8)], key="k1").read("w1", 1, [("old", 7)], key="k2")
    history.read("w1", 1, [("x", 9)], sink="other")
    assert judged(history).valid is True


def test_overlapping_writes_are_judged_in_the_sinks_seq_order_across_keys() -> None:
    # w2's write was sent before its pause, so it overlaps w3's: only seq shows the order.
    history = HistoryBuilder().acquire("w2", 2, 7).send("w2", 2, "old", 7, key="k2")
    history.nemesis("start-pause", "w2").acquire("w3", 3, 8).write("w3", 3, "new", 8, key="k1")
    history.nemesis("stop-pause", "w2").done("w2", 2, "old")
    seq_read(history, "k1", [("new", 8, 1)])
    seq_read(history, "k2", [("old", 7, 2)])
    result = judged(history, inventory={"store": Sink("store", True, seq=True)})
    explanation = only(result, "stale-write")
    assert "at seq 2, after w3's write new (epoch 8) to store/k1 at seq 1" in explanation
    assert "w2 was paused" in explanation
    assert result.sinks["store"].seq_observable is True
    assert result.sinks["store"].coverage == ()


def test_seq_on_a_writes_ok_value_counts_and_out_of_order_arrival_is_caught() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).send("w2", 2, "old", 7, key="k2")
    history.acquire("w3", 3, 8).send("w3", 3, "new", 8, key="k1")
    ok = {"lock": "L", "sink": "store", "key": "k2", "id": "old", "epoch": 7, "seq": 5}
    history.event(2, "ok", "write", ok, node="w2")
    ok = {"lock": "L", "sink": "store", "key": "k1", "id": "new", "epoch": 8, "seq": 4}
    history.event(3, "ok", "write", ok, node="w3")
    history.read("w1", 1, [("new", 8)], key="k1").read("w1", 1, [("old", 7)], key="k2")
    result = judged(history)
    assert "at seq 5, after w3's write new (epoch 8) to store/k1 at seq 4" in only(
        result, "stale-write"
    )


def test_a_sink_without_seq_says_cross_key_staleness_was_not_observable() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).send("w2", 2, "old", 7, key="k2")
    history.acquire("w3", 3, 8).write("w3", 3, "new", 8, key="k1").done("w2", 2, "old")
    history.read("w1", 1, [("new", 8)], key="k1").read("w1", 1, [("old", 7)], key="k2")
    result = judged(history)
    assert result.valid is True
    verdict = result.sinks["store"]
    assert verdict.seq_observable is False
    assert "cross-key staleness not observable" in verdict.coverage[0]
    assert result.to_json()["sinks"]["store"]["seq_observable"] is False
    declared = judged(history, inventory={"store": Sink("store", True, seq=True)})
    assert "yet no write or read entry had one" in declared.sinks["store"].coverage[1]


def test_rising_seqs_with_rising_epochs_are_valid() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).write("w2", 2, "a", 7, key="k2")
    history.acquire("w3", 3, 8).write("w3", 3, "b", 8, key="k1")
    seq_read(history, "k2", [("a", 7, 1)])
    seq_read(history, "k1", [("b", 8, 2)])
    assert judged(history).valid is True


# -- 2. wrongful-refusal ----------------------------------------------------------------------


def test_refusing_an_epoch_nothing_higher_overtook_is_wrongful() -> None:
    # A store comparing epochs as text: "10" < "9".
    history = HistoryBuilder().acquire("w1", 1, 9).write("w1", 1, "a", 9).release("w1", 1)
    history.acquire("w2", 2, 10).write("w2", 2, "b", 10, "fail", error="stale-epoch")
    history.read("w1", 1, [("a", 9)])
    explanation = only(judged(history), "wrongful-refusal")
    assert explanation.startswith("store/k refused w2's write b (epoch 10) as stale at")
    assert explanation.endswith("the highest epoch of L sent before it was 9")


def test_a_refusal_after_a_higher_epoch_was_sent_is_rightful_even_if_its_outcome_is_unknown() -> (
    None
):
    history = HistoryBuilder().acquire("w1", 1, 7).acquire("w2", 2, 8)
    history.send("w2", 2, "b", 8, key="k2").write("w1", 1, "a", 7, "fail", error="stale-epoch")
    history.done("w2", 2, "b", "info").read("w1", 1, [("b", 8)], key="k2")
    assert "wrongful-refusal" not in judged(history).anomaly_types


def test_a_fenced_read_refused_without_cause_is_wrongful_and_a_fenced_read_raises_the_mark() -> (
    None
):
    history = HistoryBuilder().acquire("w1", 1, 3).write("w1", 1, "a", 3)
    fenced = {"sink": "store", "key": "k", "lock": "L", "epoch": 3}
    history.event(2, "invoke", "read", fenced, node="w2")
    history.event(2, "fail", "read", fenced, node="w2", error="stale-epoch")
    history.read("w1", 1, [("a", 3)])
    assert "fenced read (epoch 3)" in only(judged(history), "wrongful-refusal")
    rightful = HistoryBuilder().acquire("w1", 1, 3).acquire("w2", 2, 4)
    raised = {"sink": "store", "key": "k", "lock": "L", "epoch": 4}
    rightful.event(2, "invoke", "read", raised, node="w2")
    rightful.event(2, "ok", "read", {**raised, "entries": []}, node="w2")
    rightful.write("w1", 1, "a", 3, "fail", error="stale-epoch").write("w2", 2, "b", 4)
    rightful.read("w2", 2, [("b", 4)])
    assert judged(rightful).valid is True


def test_refusing_a_second_holder_of_one_epoch_is_the_lock_services_reuse_not_a_broken_fence() -> (
    None
):
    # A failed lock service granted epoch 3 twice; a store that tells holders apart refuses w2.
    history = HistoryBuilder().acquire("w1", 1, 3).write("w1", 1, "a", 3).release("w1", 1)
    history.acquire("w2", 2, 3).write("w2", 2, "b", 3, "fail", error="stale-epoch")
    history.read("w1", 1, [("a", 3)])
    found = judged(history).anomaly_types
    assert "epoch-reuse" in found
    assert "wrongful-refusal" not in found
    # Epoch 3 granted once: another node sending it is no excuse (as for w2's read below).
    once = HistoryBuilder().acquire("w1", 1, 3).write("w1", 1, "a", 3)
    once.write("w2", 2, "b", 3, "fail", error="stale-epoch").read("w1", 1, [("a", 3)])
    assert "wrongful-refusal" in judged(once).anomaly_types
    # The same holder refused at its own epoch, with no other holder there: wrongful.
    own = HistoryBuilder().acquire("w1", 1, 3).write("w1", 1, "a", 3)
    own.write("w1", 1, "b", 3, "fail", error="stale-epoch").read("w1", 1, [("a", 3)])
    assert "wrongful-refusal" in judged(own).anomaly_types
    # Excused while the other holder's write of that epoch is in flight, wrongful once it failed.
    pending = HistoryBuilder().acquire("w1", 1, 3).acquire("w2", 2, 3).send("w1", 1, "a", 3)
    pending.write("w2", 2, "b", 3, "fail", error="stale-epoch")
    pending.done("w1", 1, "a", "fail", error="unavailable").read("w2", 2, [])
    assert "wrongful-refusal" in judged(pending).anomaly_types


def test_a_failed_higher_write_raised_nothing() -> None:
    history = HistoryBuilder().acquire("w1", 1, 3).acquire("w2", 2, 4)
    history.write("w2", 2, "b", 4, "fail", error="unavailable")
    history.write("w1", 1, "a", 3, "fail", error="stale-epoch").write("w1", 1, "c", 3)
    history.read("w1", 1, [("c", 3)])
    assert "wrongful-refusal" in judged(history).anomaly_types


def test_a_refusal_excused_by_a_higher_write_in_flight_is_wrongful_once_that_write_fails() -> None:
    # The excuse (w2's epoch 4) was sent before the refusal and failed after it: it never
    # reached a fence, so nothing could have overtaken epoch 3.
    history = HistoryBuilder().acquire("w1", 1, 3).write("w1", 1, "z", 3)
    history.acquire("w2", 2, 4).send("w2", 2, "b", 4)
    history.write("w1", 1, "a", 3, "fail", error="stale-epoch")
    history.done("w2", 2, "b", "fail", error="unavailable").read("w1", 1, [("z", 3)])
    explanation = only(judged(history), "wrongful-refusal")
    assert "(epoch 4, in flight then, failed: it never reached a fence)" in explanation
    for outcome in ("ok", "info"):
        excused = HistoryBuilder().acquire("w1", 1, 3).acquire("w2", 2, 4).send("w2", 2, "b", 4)
        excused.write("w1", 1, "a", 3, "fail", error="stale-epoch").done("w2", 2, "b", outcome)
        excused.read("w1", 1, [("b", 4)])
        assert "wrongful-refusal" not in judged(excused).anomaly_types, outcome
    still_open = HistoryBuilder().acquire("w1", 1, 3).acquire("w2", 2, 4).send("w2", 2, "b", 4)
    still_open.write("w1", 1, "a", 3, "fail", error="stale-epoch").write("w1", 3, "c", 5)
    still_open.read("w1", 1, [("c", 5)])
    assert "wrongful-refusal" not in judged(still_open).anomaly_types  # open counts as info


# -- 4. divergent reads do not hide other anomalies -------------------------------------------


def test_a_divergent_read_is_still_examined_for_stale_writes_and_duplicates() -> None:
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "a", 7)
    history.acquire("w2", 2, 8).send("w2", 2, "b", 8).send("w1", 1, "c", 7)
    history.done("w2", 2, "b").done("w1", 1, "c")
    history.read("w1", 1, [("a", 7), ("b", 8)])
    history.read("w1", 1, [("a", 7), ("c", 7), ("b", 8), ("c", 7)])
    history.read("w1", 1, [("a", 7), ("b", 8)])
    result = judged(history)
    assert set(result.anomaly_types) >= {"divergent-reads", "duplicate-write"}
    history2 = HistoryBuilder().acquire("w1", 1, 7).send("w1", 1, "a", 7)
    history2.acquire("w2", 2, 8).send("w2", 2, "b", 8).done("w1", 1, "a").done("w2", 2, "b")
    history2.read("w1", 1, [("a", 7), ("b", 8)]).read("w1", 1, [("b", 8), ("a", 7)])
    history2.read("w1", 1, [("a", 7), ("b", 8)])
    assert judged(history2).anomaly_types == ["divergent-reads", "stale-write"]


def test_a_duplicate_in_an_earlier_read_does_not_hide_a_divergent_reads_stale_write() -> None:
    # [a, a] then [a, b]: the reference's second a is a duplicate's row, which says nothing of
    # a's write; b (epoch 7) after a (epoch 8) is still a stale write, and b was sent after a's
    # acknowledgement, so the order breaks real time too.
    history = HistoryBuilder().acquire("w1", 1, 7).acquire("w2", 2, 8)
    history.write("w2", 2, "a", 8).read("w3", 3, [("a", 8), ("a", 8)]).write("w1", 1, "b", 7)
    history.read("w3", 3, [("a", 8), ("b", 7)])
    result = judged(history)
    assert {"divergent-reads", "duplicate-write", "stale-write"} <= set(result.anomaly_types)
    assert "realtime-order" not in result.anomaly_types  # b after a: real time agrees
    history = HistoryBuilder().acquire("w1", 1, 7).acquire("w2", 2, 7)
    history.write("w2", 2, "a", 7).read("w3", 3, [("a", 7), ("a", 7)]).write("w1", 1, "b", 7)
    history.read("w3", 3, [("b", 7), ("a", 7)])
    assert "realtime-order" in judged(history).anomaly_types


def test_a_write_shown_before_it_was_sent_is_a_phantom_then_and_not_lost_later() -> None:
    history = HistoryBuilder().acquire("w1", 1, 5).read("w3", 3, [("b", 5)])
    history.write("w1", 1, "b", 5).read("w3", 3, [("b", 5)])
    assert judged(history).anomaly_counts == {"phantom-write": 1}


def test_a_divergent_read_does_not_hide_phantoms_lost_updates_or_seq_staleness() -> None:
    # The reference is [a]; a forked read shows [x, p, q, f, s]: f failed (a phantom), x was
    # never sent here (a phantom), p and q are based on one read (a lost update), and s sits
    # after w3's epoch-8 write on k2 in the store's seq order (a stale write).
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "a", 7)
    history.write("w1", 1, "p", 7, prev="a").write("w1", 1, "q", 7, prev="a")
    history.write("w1", 1, "f", 7, "fail", error="unavailable")
    history.acquire("w3", 3, 8).write("w3", 3, "n", 8, key="k2").send("w1", 1, "s", 7)
    history.done("w1", 1, "s")
    seq_read(history, "k2", [("n", 8, 10)])
    history.read("w1", 1, [("a", 7)])
    seq_read(history, "k", [("x", 7, 1), ("p", 7, 2), ("q", 7, 3), ("f", 7, 4), ("s", 7, 11)])
    result = judged(history, inventory={"store": Sink("store", True, seq=True)})
    assert result.anomaly_counts == {
        "divergent-reads": 1,
        "phantom-write": 2,
        "lost-update": 1,
        "stale-write": 1,
        "lost-write": 1,  # a, missing from the final read
    }
    reasons = {anomaly.details["reason"] for anomaly in result.anomalies["phantom-write"]}
    assert reasons == {"failed", "unknown"}


def test_a_write_only_a_divergent_read_shows_is_judged_in_real_time_too() -> None:
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "a", 7)
    # c's outcome is unknown (info): only the forked read shows that the store accepted it.
    history.acquire("w2", 2, 8).write("w2", 2, "b", 8, key="k2").write("w1", 3, "c", 7, "info")
    history.read("w1", 1, [("a", 7)]).read("w1", 1, [("b", 8)], key="k2")
    history.read("w1", 1, [("c", 7)])
    result = judged(history)
    assert result.anomaly_counts["stale-write"] == 1
    assert result.anomalies["stale-write"][0].details["rule"] == "realtime"


def test_a_lost_update_whose_first_write_sits_before_its_prev_is_found() -> None:
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "x", 7)
    history.write("w1", 1, "a", 7, prev="x").write("w1", 1, "b", 7, prev="x")
    history.read("w1", 1, [("a", 7), ("x", 7), ("b", 7)])
    assert "lost-update" in judged(history).anomaly_types


# -- 5. ties: on equal times the index decides --------------------------------------------------


def test_a_write_completed_at_the_same_time_another_began_precedes_it() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1)
    history.at(history.events[-1].time // MS - 1).send("w1", 2, "b", 1)
    assert history.events[-1].time == history.events[-2].time
    history.done("w1", 2, "b").read("w1", 1, [("b", 1), ("a", 1)])
    only(judged(history), "realtime-order")


def test_equal_times_across_keys_make_a_stale_write() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).acquire("w3", 3, 8)
    history.write("w3", 3, "new", 8, key="k1")
    history.at(history.events[-1].time // MS - 1).send("w2", 2, "old", 7, key="k2")
    history.done("w2", 2, "old")
    history.read("w1", 1, [("new", 8)], key="k1").read("w1", 1, [("old", 7)], key="k2")
    only(judged(history), "stale-write")


# -- 6. numbers of any size ---------------------------------------------------------------------


@pytest.mark.parametrize("base", [2**63, 2**64, 10**30])
def test_epochs_and_times_beyond_64_bits_are_judged_exactly(base: int) -> None:
    history = HistoryBuilder().at(base // MS).acquire("w1", 1, base).acquire("w2", 2, base + 1)
    history.write("w2", 2, "b", base + 1).write("w1", 1, "a", base)
    history.read("w1", 1, [("b", base + 1), ("a", base)])
    result = judged(history)
    assert result.anomaly_types == ["stale-write"]
    assert result.anomalies["stale-write"][0].ops[1].epoch == base
    valid = HistoryBuilder().at(base // MS).acquire("w1", 1, base).write("w1", 1, "a", base)
    valid.read("w1", 1, [("a", base)])
    assert judged(valid).valid is True


# -- 10. explanations name only the faults that could have caused the anomaly --------------------


def test_faults_after_the_violation_or_on_other_holders_are_not_named() -> None:
    history = (
        HistoryBuilder()
        .acquire("w2", 2, 7)
        .send("w2", 2, "w2-15", 7)
        .nemesis("start-pause", "w2")
        .nemesis("start-pause", "w9")
        .acquire("w3", 3, 8)
        .write("w3", 3, "w3-4", 8)
        .nemesis("stop-pause", "w2")
        .nemesis("stop-pause", "w9")
        .done("w2", 2, "w2-15")
        .nemesis("start-kill", "store")
        .nemesis("stop-kill", "store")
        .read("w1", 1, [("w3-4", 8), ("w2-15", 7)])
    )
    history.event(9, "invoke", "read", {"sink": "other", "key": "k"}, node="w9")
    anomaly = judged(history).anomalies["stale-write"][0]
    assert [(w.kind, w.targets) for w in anomaly.faults] == [("pause", ("w2",))]


def test_a_compound_fault_says_each_part() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).send("w2", 2, "w2-15", 7)
    history.at(5899).nemesis("start-restart-while-paused", "w2", restart="store")
    history.acquire("w3", 3, 8).write("w3", 3, "w3-4", 8)
    history.at(8999).nemesis(
        "stop-restart-while-paused", "w2", restart="store", scheduled=8_400_000_000
    )
    history.done("w2", 2, "w2-15").read("w1", 1, [("w3-4", 8), ("w2-15", 7)])
    explanation = only(judged(history), "stale-write")
    assert explanation.endswith(
        "w2 was paused from 5.9 s to 9 s; store was killed at 8.4 s and listening again at 9 s"
    )
    window = judged(history).faults[0]
    assert [part.kind for part in window.parts] == ["pause", "restarted"]
    assert window.to_json()["parts"][1]["targets"] == ["store"]


def test_a_restart_inside_the_pause_is_told_at_its_own_moments() -> None:
    history = HistoryBuilder().acquire("w2", 2, 7).send("w2", 2, "w2-15", 7)
    history.at(5899).nemesis("start-restart-while-paused", "w2", restart="store")
    history.acquire("w3", 3, 8).write("w3", 3, "w3-4", 8)
    history.at(8999).nemesis(
        "stop-restart-while-paused",
        "w2",
        restart="store",
        scheduled=8_999_000_000,
        step_scheduled=6_500_000_000,
        step_confirmed=7_200_000_000,
    )
    history.done("w2", 2, "w2-15").read("w1", 1, [("w3-4", 8), ("w2-15", 7)])
    assert only(judged(history), "stale-write").endswith(
        "w2 was paused from 5.9 s to 9 s; store was killed at 6.5 s and listening again at 7.2 s"
    )


def test_a_fault_is_described_in_the_words_its_history_recorded() -> None:
    window = FaultWindow("pause", ("w2",), 12_100_000_000, 18_400_000_000, 1, 2, verb="paused")
    assert describe_fault(window) == "w2 was paused from 12.1 s to 18.4 s"
    # A kind the checker has never heard of, recorded without words, is still explained.
    unknown = FaultWindow("clock-skew", ("w1",), 1_000_000_000, 2_000_000_000, 3, 4)
    assert describe_fault(unknown) == "clock-skew on w1 from 1 s to 2 s"
    # A fault whose events said what happened (the clock kinds) is told in their sentences.
    step = FaultWindow(
        "clock-step",
        ("l1",),
        12_100_000_000,
        15_400_000_000,
        5,
        6,
        verb="clock-stepped",
        opened="l1's clock jumped 3 s forward",
        closed="l1's clock jumped 3 s back",
    )
    assert describe_fault(step) == (
        "l1's clock jumped 3 s forward at 12.1 s, and l1's clock jumped 3 s back at 15.4 s"
    )
    # A fault whose stop alone said what it saw (a hold: which write, how long) adds it.
    hold = FaultWindow(
        "hold",
        ("w2",),
        1_425_000_000,
        2_486_000_000,
        7,
        8,
        verb="held",
        closed="w2's write w2-13 (epoch 2) was held 1.03 s",
    )
    assert describe_fault(hold) == (
        "w2 was held from 1.425 s to 2.486 s (w2's write w2-13 (epoch 2) was held 1.03 s)"
    )


# -- 11. the anomaly registry -------------------------------------------------------------------


def test_every_anomaly_has_a_meaning_a_renderer_a_detector_and_a_subject() -> None:
    assert tuple(REGISTRY) == ANOMALY_NAMES
    assert "wrongful-refusal" in ANOMALY_NAMES
    for kind in REGISTRY.values():
        assert kind.meaning and kind.meaning[0].islower() and not kind.meaning.endswith(".")
        assert callable(kind.render) and kind.render.__doc__
        assert kind.subject
        for module in kind.detector.split(", "):
            source = __import__(module, fromlist=["_"]).__file__
            assert source is not None
            with open(source) as text:
                assert kind.name in text.read(), f"{module} does not report {kind.name}"


def test_what_an_unguarded_sink_expects_agrees_with_the_registry() -> None:
    expected = {kind.name for kind in REGISTRY.values() if kind.expected_when_unguarded}
    assert expected == EXPECTED_WHEN_UNGUARDED


def test_the_sink_constructor_stays_backward_compatible() -> None:
    sink = Sink("store", True, "none", "a store")
    assert (sink.seq, sink.description) == (False, "a store")
    assert Sink("s", fenced=False, mitigation="lock-delay", seq=True).seq is True


def test_checkers_import_only_the_history_layer_of_the_harness() -> None:
    import ast
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2] / "checkers"
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert top not in {"nemeses", "systems", "workloads", "tests"}, path
                if top == "harness":
                    assert name.startswith("harness.record"), (path, name)


def test_event_is_unchanged_for_callers() -> None:
    assert Event(0, 0, 1, "invoke", "read").node is None


def test_the_docs_list_every_anomaly_as_the_registry_defines_it() -> None:
    import pathlib

    from checkers.registry import markdown_table

    docs = pathlib.Path(__file__).resolve().parents[2] / "docs" / "checker.md"
    text = docs.read_text()
    begin = text.index("<!-- anomalies: generated from checkers/registry.py -->\n")
    end = text.index("\n<!-- end anomalies -->")
    assert text[begin:end].split("\n", 1)[1] == markdown_table()


# -- the design points of docs/design.md §5 that the event order used to decide (issue 27) ----


def test_a_reacquire_invoked_while_the_grant_stood_is_a_reentry_whenever_the_release_lands() -> (
    None
):
    # w1's release completes while its re-acquire waits: the service may have applied it after
    # the re-acquire, so the same epoch is a re-entry, not a reuse.
    history = HistoryBuilder().acquire("w1", 1, 5)
    history.event(2, "invoke", "acquire", {"lock": "L"}, node="w1")
    history.release("w1", 1)
    history.event(2, "ok", "acquire", {"lock": "L", "epoch": 5}, node="w1")
    history.write("w1", 2, "a", 5).read("w1", 2, [("a", 5)])
    assert judged(history).valid is True
    after = HistoryBuilder().acquire("w1", 1, 5).release("w1", 1).acquire("w1", 1, 5)
    after.write("w1", 1, "a", 5).read("w1", 1, [("a", 5)])
    assert judged(after).anomaly_types == ["epoch-reuse", "grant-regression"]


def test_lost_updates_among_writes_no_read_shows_are_lost_writes_not_lost_updates() -> None:
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "x", 7)
    history.write("w1", 1, "a", 7, prev="x").write("w1", 1, "b", 7, prev="x")
    history.read("w1", 1, [("x", 7)])
    result = judged(history)
    assert result.anomaly_counts == {"lost-write": 2}


def test_a_repeated_entry_is_judged_at_its_first_position_only() -> None:
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "a", 7)
    history.acquire("w2", 2, 8).write("w2", 2, "b", 8)
    history.read("w1", 1, [("a", 7), ("b", 8), ("a", 7)])
    assert only(judged(history), "duplicate-write")


def test_the_final_read_is_the_one_begun_last_whichever_answers_last() -> None:
    def overlapping(second_shows: bool) -> HistoryBuilder:
        history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "a", 7)
        history.event(3, "invoke", "read", {"sink": "store", "key": "k"}, node="w3")
        history.write("w1", 1, "b", 7)
        later = [("a", 7), ("b", 7)] if second_shows else [("a", 7)]
        history.read("w2", 2, later)  # begun after b's ack, answered first
        entries = [{"id": "a", "epoch": 7}]
        history.event(3, "ok", "read", {"sink": "store", "key": "k", "entries": entries})
        return history

    assert judged(overlapping(second_shows=True)).valid is True
    assert only(judged(overlapping(second_shows=False)), "lost-write")


def test_a_retry_is_exempt_only_by_the_holders_latest_grant_completed_after_the_refusal() -> None:
    def refused_then_regranted() -> HistoryBuilder:
        history = HistoryBuilder().acquire("w1", 1, 5).acquire("w2", 2, 6)
        history.write("w2", 2, "b", 6).write("w1", 1, "a", 5, "fail", error="stale-epoch")
        return history.acquire("w1", 1, 5)  # the service grants 5 again after the refusal

    exempt = refused_then_regranted().write("w1", 1, "c", 5)
    assert "retry-after-reject" not in judged(exempt).anomaly_types
    older = refused_then_regranted().acquire("w1", 1, 7).write("w1", 1, "c", 5)
    assert "retry-after-reject" in judged(older).anomaly_types
