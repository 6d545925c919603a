"""The reference store's fence, durability and bug switches: in-process, and as a server."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.nodeside.client import STALE, Accepted, Entry, Read, Refused
from systems.reference.store_server import (
    AUDIT,
    BATCH,
    EQUAL_EPOCH_ANY_HOLDER,
    FENCE_PER_CONNECTION,
    LAZY_MARK,
    MARK_EVERY,
    MARK_PER_KEY,
    NO_STORE_CHECK,
    NON_IDEMPOTENT,
    STORE,
    STORE_FORGETS,
    UNFENCED_PATH,
    Item,
    Store,
)
from tests.support.localcluster import MakeCluster

_ids = (f"x{n}" for n in itertools.count())


def put(store: Store, sink: str, lock: str, epoch: int, key: str = "k") -> bool:
    """Write one fresh id; True when accepted."""
    reply = store.write(sink, lock, epoch, [Item(key, next(_ids))])
    assert reply["ok"] or reply["error"] == "stale-epoch", reply
    return bool(reply["ok"])


def put_as(store: Store, holder: str, epoch: int, sink: str = STORE, key: str = "k") -> bool:
    """Write one fresh id to lock L as ``holder``; True when accepted."""
    reply = store.write(sink, "L", epoch, [Item(key, next(_ids))], holder)
    assert reply["ok"] or reply["error"] == "stale-epoch", reply
    return bool(reply["ok"])


def epochs(store: Store, sink: str, key: str = "k") -> list[int]:
    return [entry["epoch"] for entry in store.read(sink, key)]


def fenced_read(store: Store, sink: str, lock: str, epoch: int, key: str = "k") -> bool:
    """A fenced read; True when accepted (and then it returned the key's entries)."""
    reply = store.fenced_read(sink, key, lock, epoch)
    assert reply["ok"] or reply["error"] == "stale-epoch", reply
    if reply["ok"]:
        assert reply["entries"] == store.read(sink, key)
    return bool(reply["ok"])


def test_refuses_a_lower_epoch_and_accepts_an_equal_one(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert put(store, STORE, "L", 5)
    assert put(store, STORE, "L", 5)
    assert not put(store, STORE, "L", 4)
    refusal = store.write(STORE, "L", 3, [Item("k", "late")])
    assert refusal == {"ok": False, "error": "stale-epoch", "mark": 5}
    assert epochs(store, STORE) == [5, 5]


def test_a_write_delivered_twice_is_in_once_unless_the_store_is_not_idempotent(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "right")
    first = store.write(STORE, "L", 5, [Item("k", "w2-31")])
    assert store.write(STORE, "L", 5, [Item("k", "w2-31")]) == first
    assert [entry["id"] for entry in store.read(STORE, "k")] == ["w2-31"]
    assert Store(tmp_path / "right").write(STORE, "L", 5, [Item("k", "w2-31")]) == first
    wrong = Store(tmp_path / "wrong", frozenset({NON_IDEMPOTENT}))
    wrong.write(STORE, "L", 5, [Item("k", "w2-31")])
    wrong.write(STORE, "L", 5, [Item("k", "w2-31")])
    assert [entry["id"] for entry in wrong.read(STORE, "k")] == ["w2-31", "w2-31"]


def test_fence_per_connection_trusts_a_connection_it_admitted_once(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({FENCE_PER_CONNECTION}))
    assert put(store, STORE, "L", 4)  # this thread (connection) is admitted under L

    answers: list[bool] = []
    for epoch in (5, 4):  # the next holder, then a fresh connection: each checked
        thread = threading.Thread(target=lambda e=epoch: answers.append(put(store, STORE, "L", e)))
        thread.start()
        thread.join()
    assert answers == [True, False]
    assert put(store, STORE, "L", 4)  # the old connection is trusted: the stale write is in
    assert epochs(store, STORE) == [4, 5, 4]


def test_the_mark_is_per_lock_and_shared_by_keys_and_both_fenced_paths(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert put(store, STORE, "L", 7, key="a")
    assert not put(store, STORE, "L", 6, key="b")  # another key, same lock: still fenced
    assert not put(store, BATCH, "L", 6, key="a")  # the bulk path checks the same mark
    assert put(store, STORE, "M", 1)  # another lock has its own mark


def test_the_batch_path_is_all_or_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    reply = store.write(BATCH, "L", 2, [Item("a", "b1"), Item("b", "b2")])
    assert reply["ok"]
    assert store.write(BATCH, "L", 1, [Item("a", "b3"), Item("b", "b4")])["ok"] is False
    assert [e["id"] for e in store.read(BATCH, "a") + store.read(BATCH, "b")] == ["b1", "b2"]


def test_audit_accepts_everything_in_arrival_order(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for epoch in (3, 9, 1, 9):
        assert put(store, AUDIT, "L", epoch)
    assert epochs(store, AUDIT) == [3, 9, 1, 9]
    assert put(store, STORE, "L", 2)  # audit writes do not raise the store's mark


def test_log_and_marks_survive_a_restart(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert put(store, STORE, "L", 8)
    reopened = Store(tmp_path)
    assert epochs(reopened, STORE) == [8]
    assert not put(reopened, STORE, "L", 7)


def test_store_forgets_loses_its_marks_but_not_its_log(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({STORE_FORGETS}))
    assert put(store, STORE, "L", 8)
    assert not put(store, STORE, "L", 7)  # still fenced until the restart
    reopened = Store(tmp_path, frozenset({STORE_FORGETS}))
    assert put(reopened, STORE, "L", 7)
    assert epochs(reopened, STORE) == [8, 7]


def test_lazy_mark_restarts_from_the_mark_it_saved_last(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({LAZY_MARK}))
    for _ in range(MARK_EVERY):
        assert put(store, STORE, "L", 5)  # the last of these saves mark 5
    assert put(store, STORE, "L", 6)  # the next holder's first writes: mark 6 in memory only
    assert not put(store, STORE, "L", 5)  # still fenced until the restart
    reopened = Store(tmp_path, frozenset({LAZY_MARK}))
    assert not put(reopened, STORE, "L", 4)  # the saved mark holds
    assert put(reopened, STORE, "L", 5)  # the lost one does not: a stale write
    assert epochs(reopened, STORE) == [5] * MARK_EVERY + [6, 5]


def test_lazy_mark_keeps_a_mark_once_enough_writes_saved_it(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({LAZY_MARK}))
    for _ in range(MARK_EVERY):
        assert put(store, STORE, "L", 6)
    assert not put(Store(tmp_path, frozenset({LAZY_MARK})), STORE, "L", 5)


def test_no_store_check_accepts_stale_writes_on_every_path(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({NO_STORE_CHECK}))
    assert put(store, STORE, "L", 8)
    assert put(store, STORE, "L", 2)
    assert put(store, BATCH, "L", 1)


def test_unfenced_path_leaves_only_the_batch_path_unchecked(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({UNFENCED_PATH}))
    assert put(store, STORE, "L", 8)
    assert not put(store, STORE, "L", 2)
    assert put(store, BATCH, "L", 2)


def test_a_fenced_read_raises_the_mark_so_an_older_write_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write(STORE, "L", 3, [Item("k", "w3")])
    reply = store.fenced_read(STORE, "k", "L", 5)
    assert reply == {"ok": True, "entries": [{"id": "w3", "epoch": 3, "seq": 1}], "mark": 5}
    assert not put(store, STORE, "L", 4)
    assert not put(store, BATCH, "L", 4, key="other")  # the mark is the lock's, on both paths
    assert put(store, STORE, "M", 1, key="m")  # another lock is untouched
    assert put(store, STORE, "L", 5)
    assert epochs(store, STORE) == [3, 5]  # the read added no entry


def test_a_fenced_read_with_an_old_epoch_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert put(store, STORE, "L", 6)
    assert store.fenced_read(STORE, "k", "L", 5) == {"ok": False, "error": "stale-epoch", "mark": 6}
    assert fenced_read(store, BATCH, "L", 6)  # equal to the mark: fine, as for a write
    assert not fenced_read(store, BATCH, "L", 2)


@pytest.mark.parametrize(("bugs", "remembered"), [((), True), ((STORE_FORGETS,), False)])
def test_the_mark_a_fenced_read_raised_survives_a_restart_unless_the_store_forgets(
    tmp_path: Path, bugs: tuple[str, ...], remembered: bool
) -> None:
    store = Store(tmp_path, frozenset(bugs))
    assert put(store, STORE, "L", 2)
    assert fenced_read(store, STORE, "L", 7)
    assert not put(store, STORE, "L", 6)  # in memory it holds either way
    reopened = Store(tmp_path, frozenset(bugs))
    assert put(reopened, STORE, "L", 6) is not remembered
    assert fenced_read(reopened, STORE, "L", 6) is not remembered
    assert epochs(reopened, STORE) == ([2] if remembered else [2, 6])


def test_reads_are_not_fenced_where_writes_are_not(tmp_path: Path) -> None:
    unchecked = Store(tmp_path / "no-check", frozenset({NO_STORE_CHECK}))
    assert put(unchecked, STORE, "L", 8)
    assert fenced_read(unchecked, STORE, "L", 2)
    assert fenced_read(unchecked, BATCH, "L", 2)
    unfenced_batch = Store(tmp_path / "unfenced", frozenset({UNFENCED_PATH}))
    assert fenced_read(unfenced_batch, BATCH, "L", 9)  # raises nothing: the path checks nothing
    assert fenced_read(unfenced_batch, AUDIT, "L", 9)
    assert put(unfenced_batch, STORE, "L", 1)
    assert not fenced_read(unfenced_batch, STORE, "L", 0)


def test_a_torn_last_record_is_dropped_on_replay(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert put(store, STORE, "L", 4)
    with (tmp_path / "store.log").open("ab") as log:
        log.write(b'{"sink": "store", "key": "k", "id": "torn", "ep')
    reopened = Store(tmp_path)
    assert epochs(reopened, STORE) == [4]
    assert put(reopened, STORE, "L", 4)
    assert epochs(Store(tmp_path), STORE) == [4, 4]


def test_a_corrupt_record_stops_the_store_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "store.log").write_bytes(b"not json\n")
    with pytest.raises(SystemExit, match="line 1 is corrupt"):
        Store(tmp_path)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["write", "read"]), st.sampled_from("LM"), st.integers(1, 6)),
        max_size=25,
    )
)
def test_accepted_iff_not_below_the_highest_accepted(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, str, int]]
) -> None:
    directory = tmp_path_factory.mktemp("store")
    store = Store(directory)
    marks = {"L": 0, "M": 0}
    written: dict[str, list[int]] = {"L": [], "M": []}
    for kind, lock, epoch in ops:
        expected = epoch >= marks[lock]
        accepted = put if kind == "write" else fenced_read
        assert accepted(store, STORE, lock, epoch, key=lock) is expected
        if expected:
            marks[lock] = epoch
            if kind == "write":
                written[lock].append(epoch)
    reopened = Store(directory)
    for lock, mark in marks.items():
        assert epochs(reopened, STORE, key=lock) == written[lock]
        assert not mark or not put(reopened, STORE, lock, mark - 1, key="other")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["write", "read"]),
            st.integers(1, 4),
            st.sampled_from(["w1", "w2", None]),
        ),
        max_size=25,
    )
)
def test_an_equal_epoch_passes_only_from_the_holder_that_raised_the_mark(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, str | None]]
) -> None:
    # The model: above the mark passes and takes it over; equal passes from its holder, or when
    # either side names no holder (judged by the epoch alone).
    directory = tmp_path_factory.mktemp("store")
    store = Store(directory)
    mark, raised_by = 0, None
    for kind, epoch, holder in ops:
        expected = epoch > mark or (
            epoch == mark and (holder is None or raised_by is None or holder == raised_by)
        )
        if kind == "write":
            accepted = bool(store.write(STORE, "L", epoch, [Item("k", next(_ids))], holder)["ok"])
        else:
            accepted = bool(store.fenced_read(STORE, "k", "L", epoch, holder)["ok"])
        assert accepted is expected
        if epoch > mark:
            mark, raised_by = epoch, holder
    reopened = Store(directory)  # the log rebuilds the mark's holder too
    if mark and raised_by is not None:
        assert not put_as(reopened, "other", mark)
        assert put_as(reopened, raised_by, mark)


def test_equal_epoch_any_holder_admits_a_second_holder_at_the_mark(tmp_path: Path) -> None:
    correct, flawed = (
        Store(tmp_path / "correct"),
        Store(tmp_path / "flawed", frozenset({EQUAL_EPOCH_ANY_HOLDER})),
    )
    for store in (correct, flawed):
        assert put_as(store, "w1", 3)
        assert not put_as(store, "w2", 2)  # below the mark: refused either way
    assert not put_as(correct, "w2", 3)
    assert put_as(flawed, "w2", 3)
    assert put_as(correct, "w2", 4)  # a higher epoch takes the mark over
    assert not put_as(correct, "w1", 4)


def test_lazy_mark_checkpoints_keep_the_marks_holders(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({LAZY_MARK}))
    for _ in range(MARK_EVERY):
        assert put_as(store, "w1", 5)
    reopened = Store(tmp_path, frozenset({LAZY_MARK}))
    assert not put_as(reopened, "w2", 5)
    assert put_as(reopened, "w1", 5)


@pytest.mark.parametrize("raised_by", ["write", "fenced read"])
@pytest.mark.parametrize(("bugs", "stale_accepted"), [((), False), (("store-forgets",), True)])
def test_the_store_server_keeps_its_mark_across_a_kill(
    make_cluster: MakeCluster, bugs: tuple[str, ...], stale_accepted: bool, raised_by: str
) -> None:
    cluster = make_cluster(bugs=bugs)
    client = cluster.client()
    assert client.write("L", "store", "k", "a", 2, None) == Accepted(1)
    if raised_by == "write":
        assert client.write("L", "store", "k", "a5", 5, None) == Accepted(2)
    else:
        assert client.read("store", "k", "L", 5) == Read((Entry("a", 2, 1),))
    assert client.read("store", "k", "L", 4) == Refused(STALE)
    cluster.kill_and_restart("s1")
    outcome = client.write("L", "store", "k", "b", 3, None)
    next_seq = 3 if raised_by == "write" else 2  # the counter survives the restart
    assert outcome == (Accepted(next_seq) if stale_accepted else Refused(STALE))
    read = client.read("store", "k")
    assert isinstance(read, Read)
    written = ["a", "a5"] if raised_by == "write" else ["a"]
    assert [e.id for e in read.entries] == written + (["b"] if stale_accepted else [])


def test_seq_numbers_writes_across_keys_and_sinks_and_survives_a_restart(tmp_path: Path) -> None:
    store = Store(tmp_path)
    assert store.write(STORE, "L", 1, [Item("a", "x1")])["seqs"] == [1]
    assert store.write(BATCH, "L", 1, [Item("b", "x2"), Item("c", "x3")])["seqs"] == [2, 3]
    assert not store.write(STORE, "L", 0, [Item("a", "stale")])["ok"]  # a refusal takes no seq
    reopened = Store(tmp_path)
    assert reopened.write(AUDIT, "L", 1, [Item("a", "x4")])["seqs"] == [4]
    assert reopened.read(STORE, "a") == [{"id": "x1", "epoch": 1, "seq": 1}]


def test_mark_per_key_accepts_a_stale_write_to_a_key_the_new_holder_left(tmp_path: Path) -> None:
    store = Store(tmp_path, frozenset({MARK_PER_KEY}))
    assert put(store, STORE, "L", 1, key="a")
    assert put(store, STORE, "L", 2, key="b")  # the new holder writes b only
    assert not put(store, STORE, "L", 1, key="b")  # b's own mark still fences it
    assert put(store, STORE, "L", 1, key="a")  # the planted mistake: a never saw epoch 2
    assert not fenced_read(store, STORE, "L", 1, key="b")
    # The marks are rebuilt per key from the log on a restart, mistake included.
    again = Store(tmp_path, frozenset({MARK_PER_KEY}))
    assert not put(again, STORE, "L", 1, key="b")
    assert put(again, STORE, "L", 1, key="a")
    correct = Store(tmp_path / "correct")
    assert put(correct, STORE, "L", 2, key="b")
    assert not put(correct, STORE, "L", 1, key="a")
