"""The checker stays linear on the shapes that used to be quadratic (issue 10, item 7).

Work is counted, not timed: the number of lines of the checker's own code executed is exact and
the same on any machine, so the test cannot flake under load. A quadratic step written in Python
multiplies that count by 16 when the input grows 4 times. Wall time on large histories is measured
by ``bench/checker.py``, where a number is for reading, not for gating.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import checkers
from checkers import check
from harness.record import event_from_dict
from tests.support.shapes import SHAPES

SMALL, LARGE = 1_000, 4_000
_CHECKERS = str(Path(checkers.__file__).parent)


def lines_to_check(shape: Callable[[int], Iterator[dict[str, Any]]], count: int) -> int:
    """How many lines of ``checkers`` run while checking ``count`` units of ``shape``."""
    events = [event_from_dict(raw, line) for line, raw in enumerate(shape(count), 1)]
    executed = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal executed
        if event == "line":
            executed += 1
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Any:
        # Only the checker's own frames are traced line by line; the rest runs untraced.
        return local if frame.f_code.co_filename.startswith(_CHECKERS) else None

    sys.settrace(calls)
    try:
        check(events)
    finally:
        sys.settrace(None)
    return executed


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_four_times_the_input_costs_about_four_times_the_work(name: str) -> None:
    shape = SHAPES[name]
    small = lines_to_check(shape, SMALL)
    large = lines_to_check(shape, LARGE)
    # Linear is 4x plus a constant; quadratic would be 16x.
    assert large < 5 * small, (small, large)
