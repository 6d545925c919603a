"""Every ``bench/`` script starts: its imports resolve against today's code and ``--help`` answers.

The bench scripts run nowhere else in CI (they take minutes), so an import a refactor broke would
otherwise be found only by whoever needs the numbers next.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = frozenset(("__init__.py", "switch_runs.py"))
"""What the scripts import and nobody runs: no command line of its own."""
SCRIPTS = sorted(path for path in (ROOT / "bench").glob("*.py") if path.name not in MODULES)


def test_the_late_request_bench_is_among_the_scripts() -> None:
    # The glob picks every script; this pins the one the late-request numbers come from.
    assert ROOT / "bench" / "late_requests.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.stem for path in SCRIPTS])
def test_the_bench_script_starts(script: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower(), done.stdout[-2000:]
