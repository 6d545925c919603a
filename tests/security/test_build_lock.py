"""The image build lock is the invoking user's own (issue 22): nobody else can hold builds back."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from harness.node.docker import images
from harness.node.docker.images import ImageError, build_lock_path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_lock_is_in_the_users_own_cache_folder_not_the_shared_tmp(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with images._build_lock():
        lock = cache / "fencecheck" / "images.lock"
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
        assert stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert build_lock_path() == Path.home() / ".cache" / "fencecheck" / "images.lock"
    assert not build_lock_path().is_relative_to(tempfile.gettempdir())


def test_a_lock_held_on_the_old_shared_file_no_longer_blocks_a_build(cache: Path) -> None:
    shared = Path(tempfile.gettempdir()) / "fencecheck-images.lock"
    got = threading.Event()

    def lock() -> None:
        with images._build_lock():
            got.set()

    with open(shared, "a") as held:  # what any local user could do
        fcntl.flock(held, fcntl.LOCK_EX)
        taker = threading.Thread(target=lock, daemon=True)
        taker.start()
        assert got.wait(10), "the build waited for another user's lock"
        taker.join(10)


def test_a_symlink_planted_as_the_lock_is_refused_not_followed(cache: Path) -> None:
    target = cache.parent / "elsewhere"
    (cache / "fencecheck").mkdir(parents=True)
    (cache / "fencecheck" / "images.lock").symlink_to(target)
    refused = pytest.raises(ImageError, match=r"cannot open the image build lock .*symlink")
    with refused, images._build_lock():
        pass
    assert not target.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_a_lock_file_of_another_user_is_refused(cache: Path) -> None:
    lock = cache / "fencecheck" / "images.lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    os.chown(lock, 65534, 65534)
    with pytest.raises(ImageError, match="belongs to another user"), images._build_lock():
        pass
