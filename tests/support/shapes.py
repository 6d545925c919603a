"""Histories shaped to hit the checker's worst paths, for the linear-time test and the bench."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any, Final

__all__ = [
    "SHAPES",
    "falling_grants",
    "falling_writes",
    "shuffled_grants",
    "stray_ids",
    "unknown_prevs",
]

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


def _grants(epochs: Iterable[int]) -> Iterator[dict[str, Any]]:
    """One grant per epoch, in the order given, each by its own holder process."""
    for number, epoch in enumerate(epochs):
        process = 1 + number % 64
        yield _event(2 * number, process, "invoke", "acquire", {"lock": "L"})
        yield _event(2 * number + 1, process, "ok", "acquire", {"lock": "L", "epoch": epoch})


def falling_grants(count: int) -> Iterator[dict[str, Any]]:
    """``count`` grants of ever lower epochs (each a grant-regression)."""
    return _grants(range(count, 0, -1))


def shuffled_grants(count: int) -> Iterator[dict[str, Any]]:
    """``count`` grants of distinct epochs in a seeded random order."""
    epochs = list(range(1, count + 1))
    random.Random(count).shuffle(epochs)
    return _grants(epochs)


def falling_writes(count: int) -> Iterator[dict[str, Any]]:
    """One holder granted ``count`` epochs at once, writing with ever lower ones (stale writes
    that a fenced store accepted)."""
    yield from _grants(range(1, count + 1))
    index = 2 * count
    for number, epoch in enumerate(range(count, 0, -1)):
        process = 1 + number % 64
        value = {"lock": "L", "sink": "store", "key": f"k{number % 8}", "id": f"w-{number}",
                 "epoch": epoch}  # fmt: skip
        yield _event(index, process, "invoke", "write", value)
        yield _event(index + 1, process, "ok", "write", value)
        index += 2


SHAPES: Final = {
    "stray ids in one read": stray_ids,
    "rmw prevs not in the log": unknown_prevs,
    "falling grants": falling_grants,
    "shuffled grants": shuffled_grants,
    "one lock, falling write epochs": falling_writes,
}
