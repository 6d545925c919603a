"""The reference servers under a power loss: their data dir on a real lazy file system.

The correct store and lock service keep every acknowledged write, mark and epoch; the switches
``mark-no-fsync``, ``ack-before-fsync`` and ``counter-no-fsync`` lose them, which a kill alone
never shows (the page cache keeps them).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from systems.reference import store_server
from systems.reference.lock_server import LockService
from systems.reference.store_server import Item, Store
from tests.support.lazyfs import SKIP, Mounted, mount

pytestmark = SKIP


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Mounted]:
    """A lazy FS like ext4's journal (what a node mounts)."""
    yield from mount(tmp_path, "journal")


def _write(store: Store, epoch: int, ident: str) -> dict[str, Any]:
    return store.write(store_server.STORE, "L", epoch, [Item("k", ident)])


def _ids(store: Store) -> list[str]:
    return [entry["id"] for entry in store.read(store_server.STORE, "k")]


def test_the_correct_store_keeps_every_acknowledged_write_and_mark(disk: Mounted) -> None:
    store = Store(disk.at / "store")
    assert _write(store, 2, "a")["ok"]
    assert _write(store, 3, "b")["ok"]

    assert disk.drop()["writes"] == 0  # every write was synced before it was acknowledged
    again = Store(disk.at / "store")

    assert _ids(again) == ["a", "b"]
    assert _write(again, 2, "stale") == {"ok": False, "error": "stale-epoch", "mark": 3}


def test_mark_no_fsync_loses_writes_and_marks_to_a_power_loss(disk: Mounted) -> None:
    store = Store(disk.at / "store", frozenset({store_server.MARK_NO_FSYNC}))
    _write(store, 3, "b")

    dropped = disk.drop()
    again = Store(disk.at / "store", frozenset({store_server.MARK_NO_FSYNC}))

    assert dropped["writes"] == 1
    assert _ids(again) == []
    assert _write(again, 2, "stale")["ok"]  # the mark was lost with the log


def test_ack_before_fsync_loses_only_what_the_flusher_had_not_synced(disk: Mounted) -> None:
    bugs = frozenset({store_server.ACK_BEFORE_FSYNC})
    store = Store(disk.at / "store", bugs)
    _write(store, 1, "flushed")
    time.sleep(store_server.FLUSH_EVERY_S * 2.5)  # a lower bound: the flusher ran since
    _write(store, 1, "acknowledged")  # the next flush is up to FLUSH_EVERY_S away

    disk.drop()

    assert _ids(Store(disk.at / "store", bugs)) == ["flushed"]


def _acquire(service: LockService) -> int:
    reply = service.handle({"op": "acquire", "lock": "L", "ttl": 0.2, "wait": 5.0, "owner": "w"})
    assert reply["ok"], reply
    epoch: int = reply["epoch"]
    return epoch


def test_epochs_survive_a_power_loss_only_when_fsynced(disk: Mounted) -> None:
    correct = LockService(disk.at / "lock", lock_delay=0.0, durable=True)
    assert [_acquire(correct), _acquire(correct)] == [1, 2]
    disk.drop()
    assert _acquire(LockService(disk.at / "lock", lock_delay=0.0, durable=True)) == 3

    lazy = LockService(disk.at / "lazy", lock_delay=0.0, durable=True, fsync=False)
    assert [_acquire(lazy), _acquire(lazy)] == [1, 2]
    disk.drop()
    assert _acquire(LockService(disk.at / "lazy", lock_delay=0.0, durable=True, fsync=False)) == 1


def test_a_write_the_disk_failed_leaves_no_record_for_a_replay(disk: Mounted) -> None:
    store = Store(disk.at / "store")
    assert _write(store, 1, "kept")["ok"]
    for faults in ({"fsync_error": True}, {"disk_full": True}):
        disk.faults(**faults)
        with pytest.raises(OSError):
            _write(store, 1, "failed")
        disk.faults(fsync_error=False, disk_full=False)
    assert _write(store, 1, "after")["ok"]  # its fsync syncs the cut too

    disk.drop()

    assert _ids(Store(disk.at / "store")) == ["kept", "after"]
