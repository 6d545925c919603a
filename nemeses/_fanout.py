"""Do one thing to several nodes at once, collecting every failure instead of stopping at one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["Failures", "on_each"]

_T = TypeVar("_T")
_R = TypeVar("_R")

Failures = list[tuple[_T, Exception]]
"""The items whose action raised, with what it raised."""


def on_each(items: Sequence[_T], action: Callable[[_T], _R]) -> tuple[list[_R], Failures[_T]]:
    """Run ``action`` on every item, in parallel when there are several.

    Returns the results of those that succeeded and ``(item, exception)`` for those that failed,
    both in item order. A single item runs on the calling thread: most faults hit one node, and a
    thread hop would add to the latency a bench measures.
    """
    results: list[_R] = []
    failures: Failures[_T] = []

    def settle(item: _T, outcome: Callable[[], _R]) -> None:
        try:
            results.append(outcome())
        except Exception as problem:  # every failure is reported, whatever raised it
            failures.append((item, problem))

    if len(items) == 1:
        settle(items[0], lambda: action(items[0]))
        return results, failures
    with ThreadPoolExecutor(max(1, len(items)), thread_name_prefix="nemesis") as pool:
        futures = [(item, pool.submit(action, item)) for item in items]
        for item, future in futures:
            settle(item, future.result)
    return results, failures
