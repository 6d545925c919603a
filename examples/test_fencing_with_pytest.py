"""Fencing tests in a team's own pytest suite, with fencecheck's plugin (installed with the
package: no import needed for the fixture).

    python3 -m pytest examples/test_fencing_with_pytest.py

Each test starts a real cluster (about 20 s each); with no Docker engine they are skipped with
the reason ``fencecheck doctor`` gives. ``--fencecheck-store store`` keeps the runs in ./store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pytest_plugin import RunSpec, matrix_rows
from harness.run.matrix import MatrixEntry

MATRIX = Path(__file__).with_name("pytest-matrix.json")


def test_a_planted_missing_store_check_is_caught(fencecheck: RunSpec) -> None:
    run = fencecheck(
        bugs=("no-store-check",), nemeses=("pause",), fault_lengths=(3.0,), time_limit=12, seed=1
    )
    assert run.verdict == "invalid", run.why
    assert "stale-write" in run.anomaly_types, run.why


@pytest.mark.parametrize("row", matrix_rows(MATRIX))
def test_matrix_row(fencecheck: RunSpec, row: MatrixEntry) -> None:
    fencecheck.expect(row)
