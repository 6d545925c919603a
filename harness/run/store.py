"""The store: one directory per run, ``store/<test>/<timestamp>/`` (DESIGN.md §8).

Layout of a run directory: ``test.json`` (the full spec, seed, schedule, versions),
``history.jsonl`` (streamed during the run), ``results.json`` (the checker's verdict),
``report.html``, ``logs/<node>/<file>``. ``store/latest`` links to the newest run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_STORE",
    "RunDir",
    "find_runs",
    "new_run_dir",
    "open_run_dir",
]

DEFAULT_STORE = Path("store")
_SAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


@dataclass(frozen=True)
class RunDir:
    """Paths of one run's files; the directory itself is :attr:`path`."""

    path: Path

    @property
    def test_json(self) -> Path:
        """The spec, seed, schedule and versions."""
        return self.path / "test.json"

    @property
    def history(self) -> Path:
        """The history, JSON Lines, streamed during the run."""
        return self.path / "history.jsonl"

    @property
    def results(self) -> Path:
        """The checker's result as JSON."""
        return self.path / "results.json"

    @property
    def report(self) -> Path:
        """The self-contained HTML report."""
        return self.path / "report.html"

    @property
    def logs(self) -> Path:
        """Folder of node logs: ``logs/<node>/<file>``."""
        return self.path / "logs"

    def read_test(self) -> dict[str, Any]:
        """The decoded ``test.json``."""
        data: dict[str, Any] = json.loads(self.test_json.read_text())
        return data

    def read_results(self) -> dict[str, Any] | None:
        """The decoded ``results.json``, or ``None`` when the run was never checked."""
        if not self.results.exists():
            return None
        data: dict[str, Any] = json.loads(self.results.read_text())
        return data

    def write_json(self, path: Path, data: Any) -> None:
        """Write ``data`` as indented JSON atomically (write, then rename)."""
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
        os.replace(tmp, path)


def new_run_dir(test_name: str, root: Path = DEFAULT_STORE, now: datetime | None = None) -> RunDir:
    """Create ``root/<test_name>/<timestamp>/`` and point ``root/latest`` at it."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")
    path = root / _SAFE.sub("_", test_name) / stamp
    path.mkdir(parents=True, exist_ok=False)
    (path / "logs").mkdir()
    latest = root / "latest"
    tmp = root / ".latest.tmp"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(path.relative_to(root))
    os.replace(tmp, latest)
    return RunDir(path)


def open_run_dir(path: str | os.PathLike[str]) -> RunDir:
    """An existing run directory; raises ``FileNotFoundError`` with the fix when it is not one."""
    run = RunDir(Path(path).resolve())
    if not run.history.exists():
        raise FileNotFoundError(
            f"{path} is not a run directory (no history.jsonl); "
            "pass a folder such as store/latest or store/<test>/<timestamp>"
        )
    return run


def find_runs(root: Path = DEFAULT_STORE) -> list[RunDir]:
    """Every run directory under ``root``, oldest first (by timestamp folder name)."""
    runs = [RunDir(p.parent) for p in root.glob("*/*/history.jsonl")]
    return sorted(runs, key=lambda r: r.path.name)
