"""Each run file is read once per run: ``report`` and ``analyze`` open ``test.json`` and
``results.json`` once each (counted by an audit hook on every ``open``, no stand-in)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.cli import main
from harness.run.store import RunDir

RunFactory = Callable[..., RunDir]
_WATCHED = ("test.json", "results.json", "history.jsonl")
_opened: list[Counter[str]] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    # Audit hooks cannot be removed: this one counts only while a test listens.
    if event != "open" or not _opened or not args:
        return
    path, mode = args[0], args[1] if len(args) > 1 else "r"
    if isinstance(path, str | bytes | os.PathLike) and isinstance(mode, str) and "r" in mode:
        name = os.path.basename(os.fsdecode(path))
        if name in _WATCHED:
            _opened[-1][name] += 1


sys.addaudithook(_hook)


@contextmanager
def _counting() -> Iterator[Counter[str]]:
    counts: Counter[str] = Counter()
    _opened.append(counts)
    try:
        yield counts
    finally:
        _opened.pop()


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return int(done.value.code or 0)


@pytest.mark.parametrize("command", ["report", "analyze"])
def test_each_run_file_is_read_once(make_run: RunFactory, command: str) -> None:
    run = make_run(stale=True)
    with _counting() as counts:
        _run([command, str(run.path)])
    assert counts["test.json"] == 1 and counts["results.json"] == 1, counts
    # The first line's check, the report's pass and, for analyze, the checker's pass.
    assert counts["history.jsonl"] == (2 if command == "report" else 3), counts


def test_a_store_report_reads_each_run_once(make_run: RunFactory, store_root: Path) -> None:
    runs = [make_run(stale=stale) for stale in (True, False)]
    with _counting() as counts:
        assert _run(["report", str(store_root)]) == 0
    assert counts["test.json"] == len(runs) and counts["results.json"] == len(runs), counts
