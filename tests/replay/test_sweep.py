"""``fencecheck sweep``: the grid, the per-cell counts, refused cells, the table and the page.

The grid tests judge runs by the rule the reference system obeys (an unfenced store accepts a
stale write when a holder pause outlasts the lease; the runner refuses a no-store-check run whose
pauses cannot outlast it); the Docker test runs ``sweep --quick`` on real clusters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers import check_file
from harness.cli import EXIT_VALID
from harness.run.runner import RunError, RunOutcome
from harness.run.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.store import new_run_dir
from harness.run.sweep import QUICK, Grid, cell_specs, render_html, run_sweep
from tests.support.cli import fencecheck


def _rule(spec: RunSpec) -> RunOutcome:
    (multiple,) = spec.fault_lengths
    if spec.bugs and multiple <= 1:
        raise RunError("--bug no-store-check cannot show in this run: no fault outlasts the TTL")
    run = new_run_dir(spec.test_name, spec.store)
    stale = bool(spec.bugs) and multiple > 1
    run.write_json(run.test_json, {"spec": spec.to_json()})
    run.write_json(
        run.results, {"valid": not stale, "anomaly_types": ["stale-write"] if stale else []}
    )
    return RunOutcome(run, check_file(run.history), interrupted=False)


def test_every_cell_counts_its_runs_and_refused_cells_say_why(tmp_path: Path) -> None:
    grid = Grid(ttls=(0.5, 1.0), multiples=(0.8, 3.0), seeds=(1, 2))
    cells = run_sweep(grid, _rule, tmp_path / "store")
    shown = {(c.variant.label, c.ttl, c.multiple): c.shown() for c in cells}
    assert shown == {
        ("fenced", 0.5, 0.8): "0/2",
        ("fenced", 0.5, 3.0): "0/2",
        ("fenced", 1.0, 0.8): "0/2",
        ("fenced", 1.0, 3.0): "0/2",
        ("unfenced (no-store-check)", 0.5, 0.8): "refused",
        ("unfenced (no-store-check)", 0.5, 3.0): "2/2",
        ("unfenced (no-store-check)", 1.0, 0.8): "refused",
        ("unfenced (no-store-check)", 1.0, 3.0): "2/2",
    }
    refused = next(c for c in cells if c.refused)
    assert refused.fraction is None and "cannot show" in (refused.refused or "")
    page = render_html(grid, cells)
    assert page.count("<table>") == 2
    assert "2/2 (100%)" in page and "0/2 (0%)" in page and 'title="--bug no-store-check' in page


def test_a_cell_pauses_only_the_holder_for_its_length_one_run_per_seed(tmp_path: Path) -> None:
    variant = QUICK.variants[1]
    specs = cell_specs(QUICK, variant, 0.5, 3.0, tmp_path)
    assert [s.seed for s in specs] == list(QUICK.seeds)
    (spec,) = specs
    assert (spec.nemeses, spec.targets, spec.fault_lengths) == (("pause",), ("holder",), (3.0,))
    assert spec.bugs == ("no-store-check",)
    spec.check()
    assert spec.time_limit >= 2 * (3.0 + 4.0) * 0.5  # room for two pauses


@pytest.mark.docker
def test_sweep_quick_measures_fenced_at_zero_and_unfenced_failing_past_the_lease(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    done = fencecheck("sweep", "--quick", "--store", str(store))
    story = done.stdout + done.stderr[-3000:]
    assert done.returncode == EXIT_VALID, story
    page = (store / "sweep.html").read_text()
    assert page.count("0/1 (0%)") == 3, story  # fenced: every pause length, no stale write
    assert "1/1 (100%)" in page, story  # unfenced, pause 3 x TTL
    assert page.count("refused") == 2, story  # unfenced, pauses within the lease
    runs = list(store.glob("sweep-*/*/results.json"))
    assert len(runs) == 4
    assert sum("stale-write" in json.loads(r.read_text())["anomaly_types"] for r in runs) == 1
