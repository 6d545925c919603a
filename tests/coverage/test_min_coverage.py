"""``run-all`` rows may require a minimum coverage; rows planting a bug get the exposing fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.run.matrix import MatrixError, entries_from
from harness.run.store import new_run_dir
from harness.run.summary import summarize


def _stored(tmp_path: Path, coverage: dict[str, Any] | None) -> Any:
    run = new_run_dir("reference-append-pause", tmp_path / "store")
    spec = {"system": "reference", "workload": "append", "nemeses": ["pause"], "bugs": []}
    run.write_json(run.test_json, {"spec": spec, "lease_ttl": 1.0, "inventory": []})
    results: dict[str, Any] = {"valid": True, "anomaly_types": [], "expected_types": []}
    if coverage is not None:
        results["coverage"] = coverage
    run.write_json(run.results, results)
    run.history.write_text("")
    return summarize(run)


def _row(**extra: Any) -> Any:
    (entry,) = entries_from({"runs": [{"nemeses": ["pause"], **extra}]})
    return entry


def test_a_valid_run_below_the_minimum_coverage_is_a_surprise(tmp_path: Path) -> None:
    entry = _row(min_coverage={"stale_attempts": 1, "stops_past_lease": 2})
    weak = _stored(tmp_path, {"stale_attempts": 0, "stops_past_lease": {"pause": 1}})
    assert entry.expect.mismatch(weak) == (
        "too little coverage: stale_attempts 0 < 1, stops_past_lease 1 < 2"
    )
    strong = _stored(tmp_path, {"stale_attempts": 4, "stops_past_lease": {"pause": 1, "freeze": 1}})
    assert entry.expect.mismatch(strong) is None
    assert "no coverage section" in str(entry.expect.mismatch(_stored(tmp_path, None)))
    assert _row().expect.mismatch(weak) is None


@pytest.mark.parametrize(
    ("wanted", "message"),
    [
        ({"stale_writes": 1}, "unknown coverage metric 'stale_writes'"),
        ({"stale_attempts": -1}, "whole number"),
        ([1], "must be an object"),
    ],
)
def test_a_bad_min_coverage_names_the_problem(wanted: Any, message: str) -> None:
    with pytest.raises(MatrixError, match=message):
        _row(min_coverage=wanted)


def test_a_row_planting_a_bug_without_nemeses_gets_the_exposing_fault() -> None:
    (entry, named, aimed) = entries_from(
        {
            "runs": [
                {"bugs": ["epoch-in-memory"]},
                {"bugs": ["epoch-in-memory"], "nemeses": "kill"},
                {"bugs": ["epoch-in-memory"], "targets": "holder"},
            ]
        }
    )
    assert (entry.spec.nemeses, entry.spec.targets) == (("kill",), ("lock",))
    # The exposure fills every field the row leaves, the row's own win.
    assert (named.spec.nemeses, named.spec.targets) == (("kill",), ("lock",))
    assert (aimed.spec.nemeses, aimed.spec.targets) == (("kill",), ("holder",))
    assert json.dumps(entry.spec.to_json()["nemeses"]) == '["kill"]'
