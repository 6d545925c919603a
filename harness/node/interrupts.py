"""Signals during a run: SIGTERM and SIGHUP behave like Ctrl-C; the first one is recorded the moment
it arrives, and healing, teardown, the check of what was recorded and the report are never cut
short by it or by a later one; a later one only cuts waiting short (the wait for operations still
in flight), never the heal, the check or the record (docs/design.md §8, "Interruptions")."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType

__all__ = [
    "STOP_SIGNALS",
    "Interrupted",
    "hurried",
    "interrupts_deferred",
    "interrupts_once",
    "shielded",
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


@dataclass
class _Once:
    """The state of the innermost :func:`interrupts_once`: the first signal, and whether it may
    be raised now."""

    seen: list[Interrupted]
    later: Callable[[int], None]
    """Announces a signal that is not the first."""
    shields: int = 0


_ACTIVE: list[_Once] = []
"""The :func:`interrupts_once` blocks open on the main thread, innermost last."""


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold the stop signals until the block ends, then deliver the first one that came.

    Inside :func:`interrupts_once` the signal is recorded the moment it arrives (its time is the
    arrival's, not the delivery's) and raised when the block ends.
    """
    if not _on_main_thread():
        yield
        return
    pending: list[int] = []
    once = _ACTIVE[-1] if _ACTIVE else None
    first: list[Interrupted] = []
    """The run's first interruption, when it came during this block (to raise at its end)."""

    def remember(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)
        if once is None:
            return
        if once.seen:
            once.later(signum)
        else:
            first.append(Interrupted(signum))
            once.seen.append(first[0])

    previous = {sig: signal.signal(sig, remember) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if once is not None:
        if first and once.shields == 0:
            raise first[0]
    elif pending:
        signal.raise_signal(pending[0])


@contextmanager
def shielded() -> Iterator[None]:
    """Inside :func:`interrupts_once`: the first stop signal is recorded (when it came) but not
    raised, so what runs here (checking what was recorded, writing the results and the report)
    always finishes; the caller reads the record afterwards."""
    once = _ACTIVE[-1] if _ACTIVE and _on_main_thread() else None
    if once is not None:
        once.shields += 1
    try:
        yield
    finally:
        if once is not None:
            once.shields -= 1


@contextmanager
def sigterm_interrupts(*, ctrl_c: bool = False) -> Iterator[None]:
    """Turn SIGTERM and SIGHUP (and Ctrl-C too with ``ctrl_c``) into :class:`Interrupted` in the
    main thread, so they heal like Ctrl-C and the message can name the signal."""
    if not _on_main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signum)

    caught = STOP_SIGNALS if ctrl_c else STOP_SIGNALS[1:]
    previous = {sig: signal.signal(sig, interrupt) for sig in caught}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def hurried(seen: Sequence[Interrupted]) -> bool:
    """True once a second stop signal came (``seen`` is what :func:`interrupts_once` yields):
    waits for operations still in flight end then, and the rest of the stop goes on."""
    return len(seen) > 1


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

    Yields the list of the interruptions, the first one first; a wait that a second signal may
    cut short (see :func:`hurried`) reads it.
    """
    seen: list[Interrupted] = []
    if not _on_main_thread():
        yield seen
        return

    def later(signum: int) -> None:
        if seen:
            seen.append(Interrupted(signum))  # read by waits that a second signal cuts short
        announce(
            f"{signal.Signals(signum).name}: no more waiting for operations in flight (they "
            "stay open in the history); still healing, checking what was recorded and writing "
            "the report: it ends on its own in a moment"
        )

    once = _Once(seen, later)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if seen or already:
            later(signum)
            return
        seen.append(Interrupted(signum))
        if once.shields == 0:
            raise seen[0]

    previous = {sig: signal.signal(sig, interrupt) for sig in STOP_SIGNALS}
    _ACTIVE.append(once)
    try:
        yield seen
    finally:
        _ACTIVE.remove(once)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
