"""A store that saves its highest-seen mark only every few writes (``lazy-mark``) is caught by
``fencecheck run`` with nothing but the bug named: the default schedule overlaps a store restart
with a holder's pause, right after the next holder took the lease over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import EXIT_INVALID
from nemeses import DEFAULT_NEMESES, DEFAULT_TTL_MULTIPLES
from tests.support.cli import fencecheck

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

_SEED = "179"
"""A seed whose 30 s schedule holds five takeover restarts, none of their pauses aimed inside a
write call (which may find the write already at the store), each after the new holder's 1-3
writes: a restart misses only when one of those writes was the 16th, which saved the mark (seed
103's four, two of them aimed inside a call, missed together in one CI run)."""


def test_lazy_mark_is_caught_with_the_default_faults_lengths_and_work(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = fencecheck(
        "run",
        "--system",
        "reference",
        "--bug",
        "lazy-mark",
        "--seed",
        _SEED,
        "--store",
        str(store),
        "--no-progress",
        "--json",
    )
    story = run.stdout[-3000:] + run.stderr[-3000:]
    assert run.returncode == EXIT_INVALID, story
    result = json.loads(run.stdout)
    assert "stale-write" in result["anomaly_types"], story
    test = json.loads((Path(result["run_dir"]) / "test.json").read_text())
    spec = test["spec"]
    assert tuple(spec["nemeses"]) == DEFAULT_NEMESES
    assert spec["fault_lengths"] == [] and spec["work_ms"] == 50 and spec["time_limit"] == 30
    windows = test["schedule"]["windows"]
    pauses = [w for w in windows if "overlaps" not in w["params"]]
    assert {w["ttl_multiple"] for w in pauses} <= set(DEFAULT_TTL_MULTIPLES)
    # restart-while-paused is played as a pause and a kill of the store aimed at the takeover.
    takeovers = [
        w
        for w in windows
        if w["kind"] == "kill"
        and w["params"].get("anchor") == "takeover"
        and "overlaps" in w["params"]
    ]
    assert takeovers, "the schedule overlapped no restart with a takeover"
    assert result["coverage"]["restarts"].get("store", 0) >= 1, story
