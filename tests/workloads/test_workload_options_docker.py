"""The workload options on a real reference cluster: writes spanning keys land on every key they
name. The matrix rows in ``matrices/detection.json`` (short leases: 100 epochs in 20 s, asserted
by its ``min_coverage``) and ``matrices/nightly.json`` check that each option stays valid on the
correct system and exposes a planted bug."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.record.spec import TestSpec
from harness.run.runner import run_test

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


def _run(spec: TestSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    outcome = run_test(spec, console=Console(stderr=True, force_terminal=False), progress=False)
    stored = outcome.run_dir.read_results()
    results = dict(stored.data) if stored is not None else {}
    assert outcome.error is None, outcome.error
    with outcome.run_dir.history.open() as lines:
        history = [json.loads(line) for line in lines]
    return results, history


def test_writes_spanning_keys_land_on_every_key_with_its_own_seq(tmp_path: Path) -> None:
    # No faults: this checks what the store and the history make of a spanning write, and a fault
    # that a loaded machine fails to apply would only make the verdict unknown.
    spec = TestSpec(
        keys=1000, keys_per_write=4, nemeses=(), time_limit=10, seed=16, store=tmp_path / "store"
    )
    results, history = _run(spec)
    assert results["valid"] is True, results.get("unknown_reasons")
    acked = [e["value"] for e in history if e["f"] == "write" and e["type"] == "ok"]
    assert acked
    shown: dict[str, int] = {}
    for event in history:
        if event["f"] == "read" and event["type"] == "ok":
            shown.update((entry["id"], entry["seq"]) for entry in event["value"]["entries"])
    for write in acked:
        items = [{"key": write["key"], "id": write["id"], "seq": write["seq"]}, *write["also"]]
        assert len({item["key"] for item in items}) == 4
        # One request, one fsync: the store numbered the items one after another.
        seqs = [item["seq"] for item in items]
        assert seqs == list(range(seqs[0], seqs[0] + 4))
        assert all(shown[item["id"]] == item["seq"] for item in items)
