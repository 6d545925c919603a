"""One small hand-built history per rule of docs/design.md §5, and the cases each rule must
allow."""

from __future__ import annotations

from typing import Any

import pytest

from checkers import Verdict, check
from harness.record import NEMESIS, Event, EventType, Sink
from tests.support.simulation import recorded_words

MS = 1_000_000


class HistoryBuilder:
    """Appends events with increasing indexes; each event is 1 ms after the previous one."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._clock = 0

    def event(
        self,
        process: int | str,
        type: EventType,
        f: str,
        value: dict[str, Any] | None = None,
        *,
        node: str | None = None,
        error: str | None = None,
    ) -> Event:
        """Append one raw event."""
        self._clock += MS
        index = len(self.events)
        event = Event(index, self._clock, process, type, f, value or {}, node, error, index + 1)
        self.events.append(event)
        return event

    def at(self, ms: int) -> HistoryBuilder:
        """Move the clock so that the next event happens 1 ms after ``ms``."""
        self._clock = ms * MS
        return self

    def acquire(self, node: str, process: int, epoch: int, lock: str = "L") -> HistoryBuilder:
        """An acquire that grants ``epoch``."""
        self.event(process, "invoke", "acquire", {"lock": lock}, node=node)
        self.event(process, "ok", "acquire", {"lock": lock, "epoch": epoch}, node=node)
        return self

    def release(self, node: str, process: int, lock: str = "L") -> HistoryBuilder:
        """A successful release."""
        self.event(process, "invoke", "release", {"lock": lock}, node=node)
        self.event(process, "ok", "release", {"lock": lock}, node=node)
        return self

    def send(
        self,
        node: str,
        process: int,
        wid: str,
        epoch: int,
        *,
        key: str = "k",
        sink: str = "store",
        lock: str = "L",
        prev: str | None = None,
    ) -> HistoryBuilder:
        """The invoke of a write (complete it with :meth:`done`)."""
        value: dict[str, Any] = {"lock": lock, "sink": sink, "key": key, "id": wid, "epoch": epoch}
        if prev is not None:
            value["prev"] = prev
        self.event(process, "invoke", "write", value, node=node)
        return self

    def done(
        self, node: str, process: int, wid: str, type: EventType = "ok", error: str | None = None
    ) -> HistoryBuilder:
        """Complete the write ``wid`` invoked by ``process``."""
        invoke = next(e for e in reversed(self.events) if e.f == "write" and e.value["id"] == wid)
        self.event(process, type, "write", dict(invoke.value), node=node, error=error)
        return self

    def write(
        self,
        node: str,
        process: int,
        wid: str,
        epoch: int,
        type: EventType = "ok",
        *,
        error: str | None = None,
        key: str = "k",
        sink: str = "store",
        lock: str = "L",
        prev: str | None = None,
    ) -> HistoryBuilder:
        """A write, invoked and completed at once."""
        self.send(node, process, wid, epoch, key=key, sink=sink, lock=lock, prev=prev)
        return self.done(node, process, wid, type, error)

    def read(
        self,
        node: str,
        process: int,
        entries: list[tuple[str, int]],
        *,
        key: str = "k",
        sink: str = "store",
    ) -> HistoryBuilder:
        """A successful read returning ``(id, epoch)`` entries."""
        self.event(process, "invoke", "read", {"sink": sink, "key": key}, node=node)
        listed = [{"id": wid, "epoch": epoch} for wid, epoch in entries]
        self.event(process, "ok", "read", {"sink": sink, "key": key, "entries": listed}, node=node)
        return self

    def nemesis(self, f: str, *targets: str, **extra: Any) -> HistoryBuilder:
        """A nemesis event aimed at ``targets``, worded as the player records it."""
        self.event(NEMESIS, "info", f, {"targets": list(targets), **recorded_words(f), **extra})
        return self


def judged(history: HistoryBuilder, **options: object) -> Verdict:
    return check(history.events, **options)  # type: ignore[arg-type]


def only(result: Verdict, name: str) -> str:
    """Assert ``name`` is the one anomaly that counts, once; return its explanation."""
    assert result.valid is False
    assert result.anomaly_types == [name]
    assert result.anomaly_counts == {name: 1}
    return result.anomalies[name][0].explanation


def two_holders() -> HistoryBuilder:
    return HistoryBuilder().acquire("w1", 1, 7).acquire("w2", 2, 8)


# -- stale-write -------------------------------------------------------------------------------


def test_stale_write_after_a_pause_is_explained_with_the_pause() -> None:
    history = (
        HistoryBuilder()
        .acquire("w2", 2, 7)
        .send("w2", 2, "w2-15", 7)
        .nemesis("start-pause", "w2")
        .acquire("w3", 3, 8)
        .write("w3", 3, "w3-4", 8)
        .nemesis("stop-pause", "w2")
        .done("w2", 2, "w2-15")
        .read("w1", 1, [("w3-4", 8), ("w2-15", 7)])
    )
    result = judged(history, lease_ttl=2.0)
    explanation = only(result, "stale-write")
    assert explanation.startswith(
        "w2's write w2-15 (epoch 7) was accepted by fenced store/k after w3's write w3-4 (epoch 8)"
    )
    assert "w2 was paused from 0.004 s to 0.009 s" in explanation
    assert explanation.endswith("lease TTL 2 s")
    anomaly = result.anomalies["stale-write"][0]
    assert [(op.role, op.id, op.epoch, op.node) for op in anomaly.ops[:2]] == [
        ("newer", "w3-4", 8, "w3"),
        ("stale", "w2-15", 7, "w2"),
    ]
    assert anomaly.details["positions"] == [0, 1]
    assert [window.kind for window in anomaly.faults] == ["pause"]
    assert anomaly.details["cycle"][0][:2] == ["w3-4", "w2-15"]


def test_equal_epochs_from_one_holder_and_rising_epochs_are_valid() -> None:
    history = (
        two_holders()
        .write("w1", 1, "a1", 7)
        .write("w1", 1, "a2", 7)
        .write("w2", 2, "b1", 8)
        .read("w1", 1, [("a1", 7), ("a2", 7), ("b1", 8)])
    )
    assert judged(history).valid is True


def test_stale_write_on_an_unguarded_sink_is_expected_not_counted() -> None:
    history = (
        two_holders()
        .write("w2", 2, "b", 8, sink="log")
        .write("w1", 1, "a", 7, sink="log")
        .read("w1", 1, [("b", 8), ("a", 7)], sink="log")
    )
    result = judged(history, inventory={"log": Sink("log", fenced=False, mitigation="none")})
    assert result.valid is True
    assert result.anomaly_types == []
    assert result.expected_types == ["stale-write"]
    assert "unfenced (none) log/k" in result.expected["stale-write"][0].explanation
    assert result.sinks["log"].valid is True
    assert result.sinks["log"].expected == {"stale-write": 1}


def test_stale_write_behind_lock_delay_or_without_inventory_counts() -> None:
    history = (
        two_holders()
        .write("w2", 2, "b", 8)
        .write("w1", 1, "a", 7)
        .read("w1", 1, [("b", 8), ("a", 7)])
    )
    only(judged(history, inventory={"store": (False, "lock-delay")}), "stale-write")
    only(judged(history), "stale-write")
    assert judged(history).sinks["store"].valid is False


# -- epoch-reuse and grant-regression ---------------------------------------------------------


def test_one_epoch_granted_to_two_concurrent_acquires_is_epoch_reuse() -> None:
    history = HistoryBuilder()
    history.event(1, "invoke", "acquire", {"lock": "L"}, node="w1")
    history.event(2, "invoke", "acquire", {"lock": "L"}, node="w2")
    history.event(1, "ok", "acquire", {"lock": "L", "epoch": 5}, node="w1")
    history.event(2, "ok", "acquire", {"lock": "L", "epoch": 5}, node="w2")
    history.write("w1", 1, "a", 5).read("w1", 1, [("a", 5)])
    explanation = only(judged(history), "epoch-reuse")
    assert explanation.startswith("lock L granted epoch 5 twice: to w1 at 0.003 s and to w2 at")


def test_re_entry_keeps_the_epoch_but_a_grant_after_release_must_not() -> None:
    reentry = HistoryBuilder().acquire("w1", 1, 5).acquire("w1", 1, 5)
    reentry.write("w1", 1, "a", 5).read("w1", 1, [("a", 5)])
    assert judged(reentry).valid is True
    released = HistoryBuilder().acquire("w1", 1, 5).release("w1", 1).acquire("w1", 1, 5)
    released.write("w1", 1, "a", 5).read("w1", 1, [("a", 5)])
    result = judged(released)
    assert result.anomaly_types == ["epoch-reuse", "grant-regression"]


@pytest.mark.parametrize("first", ["w1", "w2"])
def test_a_re_entry_after_two_grants_of_its_epoch_is_judged_alike_in_either_order(
    first: str,
) -> None:
    # w1 and w2 are both granted epoch 3 (an epoch-reuse); w1 re-enters with 3. Which of the two
    # grants completed first must not decide whether the re-entry is also a grant-regression.
    history = HistoryBuilder()
    history.event(1, "invoke", "acquire", {"lock": "L"}, node="w1")
    history.event(2, "invoke", "acquire", {"lock": "L"}, node="w2")
    for node in (first, "w2" if first == "w1" else "w1"):
        history.event(int(node[1]), "ok", "acquire", {"lock": "L", "epoch": 3}, node=node)
    history.acquire("w1", 1, 3).write("w1", 1, "a", 3).read("w1", 1, [("a", 3)])
    assert judged(history).anomaly_types == ["epoch-reuse"]
    history.acquire("w2", 2, 4).acquire("w1", 1, 3)  # a higher epoch first: a regression
    assert judged(history).anomaly_types == ["epoch-reuse", "grant-regression"]


def test_a_grant_begun_after_a_higher_one_completed_is_grant_regression() -> None:
    history = HistoryBuilder().acquire("w1", 1, 8).acquire("w2", 2, 3)
    history.write("w1", 1, "a", 8).read("w1", 1, [("a", 8)])
    explanation = only(judged(history, lease_ttl=1.5), "grant-regression")
    assert (
        "w2's acquire of L began at 0.003 s, after w1's grant of epoch 8 completed" in explanation
    )
    assert explanation.endswith("yet was granted epoch 3; lease TTL 1.5 s")


def test_concurrent_acquires_may_complete_in_either_epoch_order() -> None:
    history = HistoryBuilder()
    history.event(1, "invoke", "acquire", {"lock": "L"}, node="w1")
    history.event(2, "invoke", "acquire", {"lock": "L"}, node="w2")
    history.event(2, "ok", "acquire", {"lock": "L", "epoch": 9}, node="w2")
    history.event(1, "ok", "acquire", {"lock": "L", "epoch": 8}, node="w1")
    history.write("w2", 2, "b", 9).read("w2", 2, [("b", 9)])
    assert judged(history).valid is True


def test_writes_with_one_epoch_from_two_holders_are_epoch_reuse_once() -> None:
    history = (
        HistoryBuilder()
        .write("w1", 1, "a", 5)
        .write("w2", 2, "b", 5)
        .write("w2", 2, "c", 5)
        .read("w1", 1, [("a", 5), ("b", 5), ("c", 5)])
    )
    explanation = only(judged(history), "epoch-reuse")
    assert explanation == (
        "epoch 5 of lock L was accepted from two holders: w1's write a (epoch 5) and "
        "w2's write b (epoch 5)"
    )


def test_an_info_write_counts_as_accepted_only_once_a_read_shows_it() -> None:
    unseen = HistoryBuilder().write("w1", 1, "a", 5).write("w2", 2, "b", 5, "info")
    unseen.read("w1", 1, [("a", 5)])
    assert judged(unseen).valid is True
    seen = HistoryBuilder().write("w1", 1, "a", 5).write("w2", 2, "b", 5, "info")
    seen.read("w1", 1, [("a", 5), ("b", 5)])
    only(judged(seen), "epoch-reuse")


# -- lost-write and unknown --------------------------------------------------------------------


def test_an_acknowledged_write_missing_from_the_final_read_is_lost() -> None:
    history = (
        HistoryBuilder()
        .acquire("w1", 1, 1)
        .write("w1", 1, "a", 1)
        .write("w1", 1, "b", 1)
        .read("w1", 1, [("a", 1)])
    )
    explanation = only(judged(history), "lost-write")
    assert explanation.startswith("w1's write b (epoch 1) was acknowledged at 0.006 s but is")
    assert "missing from the final read of store/k, which began at 0.007 s" in explanation


def test_a_write_an_earlier_read_showed_and_the_final_read_lacks_is_lost() -> None:
    history = (
        HistoryBuilder()
        .acquire("w1", 1, 1)
        .write("w1", 1, "a", 1)
        .write("w1", 1, "b", 1)
        .read("w1", 1, [("a", 1), ("b", 1)])
        .read("w1", 1, [("a", 1)])
    )
    explanation = only(judged(history), "lost-write")
    assert "(an earlier read had shown it)" in explanation
    assert result_ops(judged(history), "lost-write") == [("lost", "b"), ("read", None)]


def result_ops(result: Verdict, name: str) -> list[tuple[str, str | None]]:
    return [(op.role, op.id) for op in result.anomalies[name][0].ops]


def test_a_write_acknowledged_after_the_final_read_began_is_unknown_not_valid() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1)
    history.send("w1", 1, "b", 1)
    history.event(2, "invoke", "read", {"sink": "store", "key": "k"}, node="w2")
    history.done("w1", 1, "b")
    entries = [{"id": "a", "epoch": 1}]
    history.event(2, "ok", "read", {"sink": "store", "key": "k", "entries": entries}, node="w2")
    result = judged(history)
    assert result.valid == "unknown"
    assert result.sinks["store"].unknown_keys == ("k",)
    assert any("never read by a read begun after them" in r for r in result.unknown_reasons)


def test_nothing_to_judge_no_read_and_failed_faults_are_unknown() -> None:
    assert judged(HistoryBuilder()).valid == "unknown"
    no_read = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1)
    assert judged(no_read).valid == "unknown"
    assert "no successful read" in judged(no_read).unknown_reasons[0]
    failed = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1)
    failed.nemesis("start-pause", "w1", applied=False).read("w1", 1, [("a", 1)])
    assert judged(failed).valid == "unknown"
    errored = HistoryBuilder().nemesis("start-partition", "w1", error="iptables: not found")
    errored.acquire("w1", 1, 1).write("w1", 1, "a", 1).read("w1", 1, [("a", 1)])
    reasons = judged(errored).unknown_reasons
    assert reasons == (
        "nemesis start-partition at line 1 (index 0) failed to apply: iptables: not found",
    )


def test_a_history_cut_short_treats_open_writes_as_info() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1)
    history.read("w1", 1, [("a", 1)]).send("w1", 1, "b", 1)
    result = judged(history)
    assert result.valid is True
    assert result.counts.ops["write"]["open"] == 1


# -- phantom-write, duplicate-write, divergent-reads --------------------------------------------


def test_a_failed_write_in_a_read_is_a_phantom() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1, "fail", error="timeout")
    history.read("w1", 1, [("a", 1)])
    explanation = only(judged(history), "phantom-write")
    assert explanation.startswith("w1's write a (epoch 1) failed (timeout) at 0.004 s yet appears")


def test_a_write_shown_while_open_that_then_fails_is_a_phantom() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).send("w1", 1, "a", 1)
    history.read("w2", 2, [("a", 1)]).done("w1", 1, "a", "fail", "unavailable")
    only(judged(history), "phantom-write")


def test_an_entry_nobody_wrote_is_a_phantom() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1)
    history.read("w1", 1, [("a", 1), ("ghost", 1)])
    explanation = only(judged(history), "phantom-write")
    assert "entry ghost appears in" in explanation and "no holder wrote it there" in explanation


def test_one_id_twice_in_a_read_is_a_duplicate() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1).write("w1", 1, "b", 1)
    history.read("w1", 1, [("a", 1), ("b", 1), ("a", 1)])
    explanation = only(judged(history), "duplicate-write")
    assert "write a appears twice in" in explanation and "(positions 0 and 2)" in explanation


def test_reads_that_are_not_prefixes_of_one_another_diverge() -> None:
    history = (
        HistoryBuilder()
        .acquire("w1", 1, 1)
        .write("w1", 1, "a", 1)
        .write("w1", 1, "b", 1)
        .write("w1", 1, "c", 1)
        .read("w1", 1, [("a", 1), ("b", 1)])
        .read("w2", 2, [("a", 1), ("c", 1), ("b", 1)])
    )
    result = judged(history)
    # The divergent read is still the sink's order at that moment: b completed before c began.
    assert result.anomaly_types == ["divergent-reads", "realtime-order"]
    explanation = result.anomalies["divergent-reads"][0].explanation
    assert "position 1 holds b in the first and c in the second" in explanation


def test_shorter_reads_that_are_prefixes_are_fine() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1).write("w1", 1, "b", 1)
    history.event(2, "invoke", "read", {"sink": "store", "key": "k"}, node="w2")
    history.read("w1", 1, [("a", 1), ("b", 1)])
    history.event(
        2,
        "ok",
        "read",
        {"sink": "store", "key": "k", "entries": [{"id": "a", "epoch": 1}]},
        node="w2",
    )
    history.read("w1", 1, [("a", 1), ("b", 1)])
    assert judged(history).valid is True


# -- realtime-order ----------------------------------------------------------------------------


def test_a_write_ordered_before_one_that_completed_before_it_began() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).write("w1", 1, "a", 1).write("w1", 1, "b", 1)
    history.read("w1", 1, [("b", 1), ("a", 1)])
    explanation = only(judged(history), "realtime-order")
    assert explanation == (
        "w1's write a (epoch 1) completed at 0.004 s before w1's write b (epoch 1) began at "
        "0.005 s, yet store/k orders the second first"
    )


def test_concurrent_writes_may_land_in_either_order() -> None:
    history = HistoryBuilder().acquire("w1", 1, 1).send("w1", 1, "a", 1).send("w2", 2, "b", 1)
    history.done("w1", 1, "a").done("w2", 2, "b").read("w1", 1, [("b", 1), ("a", 1)])
    result = judged(history)
    assert "realtime-order" not in result.anomaly_types


# -- retry-after-reject ------------------------------------------------------------------------


def test_sending_a_refused_epoch_again_is_retry_after_reject() -> None:
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "a", 7)
    history.acquire("w2", 2, 8).write("w2", 2, "x", 8, key="k2")
    history.write("w1", 1, "b", 7, "fail", error="stale-epoch").write(
        "w1", 1, "c", 7, "fail", error="stale-epoch"
    )
    history.read("w1", 1, [("a", 7)]).read("w2", 2, [("x", 8)], key="k2")
    explanation = only(judged(history), "retry-after-reject")
    assert explanation.startswith("w1 sent write c with epoch 7 of lock L at 0.011 s after its")
    assert explanation.endswith("write b with epoch 7 was refused as stale at 0.01 s")


def test_local_refusals_and_fresh_grants_do_not_make_a_retry() -> None:
    history = HistoryBuilder().acquire("w1", 1, 7).write("w1", 1, "a", 7)
    history.write("w1", 1, "b", 7, "fail", error="lease-expired").write("w1", 1, "c", 7)
    history.acquire("w2", 2, 8).write("w2", 2, "x", 8, key="k2")
    history.write("w1", 1, "d", 7, "fail", error="stale-epoch").acquire("w1", 1, 9)
    history.write("w1", 1, "e", 9).read("w1", 1, [("a", 7), ("c", 7), ("e", 9)])
    history.read("w2", 2, [("x", 8)], key="k2")
    assert judged(history).valid is True


def test_a_re_grant_does_not_excuse_sending_the_refused_epoch_again() -> None:
    history = HistoryBuilder().acquire("w1", 1, 5).acquire("w2", 2, 6)
    history.write("w2", 2, "x", 6, key="k2").write("w1", 1, "a", 5, "fail", error="stale-epoch")
    history.acquire("w1", 1, 7).write("w1", 1, "b", 5, "fail", error="stale-epoch")
    history.write("w1", 1, "c", 7).read("w1", 1, [("c", 7)]).read("w2", 2, [("x", 6)], key="k2")
    explanation = only(judged(history), "retry-after-reject")
    assert explanation.startswith("w1 sent write b with epoch 5 of lock L")


def test_an_epoch_granted_again_after_the_refusal_is_not_a_retry() -> None:
    history = HistoryBuilder().acquire("w1", 1, 5).acquire("w2", 2, 6)
    history.write("w2", 2, "x", 6, key="k2").write("w1", 1, "a", 5, "fail", error="stale-epoch")
    history.acquire("w1", 1, 5).write("w1", 1, "b", 5, "fail", error="stale-epoch")
    history.read("w2", 2, [("x", 6)], key="k2")
    result = judged(history)
    assert "retry-after-reject" not in result.anomaly_types


# -- lost-update -------------------------------------------------------------------------------


def test_two_accepted_writes_based_on_one_read_are_a_lost_update() -> None:
    history = (
        two_holders()
        .write("w1", 1, "x", 7)
        .write("w1", 1, "a", 7, prev="x")
        .write("w2", 2, "b", 8, prev="x")
        .read("w1", 1, [("x", 7), ("a", 7), ("b", 8)])
    )
    explanation = only(judged(history), "lost-update")
    assert explanation.startswith(
        "w1's write a (epoch 7) and w2's write b (epoch 8) were both accepted by store/k, both"
    )
    assert explanation.endswith("based on the read that ended at x")


def test_a_chain_of_read_modify_writes_is_valid() -> None:
    history = (
        two_holders()
        .write("w1", 1, "x", 7)
        .write("w1", 1, "a", 7, prev="x")
        .write("w2", 2, "b", 8, prev="a")
        .read("w1", 1, [("x", 7), ("a", 7), ("b", 8)])
    )
    assert judged(history).valid is True
