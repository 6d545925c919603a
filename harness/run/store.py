"""The store: one directory per run, ``store/<test>/<timestamp>/`` (docs/design.md §8).

Layout of a run directory: ``test.json`` (the full spec, seed, schedule, versions),
``history.jsonl`` (streamed during the run), ``results.json`` (the checker's verdict),
``report.html``, ``logs/<node>/<file>``. ``store/latest`` links to the newest checked run.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.record import HistoryError, read_history
from harness.record.files import load_object
from harness.record.results import StoredResults
from harness.record.run_record import RunRecord

__all__ = [
    "DEFAULT_STORE",
    "LatestLink",
    "RunDir",
    "StoreError",
    "atomic_write",
    "check_output_file",
    "check_store",
    "find_runs",
    "new_run_dir",
    "open_run_dir",
    "point_latest",
    "store_problem",
    "unique_tmp",
    "why_unwritable",
]

DEFAULT_STORE = Path("store")
_SAFE = re.compile(r"[^A-Za-z0-9_.+-]+")
_STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"
_STAMP_LENGTH = len("20250101T000000.000000Z")


class StoreError(OSError):
    """The store (or another output file) cannot be written; the message names the fix."""


def why_unwritable(problem: OSError) -> str:
    """A short cause for an ``OSError`` from writing, naming a full disk plainly."""
    if problem.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk is full (no space left on device)"
    return problem.strerror or str(problem)


def unique_tmp(path: Path) -> Path:
    """A temporary name beside ``path`` that no concurrent writer of ``path`` can also pick."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (unique temporary file, then rename), so readers and
    concurrent writers never see half a file."""
    tmp = unique_tmp(path)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _probe(folder: Path, name_length: int) -> None:
    """Create and remove a file of ``name_length`` characters in ``folder``."""
    probe = folder / f".{secrets.token_hex(max(1, (name_length - 1) // 2))}"[:name_length]
    probe.write_bytes(b"")
    probe.unlink()


def check_store(root: Path, test_name: str) -> None:
    """Make sure a run of ``test_name`` can be stored under ``root`` before anything starts.

    Creates ``root/<test>/`` and a file named like a run folder in it; raises
    :class:`StoreError` (a read-only, missing or full disk, a file in the way, a name too long).
    """
    folder = root / _SAFE.sub("_", test_name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _probe(folder, _STAMP_LENGTH)
    except OSError as problem:
        raise StoreError(
            problem.errno, _cannot_store(root, f"{why_unwritable(problem)} ({folder})")
        ) from None


def store_problem(root: Path) -> str | None:
    """Why runs could not be stored under ``root`` (a file in the way, a folder that cannot be
    written), found without leaving anything behind, as a dry run must: the nearest folder that
    exists is probed with a file made and removed at once. ``None`` when nothing is known to be
    wrong (:func:`check_store` finds the rest when the run starts)."""
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return _cannot_store(root, f"{existing} is not a folder")
    try:
        _probe(existing, _STAMP_LENGTH)
    except OSError as problem:
        return _cannot_store(root, f"{existing} cannot be written: {why_unwritable(problem)}")
    return None


def _cannot_store(root: Path, why: str) -> str:
    return (
        f"cannot store runs in {root}: {why}; pass --store a writable folder with a short path, "
        "e.g. --store store"
    )


def check_output_file(path: Path, option: str) -> None:
    """Make sure ``path`` can be written later (its folder is created when missing and is
    writable, it is not a folder); raises :class:`StoreError` naming ``option``.

    The folder is made here, as ``--store`` is: a CI job's ``--junit-xml reports/x.xml`` names a
    folder nothing else creates.
    """
    why = None
    if path.is_dir():
        why = "it is a folder"
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _probe(path.parent, len(path.name))
        except OSError as problem:
            why = why_unwritable(problem)
    if why is not None:
        raise StoreError(
            errno.EINVAL, f"cannot write {option} {path}: {why}; give a file in a writable folder"
        )


@dataclass(frozen=True)
class RunDir:
    """Paths of one run's files; the directory itself is :attr:`path`."""

    path: Path

    @property
    def test_json(self) -> Path:
        """The spec, seed, schedule and versions."""
        return self.path / "test.json"

    @property
    def replay(self) -> Path:
        """For a replay: what it replayed, whether it reproduced and why it may not have."""
        return self.path / "replay.json"

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
        """The decoded ``test.json``; raises ``ValueError`` naming the file when it is damaged
        (not JSON, or not an object), ``OSError`` when it cannot be read."""
        try:
            return load_object(self.test_json)
        except ValueError as problem:
            raise self.damaged(str(problem)) from None

    def damaged(self, why: str) -> ValueError:
        """The error for a ``test.json`` that cannot be read as a run's record, naming the file
        and what is left to do."""
        return ValueError(
            f"{self.test_json} is damaged ({why}): the run's record is lost; check its history "
            f"alone with `fencecheck check {self.history}`"
        )

    def read_record(self) -> RunRecord:
        """The record in ``test.json``; raises ``ValueError`` naming the file when it is damaged
        or lacks a field, ``OSError`` when it cannot be read."""
        data = self.read_test()
        try:
            return RunRecord.from_json(data)
        except ValueError as problem:
            raise self.damaged(str(problem)) from None

    def read_results(self) -> StoredResults | None:
        """``results.json`` read back (:class:`~harness.record.results.StoredResults`), or ``None``
        when the run was never checked; raises ``OSError`` or ``ValueError`` naming the file when
        it cannot be read."""
        try:
            return StoredResults.from_json(load_object(self.results))
        except FileNotFoundError:
            return None
        except ValueError as problem:
            raise ValueError(f"{self.results} cannot be read: {problem}") from None

    def read_replay(self) -> dict[str, Any] | None:
        """The decoded ``replay.json`` of a replay, or ``None`` (not a replay, or unreadable)."""
        try:
            return load_object(self.replay)
        except (OSError, ValueError):
            return None

    def write_json(self, path: Path, data: Any) -> None:
        """Write ``data`` as indented JSON atomically (write, then rename)."""
        text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
        atomic_write(path, text.encode())


def new_run_dir(test_name: str, root: Path = DEFAULT_STORE, now: datetime | None = None) -> RunDir:
    """Create ``root/<test_name>/<timestamp>/`` with an empty history (``root/latest`` moves
    to it once it is checked: :func:`point_latest`)."""
    stamp = (now or datetime.now(UTC)).strftime(_STAMP_FORMAT)
    path = root / _SAFE.sub("_", test_name) / stamp
    path.mkdir(parents=True, exist_ok=False)
    (path / "logs").mkdir()
    # An empty history from the start: a run stopped at once is still a run that can be checked.
    RunDir(path).history.touch()
    return RunDir(path)


def point_latest(run: RunDir) -> None:
    """Point the store's ``latest`` (two folders up) at ``run``, atomically: called once the run
    is checked, so ``latest`` never names a run without results."""
    LatestLink(run).move()


class LatestLink:
    """The link that will point the store's ``latest`` at a run, made first (where a full or
    read-only store fails) and moved into place later, atomically. The runner makes it before it
    writes ``results.json`` and moves it after, so a run's results are written once and already
    say whether ``latest`` could be pointed."""

    def __init__(self, run: RunDir) -> None:
        root = run.path.parent.parent
        self._latest = root / "latest"
        self._tmp = unique_tmp(self._latest)
        self._tmp.symlink_to(run.path.relative_to(root))

    def move(self) -> None:
        """Point ``latest`` at the run (the link is gone either way)."""
        try:
            os.replace(self._tmp, self._latest)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Leave ``latest`` where it was and remove the link."""
        self._tmp.unlink(missing_ok=True)


def open_run_dir(path: str | os.PathLike[str]) -> RunDir:
    """An existing run directory; raises ``FileNotFoundError`` with the fix when it is not one,
    and ``ValueError`` when its history is no file a run wrote (a device such as ``/dev/zero`` or
    a FIFO, which would be read for ever) or its first line is no history line."""
    run = RunDir(Path(path).resolve())
    if not run.history.exists():
        raise FileNotFoundError(
            f"{path} is not a run directory (no history.jsonl); "
            "pass a folder such as store/latest or store/<test>/<timestamp>"
        )
    if not run.history.is_file():
        raise ValueError(
            f"{run.history} is not a regular file (a device, a FIFO or a folder, or a link to "
            "one): a run's history is the file the run wrote; restore it, or check another "
            "history with `fencecheck check FILE`"
        )
    try:
        # The first line: a file of zeros or binary data is refused here (the generator, and
        # the file with it, is closed as soon as it is dropped).
        next(read_history(run.history), None)
    except HistoryError as problem:
        raise ValueError(f"{run.history}: {problem}") from None
    return run


def find_runs(root: Path = DEFAULT_STORE) -> list[RunDir]:
    """Every run directory under ``root``, oldest first (by timestamp folder name)."""
    runs = [RunDir(p.parent) for p in root.glob("*/*/history.jsonl")]
    return sorted(runs, key=lambda r: r.path.name)
