"""Histories shaped to hit the checker's worst paths, for the linear-time test and the bench."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

__all__ = ["SHAPES", "stray_ids", "unknown_prevs"]

_MS: Final = 1_000_000


def _event(index: int, process: int, kind: str, f: str, value: dict[str, Any]) -> dict[str, Any]:
    return {"index": index, "time": index * _MS, "process": process, "node": "w1", "type": kind,
            "f": f, "value": value}  # fmt: skip


def stray_ids(count: int) -> Iterator[dict[str, Any]]:
    """One read returning ``count`` ids no holder ever wrote (each a phantom-write)."""
    yield _event(0, 1, "invoke", "read", {"sink": "store", "key": "k"})
    entries = [{"id": f"ghost-{number}", "epoch": 1} for number in range(count)]
    yield _event(1, 1, "ok", "read", {"sink": "store", "key": "k", "entries": entries})


def unknown_prevs(count: int) -> Iterator[dict[str, Any]]:
    """``count`` read-modify-writes whose ``prev`` is not in the log, then one read of them all."""
    yield _event(0, 1, "invoke", "acquire", {"lock": "L"})
    yield _event(1, 1, "ok", "acquire", {"lock": "L", "epoch": 1})
    index = 2
    for number in range(count):
        value = {"lock": "L", "sink": "store", "key": "k", "id": f"w-{number}", "epoch": 1,
                 "prev": f"never-{number}"}  # fmt: skip
        yield _event(index, 1, "invoke", "write", value)
        yield _event(index + 1, 1, "ok", "write", value)
        index += 2
    yield _event(index, 1, "invoke", "read", {"sink": "store", "key": "k"})
    entries = [{"id": f"w-{number}", "epoch": 1} for number in range(count)]
    yield _event(index + 1, 1, "ok", "read", {"sink": "store", "key": "k", "entries": entries})


SHAPES: Final = {"stray ids in one read": stray_ids, "rmw prevs not in the log": unknown_prevs}
