"""The checker stays linear on the shapes that used to be quadratic (issue 10, item 7)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from checkers import check
from harness.history import event_from_dict
from tests.support.shapes import SHAPES

SMALL, LARGE = 10_000, 40_000


def seconds_to_check(shape: Callable[[int], Iterator[dict[str, Any]]], count: int) -> float:
    events = [event_from_dict(raw, line) for line, raw in enumerate(shape(count), 1)]
    began = time.perf_counter()
    check(events)
    return time.perf_counter() - began


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_four_times_the_input_takes_about_four_times_as_long(name: str) -> None:
    shape = SHAPES[name]
    small = min(seconds_to_check(shape, SMALL) for _ in range(3))
    large = min(seconds_to_check(shape, LARGE) for _ in range(2))
    # Quadratic growth would be 16x; linear is 4x, with room for a noisy shared machine.
    assert large < 8 * small + 0.2, (small, large)
