"""A holder whose agent is killed backs off instead of flooding the history (issue 15, item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

_EVENT_BUDGET = 5_000


def test_a_30s_kill_run_on_the_holder_stays_within_a_few_thousand_events(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--nemesis",
            "kill",
            "--target",
            "holder",
            "--time-limit",
            "30",
            "--seed",
            "11",
            "--store",
            str(store),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 2), done.stderr[-2000:]
    run = store / "latest"
    events = sum(1 for _ in (run / "history.jsonl").open("rb"))
    results = json.loads((run / "results.json").read_text())
    kills = [f for f in results["faults"] if f["kind"] == "kill" and f["applied"]]
    assert kills, "the schedule killed no agent, so the test proves nothing"
    assert results["counts"]["accepted_writes"] > 0
    assert events < _EVENT_BUDGET, f"{events} events for a 30 s run"
