"""``run`` refuses, before any container starts, a spec that cannot expose its planted bug."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.exposure import EXPOSURES, exposing_faults
from systems.reference.adapter import BUG_SWITCHES


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", "run", "--store", str(tmp_path / "store"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["--workload", "rmw", "--bug", "unfenced-path"], "--workload sinks"),
        (["--bug", "epoch-in-memory", "--nemesis", "kill", "--target", "holder"], "--target lock"),
        (["--bug", "epoch-in-memory", "--nemesis", "kill"], "--target lock"),
        (["--bug", "no-store-check", "--fault-lengths", "0.5"], "--fault-lengths 3"),
        (["--bug", "store-forgets", "--nemesis", "pause"], "--nemesis restart-while-paused"),
        (["--fault-lengths", "100", "--time-limit", "5"], "--time-limit"),
        (["--fault-lengths", "1e9", "--time-limit", "5"], "--fault-lengths"),
        (["--bug", "no-store-check", "--nemesis", "none"], "--nemesis pause"),
    ],
    ids=[
        "rmw-unfenced",
        "kill-holder",
        "kill-default-target",
        "short",
        "wrong-kind",
        "none-fits",
        "beyond-bounds",
        "no-faults",
    ],
)
def test_an_unexposable_spec_exits_3_with_the_fix_and_starts_nothing(
    tmp_path: Path, args: list[str], fix: str
) -> None:
    done = _run(tmp_path, *args)
    assert done.returncode == 3, done.stderr
    assert fix in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "store").exists()


def test_without_nemesis_run_picks_the_fault_that_exposes_the_switch(tmp_path: Path) -> None:
    # Too short for any fault, so it stops before Docker, naming the fault it picked.
    done = _run(tmp_path, "--bug", "epoch-in-memory", "--time-limit", "2")
    assert done.returncode == 3
    assert "--nemesis kill" in done.stderr
    assert exposing_faults(["epoch-in-memory"]) == (("kill",), ("lock",))
    assert exposing_faults(["store-forgets"]) == (("restart-while-paused",), ("holder",))
    assert exposing_faults(["epoch-in-memory", "store-forgets"]) is None
    assert exposing_faults([]) is None


def test_every_reference_bug_switch_has_an_exposure() -> None:
    assert set(EXPOSURES) == set(BUG_SWITCHES)
