"""Fixtures of the reliability tests: small or read-only disks made with tmpfs (root only)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

MountTmpfs = Callable[[str], Path]
"""Mounts a 64 KiB tmpfs with the given extra options (e.g. ``ro``) and returns its folder."""


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[MountTmpfs]:
    """A factory of 64 KiB tmpfs mounts under ``tmp_path``, unmounted afterwards (root can write
    into any chmod-ed folder, but not into a read-only or full mount)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        folder = tmp_path / f"tmpfs{len(mounted)}"
        folder.mkdir()
        flags = ",".join(filter(None, (options, "size=64k")))
        subprocess.run(["mount", "-t", "tmpfs", "-o", flags, "tmpfs", str(folder)], check=True)
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=True)
