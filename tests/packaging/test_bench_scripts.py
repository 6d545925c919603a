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
SCRIPTS = sorted(path for path in (ROOT / "bench").glob("*.py") if path.name != "__init__.py")


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
