"""Poll until a fault is observed in force (or undone), tightly at first, then backing off."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from nemeses.protocol import NemesisError

__all__ = ["CONFIRM_TIMEOUT_S", "observe"]

CONFIRM_TIMEOUT_S: Final = 5.0
"""How long a fault may take to show before it counts as not applied."""

# Signals land within microseconds; start polling at that scale so confirmation adds little.
_FIRST_SLEEP_S: Final = 0.000_05
_MAX_SLEEP_S: Final = 0.01


def observe(check: Callable[[], bool], what: str, timeout: float = CONFIRM_TIMEOUT_S) -> None:
    """Return once ``check()`` is true; raise :class:`NemesisError` naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = _FIRST_SLEEP_S
    while not check():
        if time.monotonic() > deadline:
            raise NemesisError(f"{what} was not observed within {timeout:g} s")
        time.sleep(pause)
        pause = min(pause * 2, _MAX_SLEEP_S)
