"""Signals during a run: SIGTERM behaves like Ctrl-C, and healing/teardown cannot be cut short."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Interrupted", "interrupts_deferred", "sigterm_interrupts"]


class Interrupted(KeyboardInterrupt):
    """The run was asked to stop (Ctrl-C or SIGTERM)."""


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver the first one that came."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous = {sig: signal.signal(sig, remember) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM into :class:`Interrupted` in the main thread, so it heals like Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
