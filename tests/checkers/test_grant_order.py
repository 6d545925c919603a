"""The lock service's own order of grants (``grant_seq``): grant-regression and epoch-reuse in
that order, stale-holder-accepted, current-holder-refused, and the coverage without it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers import check
from harness.record import Event, HistoryError
from tests.checkers.test_checker_anomalies import HistoryBuilder, judged

_SERVICE_RULES = frozenset(("grant-regression", "stale-holder-accepted", "current-holder-refused"))


def waiting_grants(history: HistoryBuilder, grants: list[tuple[str, int, int, int | None]]) -> None:
    """Acquires that all wait at once (so real time orders none of them), then are answered in
    the order given: ``(node, process, epoch, grant_seq)``."""
    for node, process, _, _ in grants:
        history.event(process, "invoke", "acquire", {"lock": "L"}, node=node)
    for node, process, epoch, seq in grants:
        value: dict[str, Any] = {"lock": "L", "epoch": epoch}
        if seq is not None:
            value["grant_seq"] = seq
        history.event(process, "ok", "acquire", value, node=node)


def tokens_before_the_lease(*, with_seq: bool) -> HistoryBuilder:
    """A lock service that draws the token before the lease is won: w2 drew 6 and won first
    (grant_seq 1), w1 drew 5 and won after it (grant_seq 2). The fence then keeps the superseded
    w2 writing and refuses the current holder w1."""
    history = HistoryBuilder()
    waiting_grants(
        history, [("w2", 2, 6, 1 if with_seq else None), ("w1", 1, 5, 2 if with_seq else None)]
    )
    history.write("w2", 2, "b", 6).write("w1", 1, "a", 5, "fail", error="stale-epoch")
    history.read("w3", 3, [("b", 6)])
    return history


def test_tokens_against_the_lease_order_are_caught_only_through_grant_seq() -> None:
    result = judged(tokens_before_the_lease(with_seq=True))
    assert result.anomaly_counts == {
        "grant-regression": 1,
        "stale-holder-accepted": 1,
        "current-holder-refused": 1,
    }
    assert result.grant_seq_observable is True
    assert result.grant_coverage == ()
    regression = result.anomalies["grant-regression"][0].explanation
    assert regression.startswith(
        "the lock service ordered w1's grant of L (grant_seq 2, answered at"
    )
    assert "after w2's (grant_seq 1, epoch 6," in regression
    accepted = result.anomalies["stale-holder-accepted"][0].explanation
    assert accepted.startswith("store/k accepted w2's write b (epoch 6), sent at")
    assert "granted L to w1 (grant_seq 2, epoch 5" in accepted
    refused = result.anomalies["current-holder-refused"][0].explanation
    assert refused.startswith("store/k refused w1's write a (epoch 5) as stale at")
    stripped = judged(tokens_before_the_lease(with_seq=False))
    assert stripped.valid is True  # the history cannot tell a late reply from a wrong grant
    assert stripped.grant_seq_observable is False
    assert "grant order not observable" in stripped.grant_coverage[0]
    assert stripped.to_json()["grants"]["coverage"] == list(stripped.grant_coverage)


def test_grants_whose_epochs_follow_the_service_order_are_valid() -> None:
    history = HistoryBuilder()
    waiting_grants(history, [("w2", 2, 5, 10), ("w1", 1, 6, 11)])
    history.write("w1", 1, "a", 6).write("w2", 2, "b", 5, "fail", error="stale-epoch")
    history.read("w3", 3, [("a", 6)])
    result = judged(history)
    assert result.valid is True
    assert result.grant_seq_observable is True


def test_a_superseded_holders_lower_epoch_is_the_fences_to_refuse_not_the_service_rule() -> None:
    history = HistoryBuilder()
    waiting_grants(history, [("w2", 2, 5, 1), ("w1", 1, 6, 2)])
    history.write("w2", 2, "b", 5).write("w1", 1, "a", 6).read("w3", 3, [("b", 5), ("a", 6)])
    assert judged(history).valid is True


def test_a_re_entry_keeps_its_grant_and_some_grants_without_grant_seq_are_named() -> None:
    history = HistoryBuilder()
    waiting_grants(history, [("w1", 1, 5, 1)])
    waiting_grants(history, [("w1", 1, 5, 1), ("w2", 2, 6, None)])
    history.write("w2", 2, "a", 6).read("w3", 3, [("a", 6)])
    result = judged(history)
    assert result.valid is True
    assert result.grant_coverage[0].startswith("1 of 3 grants carried no grant_seq")


def test_the_same_epoch_under_another_grant_seq_is_a_new_grant_not_a_re_entry() -> None:
    history = HistoryBuilder()
    waiting_grants(history, [("w1", 1, 5, 1)])
    waiting_grants(history, [("w1", 1, 5, 2)])
    history.write("w1", 1, "a", 5).read("w3", 3, [("a", 5)])
    assert judged(history).anomaly_counts == {"epoch-reuse": 1, "grant-regression": 1}


@pytest.mark.parametrize("bad", [-1, "3", 1.5])
def test_a_malformed_grant_seq_is_refused_naming_the_line(bad: object) -> None:
    history = HistoryBuilder()
    history.event(1, "invoke", "acquire", {"lock": "L"}, node="w1")
    history.event(1, "ok", "acquire", {"lock": "L", "epoch": 1, "grant_seq": bad}, node="w1")
    with pytest.raises(HistoryError, match="grant_seq must be an integer >= 0") as caught:
        check(history.events)
    assert caught.value.line == 2


# -- against a small independent model --------------------------------------------------------


def model(grants: list[tuple[int, int]], answered: list[int], outcomes: list[bool]) -> set[str]:
    """What the service-order rules must find: holder ``h`` has ``grants[h] = (epoch, seq)``;
    every grant is answered before any write; holder ``h`` then writes with its epoch, accepted
    when ``outcomes[h]``, refused as stale otherwise."""
    found: set[str] = set()
    for (e1, s1), (e2, s2) in itertools.combinations(grants, 2):
        if (s1 < s2) != (e1 < e2):
            found.add("grant-regression")
    latest = max(range(len(grants)), key=lambda h: grants[h][1])
    for h, (epoch, seq) in enumerate(grants):
        later = [e for g, (e, s) in enumerate(grants) if g != h and s > seq]
        if outcomes[h] and any(epoch >= e for e in later):
            found.add("stale-holder-accepted")
        if not outcomes[h] and h == latest:
            found.add("current-holder-refused")
    del answered  # the answer order must not matter: that is the point of grant_seq
    return found


@st.composite
def service_histories(draw: st.DrawFn) -> tuple[list[Event], set[str]]:
    holders = draw(st.integers(2, 5))
    epochs = draw(st.permutations(range(1, holders + 1)))
    seqs = draw(st.permutations(range(100, 100 + holders)))
    grants = list(zip(epochs, seqs, strict=True))
    answered = draw(st.permutations(range(holders)))
    outcomes = draw(st.lists(st.booleans(), min_size=holders, max_size=holders))
    history = HistoryBuilder()
    waiting_grants(
        history,
        [(f"w{h}", h, grants[h][0], grants[h][1]) for h in answered],
    )
    for h in draw(st.permutations(range(holders))):
        if outcomes[h]:
            history.write(f"w{h}", h, f"x{h}", grants[h][0])
        else:
            history.write(f"w{h}", h, f"x{h}", grants[h][0], "fail", error="stale-epoch")
    return history.events, model(grants, answered, outcomes)


@settings(max_examples=300, deadline=None)
@given(service_histories())
def test_the_service_order_rules_agree_with_a_small_model(
    case: tuple[list[Event], set[str]],
) -> None:
    events, expected = case
    found = set(check(events).anomaly_types) & _SERVICE_RULES
    assert found == expected


def test_waited_makes_the_lease_start_late_enough_to_order_grants_in_real_time() -> None:
    def history(waited: int | None) -> HistoryBuilder:
        # w1 waits for the lock; meanwhile w2 is granted 6 (and writes). w1's lease began after
        # that grant completed, yet it carries 5.
        built = HistoryBuilder()
        built.event(1, "invoke", "acquire", {"lock": "L"}, node="w1")
        built.acquire("w2", 2, 6).write("w2", 2, "b", 6).release("w2", 2)
        value: dict[str, Any] = {"lock": "L", "epoch": 5}
        if waited is not None:
            value["waited"] = waited
        built.event(1, "ok", "acquire", value, node="w1")
        return built.read("w3", 3, [("b", 6)])

    assert judged(history(None)).valid is True  # the overlap lets w1 be linearized first
    caught = judged(history(5_500_000))  # 5.5 ms: past w2's grant, answered at 3 ms
    assert caught.anomaly_counts == {"grant-regression": 1}
    assert "w1's lease of L began at 0.006 s (its acquire, sent at 0.001 s, waited)" in (
        caught.anomalies["grant-regression"][0].explanation
    )
    assert judged(history(1_000_000)).valid is True  # began before w2's grant completed
    with pytest.raises(HistoryError, match="waited must be an integer >= 0"):
        judged(history(-1))
