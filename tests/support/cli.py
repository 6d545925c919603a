"""Running the command line of this checkout as a user would, in a child process.

The ``fencecheck`` console script may point at another checkout, so tests run
``python -m harness`` with the interpreter running them, from the repository root.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["fencecheck"]

_ROOT = Path(__file__).resolve().parents[2]


def fencecheck(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``fencecheck ARGS`` and return what it printed and its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        cwd=_ROOT,
        timeout=timeout,
        check=False,
    )
