"""The one duration parser of the command line: every option that takes a time takes ``500ms``,
``2s``, ``1.5m``, ``1h`` or plain seconds (``2``), the same way, whichever command it is on."""

from __future__ import annotations

import math
import re
from typing import Any, Final

import click

__all__ = ["Duration", "seconds_of"]

_DURATION: Final = re.compile(r"(.+?)\s*(ms|s|m|h)?")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds_of(text: str) -> float | None:
    """``"1500ms"`` -> 1.5; ``None`` when ``text`` is not a duration."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        return None
    try:
        number = float(match.group(1))
    except ValueError:
        return None
    return number * _UNITS[match.group(2) or "s"]


class Duration(click.ParamType[float]):
    """A click parameter type for a duration in seconds (see the module docstring).

    With ``positive`` a value of 0 or less, or not finite, is refused here; without it any number
    passes, and the spec's limits (:data:`harness.record.spec.LIMITS`, one table for the command
    line and the matrix files) say what is out of bounds.
    """

    name = "duration"

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """Seconds, or a usage error that shows how to write one."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds: float | None = float(value)
        else:
            seconds = seconds_of(str(value))
        if seconds is None or (self.positive and not 0 < seconds < math.inf):
            self.fail(f"{value!r} is not a duration; write e.g. 500ms, 5s, 2m or 1.5", param, ctx)
        return seconds
