"""Mounting the lazy file system (harness/nodeside/lazyfs.py) on this machine, for tests.

It needs root, ``/dev/fuse`` and a python3 with pyfuse3 (the Debian python3 with
``python3-pyfuse3``, as on the nodes); :data:`SKIP` skips a test module where they are missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.nodeside import lazyfs

__all__ = ["SKIP", "Mounted", "mount"]

_PROGRAM = Path(lazyfs.__file__)


def _fuse_python() -> str | None:
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and os.path.exists(candidate):
            found = subprocess.run([candidate, "-c", "import pyfuse3"], capture_output=True)
            if found.returncode == 0:
                return candidate
    return None


_PYTHON = _fuse_python()
SKIP = pytest.mark.skipif(
    _PYTHON is None or not os.path.exists("/dev/fuse") or os.geteuid() != 0,
    reason="needs root, /dev/fuse and a python3 with pyfuse3 (apt-get install python3-pyfuse3)",
)


@dataclass
class Mounted:
    """A mounted lazy file system: where the daemon writes, and its state directory."""

    at: Path
    state: Path

    def drop(self) -> dict[str, int]:
        answer = lazyfs.ask(str(self.state), {"op": "drop"})
        assert answer["ok"], answer
        dropped: dict[str, int] = answer["dropped"]
        return dropped

    def faults(self, **faults: object) -> dict[str, object]:
        answer = lazyfs.ask(str(self.state), {"op": "faults", **faults})
        assert answer["ok"], answer
        report: dict[str, object] = answer["report"]
        return report


def mount(tmp_path: Path, metadata: str) -> Iterator[Mounted]:
    """Mount a lazy FS over ``tmp_path/data`` (which holds a file ``before``); unmount after."""
    at, state = tmp_path / "data", tmp_path / "state"
    at.mkdir()
    (at / "before").write_bytes(b"there before the mount\n")
    assert _PYTHON is not None
    subprocess.run(
        [_PYTHON, str(_PROGRAM), "mount", str(at), "--state", str(state), "--metadata", metadata],
        check=True,
        timeout=30,
    )
    try:
        yield Mounted(at, state)
    finally:
        subprocess.run(["umount", "-l", str(at)], check=False)
