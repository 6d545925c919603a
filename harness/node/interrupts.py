"""Signals during a run: SIGTERM and SIGHUP behave like Ctrl-C, and healing, teardown and the check
of what was recorded cannot be cut short by a second signal."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from types import FrameType

__all__ = [
    "STOP_SIGNALS",
    "Interrupted",
    "interrupts_deferred",
    "interrupts_once",
    "sigterm_interrupts",
]

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, ``kill`` and a closed terminal or SSH session: each asks the run to stop in order."""


class Interrupted(KeyboardInterrupt):
    """The run was asked to stop (Ctrl-C, SIGTERM or SIGHUP): which signal, and when."""

    def __init__(self, signum: int) -> None:
        self.signal = signal.Signals(signum).name
        """The signal's name, e.g. ``SIGINT``."""
        self.at = datetime.now(UTC)
        """When it arrived."""
        super().__init__(f"{self.signal} at {self.at.isoformat(timespec='seconds')}")


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold the stop signals until the block ends, then deliver the first one that came."""
    if not _on_main_thread():
        yield
        return
    pending: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous = {sig: signal.signal(sig, remember) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`Interrupted` in the main thread, so they heal like
    Ctrl-C."""
    if not _on_main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS[1:]}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _say(text: str) -> None:
    print(text, file=sys.stderr)


@contextmanager
def interrupts_once(
    announce: Callable[[str], None] = _say, *, already: bool = False
) -> Iterator[list[Interrupted]]:
    """The first stop signal raises :class:`Interrupted`; later ones are only announced, so what
    follows the interruption (heal, teardown, checking and writing the history) runs to its end.
    With ``already``, every signal counts as a later one (the run is over; its report is being
    written).

    Yields the list that holds the first interruption once it happened.
    """
    seen: list[Interrupted] = []
    if not _on_main_thread():
        yield seen
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if seen or already:
            announce(
                f"{signal.Signals(signum).name}: finishing first: the heal, the check of what "
                "was recorded and the report; it ends on its own in a moment"
            )
            return
        seen.append(Interrupted(signum))
        raise seen[0]

    previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}
    try:
        yield seen
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
