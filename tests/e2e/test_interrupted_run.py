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


def _wait_for_events(store: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        histories = list(store.glob("*/*/history.jsonl"))
        if histories and sum(1 for _ in histories[0].open("rb")) >= count:
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
        # store/latest moves to a run only once it is checked: find the run in progress.
        _wait_for_events(store, 200, timeout=90)
        (running,) = store.glob("*/*/test.json")
        run_id = json.loads(running.read_text())["run_id"]
        run.send_signal(signum)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    # Never valid: the run was cut short (unknown), or what it recorded was invalid.
    assert run.returncode in (1, 2), err.decode()
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
