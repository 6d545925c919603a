"""The detection matrix (``matrices/detection.json``): the correct reference system is valid under
every fault, and each bug switch, under the fault that exposes it, is invalid with the anomaly it
should produce.

Each case is a whole short run on a real cluster: real agents, real SIGSTOP, real iptables, real
restarts. The seed is fixed in the matrix, so a failure replays with the same schedule and
choices; ``fencecheck run-all --matrix matrices/detection.json`` runs the same thing by hand.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from harness.report import summarize
from harness.run.matrix import MatrixEntry, load_matrix
from harness.run.runner import run_test

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

MATRIX = Path(__file__).resolve().parents[2] / "matrices" / "detection.json"
ENTRIES = load_matrix(MATRIX)


def _case_id(entry: MatrixEntry) -> str:
    spec = entry.spec
    parts = [("+".join(spec.bugs) or "correct"), spec.workload, "+".join(spec.nemeses) or "none"]
    if spec.workload_shape:
        parts.append(spec.workload_shape.replace(", ", "-").replace(" ", "").replace("/", "-per-"))
    return "-".join(parts)


@pytest.mark.parametrize("entry", ENTRIES, ids=[_case_id(e) for e in ENTRIES])
def test_detection_matrix(entry: MatrixEntry, tmp_path: Path) -> None:
    spec = replace(entry.spec, store=tmp_path / "store")
    outcome = run_test(spec, console=Console(stderr=True, force_terminal=False), progress=False)
    summary = summarize(outcome.run_dir)
    stored = outcome.run_dir.read_results()
    results = dict(stored.data) if stored is not None else {}
    story = (
        f"{_case_id(entry)}: valid={results.get('valid')} anomalies={results.get('anomaly_types')}"
        f" expected={results.get('expected_types')} unknown={results.get('unknown_reasons')}"
        f" (run dir {outcome.run_dir.path})"
    )
    assert not outcome.interrupted, story
    assert "run_error" not in results, story
    unapplied = [f for f in results.get("faults", []) if f.get("applied") is False]
    assert not unapplied, story
    assert results.get("faults") or not spec.nemeses, f"no fault was injected: {story}"
    mismatch = entry.expect.mismatch(summary)
    assert mismatch is None, f"{mismatch}; {story}"
