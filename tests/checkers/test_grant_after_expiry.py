"""grant-after-expiry: a grant answered after the holder's own session saw its lease end, judged
in the lock service's order so that a reply the network merely delayed is not counted.

The property tests play a small lock service of their own: the service's events (grants, and the
ends of waiters' leases) in one list, each waiter's grant answered late when its session saw its
lease end. Which grants came after their holder's lease ended is read off that list, not from
the numbers the checker compares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers import check
from harness.record import Event, HistoryError
from tests.checkers.test_checker_anomalies import HistoryBuilder, judged, only

NAME = "grant-after-expiry"


def first_grant() -> HistoryBuilder:
    """w1 is granted L first: epoch 1, grant_seq 1."""
    history = HistoryBuilder()
    history.event(1, "invoke", "acquire", {"lock": "L"}, node="w1")
    history.event(1, "ok", "acquire", {"lock": "L", "epoch": 1, "grant_seq": 1}, node="w1")
    return history


def waited_grant(
    history: HistoryBuilder, epoch: int, grant_seq: int | None, ended: dict[str, Any]
) -> HistoryBuilder:
    """w2 waits for L; its session sees the lease end (``ended``), then its grant is answered,
    then it writes under it and a read shows the write."""
    history.event(2, "invoke", "acquire", {"lock": "L"}, node="w2")
    value: dict[str, Any] = {"lock": "L", "epoch": epoch, "lease_ended": ended}
    if grant_seq is not None:
        value["grant_seq"] = grant_seq
    history.event(2, "ok", "acquire", value, node="w2")
    history.write("w2", 2, "b", epoch)
    history.read("w3", 3, [("b", epoch)])
    return history


def test_a_grant_made_after_the_service_ended_the_lease_is_counted() -> None:
    history = first_grant()
    ended = {"after": 3_000_000, "how": "expired", "grant_seq": 1}
    sentence = only(judged(waited_grant(history, 2, 2, ended)), NAME)
    assert sentence.startswith("the lock service granted L to w2 (grant_seq 2, epoch 2, answered")
    assert "its session was told its lease had expired at 0.006 s" in sentence
    assert "when the service's grant_seq was 1" in sentence


def test_a_grant_the_service_made_before_the_lease_ended_is_a_late_reply() -> None:
    history = first_grant()
    ended = {"after": 3_000_000, "how": "expired", "grant_seq": 2}
    result = judged(waited_grant(history, 2, 2, ended))
    assert result.valid is True
    assert result.grant_coverage == ()


def test_evidence_without_a_grant_seq_is_not_judged_and_says_so() -> None:
    history = first_grant()
    result = judged(waited_grant(history, 2, 2, {"after": 3_000_000, "how": "lost"}))
    assert result.valid is True
    assert "grant-after-expiry was not judged" in result.grant_coverage[-1]


@pytest.mark.parametrize(
    "ended",
    [5, {"how": "expired"}, {"after": -1, "how": "expired"}, {"after": 1, "how": "gone"}],
)
def test_a_malformed_lease_ended_is_refused(ended: Any) -> None:
    history = first_grant()
    with pytest.raises(HistoryError, match="lease_ended"):
        judged(waited_grant(history, 2, 2, ended))


@dataclass(frozen=True)
class Service:
    """One lock service's run: ``order`` is its own sequence of events, ``("grant", h)`` or
    ``("end", h)`` (the service ended waiter ``h``'s lease); ``header`` adds, per holder, how many
    later grants the answer that told the session also counted (a revision in a reply header)."""

    holders: int
    order: tuple[tuple[str, int], ...]
    header: tuple[int, ...]

    def late_grants(self) -> set[int]:
        """The holders the service granted after it had ended their lease: the truth."""
        ended: set[int] = set()
        late: set[int] = set()
        for what, holder in self.order:
            if what == "end":
                ended.add(holder)
            elif holder in ended:
                late.add(holder)
        return late


@st.composite
def services(draw: st.DrawFn) -> Service:
    holders = draw(st.integers(2, 5))
    grants = draw(st.permutations(range(holders)))
    order: list[tuple[str, int]] = [("grant", holder) for holder in grants]
    for holder in draw(st.sets(st.sampled_from(range(holders)))):
        order.insert(draw(st.integers(0, len(order))), ("end", holder))
    header = tuple(draw(st.integers(0, 3)) for _ in range(holders))
    return Service(holders, tuple(order), header)


def history_of(service: Service, *, exact: bool, with_seq: bool = True) -> list[Event]:
    """Every holder asks at once; the service answers in its order, except that a holder whose
    session saw its lease end hears of its grant only after that (the reply was held)."""
    history = HistoryBuilder()
    for holder in range(service.holders):
        history.event(holder, "invoke", "acquire", {"lock": "L"}, node=f"w{holder}")
    seqs: dict[int, int] = {}
    stamps: dict[int, int] = {}
    for what, holder in service.order:
        if what == "grant":
            seqs[holder] = len(seqs) + 1
        else:
            counted = len(seqs) + (0 if exact else service.header[holder])
            stamps[holder] = min(counted, service.holders)
    answered = [holder for what, holder in service.order if what == "grant"]
    on_time = [holder for holder in answered if holder not in stamps]
    for holder in on_time + [holder for holder in answered if holder in stamps]:
        value: dict[str, Any] = {"lock": "L", "epoch": seqs[holder]}
        if with_seq:
            value["grant_seq"] = seqs[holder]
        if holder in stamps:
            ended: dict[str, Any] = {"after": 0, "how": "expired"}
            if with_seq:
                ended["grant_seq"] = stamps[holder]
            value["lease_ended"] = ended
        history.event(holder, "ok", "acquire", value, node=f"w{holder}")
    last = max(seqs, key=seqs.__getitem__)
    history.write(f"w{last}", last, "x", seqs[last])
    history.read("r", service.holders, [("x", seqs[last])])
    return history.events


def reported(events: list[Event]) -> set[int]:
    result = check(events)
    assert set(result.anomaly_counts) <= {NAME}
    return {int(a.op("granted").node[1:]) for a in result.anomalies.get(NAME, ())}  # type: ignore[union-attr]


@settings(max_examples=300, deadline=None)
@given(services())
def test_with_the_service_s_sequence_at_the_lease_s_end_exactly_the_late_grants_count(
    service: Service,
) -> None:
    assert reported(history_of(service, exact=True)) == service.late_grants()


@settings(max_examples=300, deadline=None)
@given(services())
def test_a_sequence_counted_later_than_the_end_never_blames_a_delayed_reply(
    service: Service,
) -> None:
    assert reported(history_of(service, exact=False)) <= service.late_grants()


@settings(max_examples=100, deadline=None)
@given(services())
def test_without_grant_seq_nothing_is_blamed_and_the_coverage_says_so(service: Service) -> None:
    events = history_of(service, exact=True, with_seq=False)
    result = check(events)
    assert NAME not in result.anomaly_counts
    evidence = any(what == "end" for what, _ in service.order)
    assert any("not judged" in note for note in result.grant_coverage) == evidence


# -- a hold of the lock service's replies (the `hold` fault on the lock path) -----------------

TTL_MS = 1000
MS = 1_000_000


@st.composite
def held_replies(draw: st.DrawFn) -> list[Event]:
    """A correct service grants L to holders 1..n in turn, each lease beginning ``waited`` after
    its request and lasting a TTL; a hold on the lock path delays each grant's reply by ``hold``
    ms. A holder whose reply was held past its lease hears, from its session, that the lease
    expired, before the grant reaches it, with the service's ``grant_seq`` at or after its own
    grant (the service ended the lease after granting it; a header may count later grants too).
    Replies reach the holders in any order, long after later grants completed."""
    holders = draw(st.integers(1, 5))
    history = HistoryBuilder()
    for holder in range(1, holders + 1):
        history.event(holder, "invoke", "acquire", {"lock": "L"}, node=f"w{holder}")
    invoked = history.events[-1].time // MS
    replies: list[tuple[int, int, dict[str, Any]]] = []
    began = invoked
    for holder in range(1, holders + 1):
        began += draw(st.integers(0, 2 * TTL_MS))  # the lease begins (the service grants)
        hold = draw(st.integers(0, 5 * TTL_MS))
        value: dict[str, Any] = {
            "lock": "L",
            "epoch": holder,
            "grant_seq": holder,
            "waited": (began - invoked) * MS,
        }
        if hold > TTL_MS:
            # Its session heard the end a TTL after the lease began, before the reply came.
            counted = holder + draw(st.integers(0, holders - holder))
            heard = began + TTL_MS + draw(st.integers(0, hold - TTL_MS))
            value["lease_ended"] = {
                "after": (heard - invoked) * MS,
                "how": draw(st.sampled_from(["expired", "lost"])),
                "grant_seq": counted,
            }
        replies.append((began + hold, holder, value))
        began += TTL_MS  # the next lease begins once this one ran out
    for when, holder, value in sorted(replies):
        history.at(when).event(holder, "ok", "acquire", value, node=f"w{holder}")
    return history.events


@settings(max_examples=300, deadline=None)
@given(held_replies())
def test_a_held_reply_is_never_a_grant_after_expiry(events: list[Event]) -> None:
    assert NAME not in check(events).anomaly_counts
