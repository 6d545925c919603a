"""A part lost mid-run is named in the verdict: a worker's agent killed from outside leaves the
final reads unread, and the verdict says whose agent was lost and what it answered, instead of
advising a final read the workload already has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import EXIT_UNKNOWN
from harness.node.docker.cluster import LABEL_NODE, LABEL_RUN
from harness.node.docker.engine import engine
from tests.support.cli import run_id_once_recording

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


def test_an_agent_killed_from_outside_is_named_not_advised_about(tmp_path: Path) -> None:
    store = tmp_path / "store"
    argv = [sys.executable, "-m", "harness", "run", "--system", "noop", "--nemesis", "none"]
    argv += ["--ttl", "0.5", "--time-limit", "4", "--workers", "1", "--seed", "8", "--json"]
    run = subprocess.Popen(
        [*argv, "--store", str(store), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    try:
        run_id = run_id_once_recording(store, run)
        (worker,) = engine().containers.list(
            filters={"label": [f"{LABEL_RUN}={run_id}", f"{LABEL_NODE}=w1"]}
        )
        worker.exec_run(["pkill", "-KILL", "-f", "agent.py"])
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == EXIT_UNKNOWN, err
    result = json.loads(out)
    reasons = " ".join(result["unknown_reasons"])
    assert "end the workload with a final read" not in reasons
    assert "lost during the final reads: w1's agent (unreachable" in reasons
    assert "key(s) left unread" in reasons
    assert result["lost"] and result["lost"][0].startswith("w1's agent")
