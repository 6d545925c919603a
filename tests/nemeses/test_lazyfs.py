"""The lazy file system's semantics (harness/nodeside/lazyfs.py), on a real FUSE mount.

Each test mounts one over a temporary directory with the python3 that has ``python3-pyfuse3`` (the
node image's Debian python3; on a developer's machine ``apt-get install python3-pyfuse3 fuse3``),
does what a daemon does, drops what was unsynced (the power loss) and reads back what is left.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.lazyfs import SKIP, Mounted, mount

pytestmark = SKIP


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[Mounted]:
    """A lazy FS whose directory entries are durable only by a directory fsync."""
    yield from mount(tmp_path, "strict")


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Mounted]:
    """A lazy FS like ext4's ordered journal: any fsync commits every pending entry."""
    yield from mount(tmp_path, "journal")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes, *, sync: bool, flags: int = 0) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def test_unsynced_bytes_are_dropped_and_synced_ones_kept(journal: Mounted) -> None:
    log = journal.at / "store.log"
    _write(log, b"synced 1\n", sync=True, flags=os.O_APPEND)
    _write(log, b"synced 2\n", sync=True, flags=os.O_APPEND)
    _write(log, b"lost A\n", sync=False, flags=os.O_APPEND)
    _write(log, b"lost B\n", sync=False, flags=os.O_APPEND)
    assert log.read_bytes() == b"synced 1\nsynced 2\nlost A\nlost B\n"  # visible before the loss

    dropped = journal.drop()

    assert dropped == {"writes": 2, "bytes": 14, "files": 1, "entry_changes": 0}
    assert log.read_bytes() == b"synced 1\nsynced 2\n"
    assert (journal.at / "before").read_bytes() == b"there before the mount\n"
    assert journal.drop() == {"writes": 0, "bytes": 0, "files": 0, "entry_changes": 0}


def test_rename_is_kept_only_with_a_directory_fsync(strict: Mounted) -> None:
    mark = strict.at / "mark"
    _write(mark, b"1", sync=True)
    _fsync_dir(strict.at)
    # The atomic replace done right: write, fsync, rename, fsync the directory.
    _write(strict.at / "mark.tmp", b"2", sync=True)
    os.rename(strict.at / "mark.tmp", mark)
    _fsync_dir(strict.at)
    # ... and without the directory fsync: the rename is lost, the old file stays.
    _write(strict.at / "mark.tmp", b"3", sync=True)
    os.rename(strict.at / "mark.tmp", mark)

    dropped = strict.drop()

    assert mark.read_bytes() == b"2"
    assert sorted(os.listdir(strict.at)) == ["before", "mark"]
    assert dropped["entry_changes"] == 2  # the create of mark.tmp and the rename


def test_strict_entries_need_their_directory_fsync_and_data_its_file_fsync(
    strict: Mounted,
) -> None:
    (strict.at / "sub").mkdir()
    _write(strict.at / "sub" / "dir-only", b"data", sync=False)  # entry synced, data not
    _fsync_dir(strict.at)
    _fsync_dir(strict.at / "sub")
    _write(strict.at / "file-only", b"data", sync=True)  # data synced, entry not: gone

    strict.drop()

    assert sorted(os.listdir(strict.at)) == ["before", "sub"]
    assert (strict.at / "sub" / "dir-only").read_bytes() == b""  # ext4 without auto_da_alloc


def test_journal_commits_pending_entries_with_any_fsync(journal: Mounted) -> None:
    _write(journal.at / "a.tmp", b"A", sync=True)
    os.rename(journal.at / "a.tmp", journal.at / "a")
    _write(journal.at / "other", b"o", sync=True)  # commits the rename too
    os.unlink(journal.at / "before")  # after the last fsync: lost

    journal.drop()

    assert sorted(os.listdir(journal.at)) == ["a", "before", "other"]
    assert (journal.at / "a").read_bytes() == b"A"


def test_o_sync_and_o_dsync_writes_are_durable_at_once(journal: Mounted) -> None:
    _write(journal.at / "sync", b"kept", sync=False, flags=os.O_SYNC)
    _write(journal.at / "dsync", b"kept too", sync=False, flags=os.O_DSYNC)

    assert journal.drop()["writes"] == 0
    assert (journal.at / "sync").read_bytes() == b"kept"
    assert (journal.at / "dsync").read_bytes() == b"kept too"


def test_truncate_is_durable_at_the_next_fsync(journal: Mounted) -> None:
    path = journal.at / "t"
    _write(path, b"0123456789", sync=True)
    os.truncate(path, 4)
    fd = os.open(path, os.O_RDWR)
    os.fsync(fd)
    os.close(fd)
    os.truncate(path, 2)  # unsynced: dropped
    os.truncate(path, 6)  # grows with zeros, unsynced too

    journal.drop()

    assert path.read_bytes() == b"0123"


def test_mmap_stores_are_durable_only_after_msync(journal: Mounted) -> None:
    path = journal.at / "mapped"
    _write(path, b"." * 8192, sync=True)
    with path.open("r+b") as file, mmap.mmap(file.fileno(), 8192) as mapped:
        mapped[0:4] = b"kept"
        mapped.flush()  # msync(MS_SYNC)
        mapped[4096:4100] = b"lost"
    assert path.read_bytes()[4096:4100] == b"lost"

    journal.drop()

    data = path.read_bytes()
    assert data[0:4] == b"kept"
    assert data[4096:4100] == b"...."


def test_disk_full_and_fsync_error_return_their_errors_for_the_window(journal: Mounted) -> None:
    path = journal.at / "f"
    _write(path, b"ok", sync=True)
    journal.faults(disk_full=True)
    with pytest.raises(OSError) as full:
        _write(path, b"more", sync=False)
    assert full.value.errno == errno.ENOSPC
    journal.faults(disk_full=False, fsync_error=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"+late")
    with pytest.raises(OSError) as failed:
        os.fsync(fd)
    assert failed.value.errno == errno.EIO
    report = journal.faults(disk_full=False, fsync_error=False)  # a retried fsync syncs now
    os.fsync(fd)
    os.close(fd)

    journal.drop()

    assert path.read_bytes() == b"ok+late"
    assert report["enospc"] == 1 and report["eio"] == 1


def test_slow_disk_delays_each_fsync(journal: Mounted) -> None:
    journal.faults(fsync_delay_s=0.3)
    began = time.monotonic()
    _write(journal.at / "slow", b"x", sync=True)
    took = time.monotonic() - began
    report = journal.faults(fsync_delay_s=0)

    assert took >= 0.3
    assert report["slowed_fsyncs"] == 1
