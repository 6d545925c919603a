"""An interrupted run heals, tears down, and still leaves a checked, analyzable history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.node.docker.cluster import LABEL_RUN
from harness.node.docker.engine import engine

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


def _wait_for_events(history: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if history.exists() and sum(1 for _ in history.open("rb")) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"the run recorded fewer than {count} events in {timeout} s")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_heals_tears_down_and_stays_analyzable(
    signum: int, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--time-limit",
            "120",
            "--nemesis",
            "pause,partition",
            "--store",
            str(store),
            "--no-progress",
            "--seed",
            "7",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        history = store / "latest" / "history.jsonl"
        _wait_for_events(history, 200, timeout=90)
        run_id = json.loads((store / "latest" / "test.json").read_text())["run_id"]
        run.send_signal(signum)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode in (0, 1, 2), err.decode()
    client = engine()
    assert not client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    assert not client.networks.list(filters={"label": f"{LABEL_RUN}={run_id}"})
    results = json.loads((store / "latest" / "results.json").read_text())
    assert results["valid"] in (True, "unknown"), results.get("anomaly_types")
    again = subprocess.run(
        [sys.executable, "-m", "harness", "analyze", str(store / "latest"), "--json"],
        capture_output=True,
        check=False,
    )
    assert again.returncode == run.returncode, again.stderr.decode()
    assert json.loads(again.stdout)["valid"] == results["valid"]
