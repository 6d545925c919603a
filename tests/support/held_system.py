"""The no-op system, able to hold a run inside one phase until a test lets it go.

A phase that passes in a millisecond (asking the system for its packages, just before the image
build) cannot be hit by a signal from outside at the right moment; a test sets
``FENCECHECK_TEST_HOLD`` to the phase and ``FENCECHECK_TEST_HOLD_DIR`` to a folder, waits for
``holding`` to appear there, signals the run, then creates ``release``. A hold never lasts more
than 30 s, so a test that fails half-way leaves no run stuck.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from systems.noop.adapter import NoopSystem

__all__ = ["HeldNoop", "hold"]

_LONGEST_S = 30.0


def hold(phase: str) -> None:
    """Wait here while the test holds ``phase`` (nothing when it holds another or none)."""
    if os.environ.get("FENCECHECK_TEST_HOLD") != phase:
        return
    folder = Path(os.environ["FENCECHECK_TEST_HOLD_DIR"])
    (folder / "holding").write_text(phase)
    deadline = time.monotonic() + _LONGEST_S
    while not (folder / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)


class HeldNoop(NoopSystem):
    """The no-op system; its package list is asked for as the image build begins."""

    name = "held-noop"

    def packages(self) -> tuple[str, ...]:
        """The no-op system's packages, after the hold of the ``image build`` phase."""
        hold("image build")
        return super().packages()
