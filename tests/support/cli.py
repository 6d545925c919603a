"""Running the command line of this checkout as a user would, in a child process.

The ``fencecheck`` console script may point at another checkout, so tests run
``python -m harness`` with the interpreter running them, from the repository root.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["fencecheck", "run_id_once_recording"]

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


def run_id_once_recording(store: Path, run: subprocess.Popen[str], timeout: float = 60) -> str:
    """Wait until the ``fencecheck run`` child ``run`` records into ``store`` (its history has
    grown past a few events), then return the run's id from its ``test.json``."""
    deadline = time.monotonic() + timeout
    while not any(h.stat().st_size > 2000 for h in store.glob("*/*/history.jsonl")):
        assert time.monotonic() < deadline and run.poll() is None, "the run never got going"
        time.sleep(0.1)
    (test_file,) = store.glob("*/*/test.json")
    run_id: str = json.loads(test_file.read_text())["run_id"]
    return run_id
