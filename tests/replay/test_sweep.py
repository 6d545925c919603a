"""``fencecheck sweep``: the grid, the per-design counts, cells that could not run, the table and
the page.

The grid tests judge runs by the rule the reference system obeys (an unfenced sink accepts a stale
write when a holder pause outlasts the lease plus the lock-delay; a fenced one never does) and
write the per-sink section of ``results.json`` the checker writes; the Docker test runs
``sweep --quick`` on real clusters, and the browser test opens its page.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from checkers import check_file
from harness.cli import EXIT_VALID
from harness.record.results import StoredResults
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.judge import RunOutcome
from harness.run.plan import RunError
from harness.run.store import new_run_dir
from harness.run.sweep import QUICK, Grid, cell_specs, render_html, run_sweep, stale_on, variants
from nemeses import Schedule
from tests.support.browser import chromium
from tests.support.cli import fencecheck


def _sink(fenced: bool, stale: bool) -> dict[str, object]:
    counts = {"stale-write": 1} if stale else {}
    return {"fenced": fenced, "anomalies": {}, "expected": counts}


def _rule(spec: RunSpec, schedule: Schedule | None = None) -> RunOutcome:
    (multiple,) = spec.fault_lengths
    stale = multiple > 1 + spec.lock_delay / spec.ttl
    run = new_run_dir(spec.test_name, spec.store)
    run.write_json(run.test_json, {"spec": spec.to_json()})
    sinks = {"store": _sink(True, False), "audit": _sink(False, stale)}
    run.write_json(run.results, {"valid": True, "anomaly_types": [], "sinks": sinks})
    return RunOutcome(run, check_file(run.history), interrupted=False)


def test_each_design_counts_its_own_sinks_and_designs_with_one_lock_delay_share_runs(
    tmp_path: Path,
) -> None:
    grid = Grid(ttls=(0.5, 1.0), multiples=(0.15, 0.8, 3.0, 8.0), seeds=(1, 2))
    cells = run_sweep(grid, _rule, tmp_path / "store")
    shown = {(c.variant.label, c.ttl, c.multiple): c.shown() for c in cells}
    for ttl in (0.5, 1.0):
        assert [shown["fenced", ttl, m] for m in grid.multiples] == ["0/2"] * 4
        unfenced = [shown["unfenced (no fencing check)", ttl, m] for m in grid.multiples]
        assert unfenced == ["0/2", "0/2", "2/2", "2/2"]
        delayed = [shown["unfenced + lock-delay 3xTTL", ttl, m] for m in grid.multiples]
        assert delayed == ["0/2", "0/2", "0/2", "2/2"]
    # Two lock-delays (0 and 3 TTLs) x 2 TTLs x 4 pauses x 2 seeds; the fenced design is
    # counted in the runs without lock-delay, and no cell is left out.
    assert len(list((tmp_path / "store").glob("sweep-*/*/results.json"))) == 32
    fenced = next(c for c in cells if c.variant.label == "fenced")
    assert fenced.runs == 2 and fenced.fraction == 0.0
    page = render_html(grid, cells)
    assert page.count("<table>") == 2
    assert "2/2 (100%)" in page and "0/2 (0%)" in page
    assert "pause &gt; lease left + 3x TTL (&lt;= 4x)" in page and "never" in page


def test_a_refused_cell_says_why_and_is_kept_in_the_table(tmp_path: Path) -> None:
    def refuse_short(spec: RunSpec, schedule: Schedule | None) -> RunOutcome:
        if spec.fault_lengths[0] < 1:
            raise RunError("--nemesis pause schedules no fault at all in this run")
        return _rule(spec)

    grid = Grid(ttls=(1.0,), multiples=(0.8, 3.0), seeds=(1, 2), variants=variants()[:2])
    counted: list[int] = []
    cells = run_sweep(grid, refuse_short, tmp_path / "store", lambda _, runs: counted.append(runs))
    assert [c.shown() for c in cells] == ["not run", "0/2", "not run", "2/2"]
    assert counted == [2, 1, 1]  # both seeds of the refused cell at once, then one per run
    refused = cells[0]
    assert refused.fraction is None and "schedules no fault" in (refused.refused or "")
    page = render_html(grid, cells)
    assert page.count('class=na data-design="fenced"') == 1
    assert 'title="--nemesis pause schedules no fault' in page


def test_a_system_without_an_unfenced_sink_marks_the_unfenced_rows(tmp_path: Path) -> None:
    results = {"sinks": {"kv": {"fenced": True, "anomalies": {}, "expected": {}}}}
    sinks = StoredResults.from_json({"valid": True, **results}).sinks
    assert stale_on(sinks, fenced=True) is False
    assert stale_on(sinks, fenced=False) is None

    def fenced_only(spec: RunSpec, schedule: Schedule | None) -> RunOutcome:
        run = new_run_dir(spec.test_name, spec.store)
        run.write_json(run.results, {"valid": True, **results})
        return RunOutcome(run, check_file(run.history), interrupted=False)

    grid = Grid(ttls=(1.0,), multiples=(3.0,), seeds=(1,))
    cells = run_sweep(grid, fenced_only, tmp_path / "store")
    assert [c.shown() for c in cells] == ["0/1", "not run", "not run"]
    assert "no unfenced sink" in (cells[1].refused or "")


def test_a_cell_pauses_only_the_holder_for_its_length_with_no_bug_one_run_per_seed(
    tmp_path: Path,
) -> None:
    specs = cell_specs(QUICK, 3.0, 0.5, 0.15, tmp_path)
    assert [s.seed for s in specs] == list(QUICK.seeds)
    (spec,) = specs
    assert (spec.nemeses, spec.targets, spec.fault_lengths) == (("pause",), ("holder",), (0.15,))
    assert (spec.bugs, spec.workload, spec.lock_delay) == ((), "sinks", 1.5)
    spec.check()
    assert spec.time_limit >= round(3 * (0.15 + 4.0) * 0.5, 1)  # room for three pauses


def test_a_rate_grid_runs_the_holders_clock_at_each_rate_instead_of_pausing_it(
    tmp_path: Path,
) -> None:
    grid = Grid(ttls=(1.0,), seeds=(1,), rates=(0.25, 2.0), variants=variants()[:2])
    played: list[tuple[tuple[str, ...], set[float]]] = []

    def slow_is_stale(spec: RunSpec, schedule: Schedule | None) -> RunOutcome:
        assert schedule is not None and schedule.windows
        rates = {float(w.params["rate"]) for w in schedule.windows}
        played.append((spec.nemeses, rates))
        assert {w.kind for w in schedule.windows} == {"clock-rate"}
        run = new_run_dir(spec.test_name, spec.store)
        sinks = {"store": _sink(True, False), "audit": _sink(False, rates == {0.25})}
        run.write_json(run.results, {"valid": True, "anomaly_types": [], "sinks": sinks})
        return RunOutcome(run, check_file(run.history), interrupted=False)

    cells = run_sweep(grid, slow_is_stale, tmp_path / "store")
    assert played == [(("clock-rate",), {0.25}), (("clock-rate",), {2.0})]
    assert [c.shown() for c in cells] == ["0/1", "0/1", "1/1", "0/1"]
    page = render_html(grid, cells)
    assert "holder clock at 0.25&times;" in page and "rate &lt; 1" in page


@dataclass(frozen=True)
class _Quick:
    """One real ``sweep --quick`` for the module: its store and what it printed."""

    store: Path
    done: subprocess.CompletedProcess[str]

    @property
    def story(self) -> str:
        return self.done.stdout + self.done.stderr[-3000:]


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> _Quick:
    store = tmp_path_factory.mktemp("sweep") / "store"
    return _Quick(store, fencecheck("sweep", "--quick", "--store", str(store)))


@pytest.mark.docker
def test_sweep_quick_measures_fenced_at_zero_and_unfenced_failing_past_the_lease(
    quick: _Quick,
) -> None:
    story = quick.story
    assert quick.done.returncode == EXIT_VALID, story
    page = (quick.store / "sweep.html").read_text()
    cells = {(design, pause): shown for design, pause, shown in _cells(page)}
    assert len(cells) == 12, story  # three designs x four pauses: no cell dropped
    assert [cells["fenced", p] for p in ("0.15", "0.8", "3", "8")] == ["0/1 (0%)"] * 4, story
    assert cells["unfenced (no fencing check)", "0.15"] == "0/1 (0%)", story
    assert cells["unfenced (no fencing check)", "3"] == "1/1 (100%)", story
    assert cells["unfenced (no fencing check)", "8"] == "1/1 (100%)", story
    assert cells["unfenced + lock-delay 3xTTL", "0.15"] == "0/1 (0%)", story
    assert cells["unfenced + lock-delay 3xTTL", "3"] == "0/1 (0%)", story
    assert cells["unfenced + lock-delay 3xTTL", "8"] == "1/1 (100%)", story
    assert "unfenced + lock-delay 3xTTL" in quick.done.stdout  # the printed table
    runs = list(quick.store.glob("sweep-*/*/results.json"))
    assert len(runs) == 8, story  # two lock-delays x four pauses, one seed
    # A stale write behind a lock-delay counts against its run; on a plain unfenced sink it is
    # the design's known weakness (expected, the run stays valid).
    delayed = [json.loads(r.read_text())["valid"] for r in runs if "lock-delay" in str(r)]
    assert sorted(delayed) == [False, True, True, True], story


@pytest.mark.docker
@pytest.mark.browser
def test_the_sweep_quick_page_renders_its_table_in_a_browser(quick: _Quick, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    assert quick.done.returncode == EXIT_VALID, quick.story
    for driver in chromium():
        driver.get((quick.store / "sweep.html").resolve().as_uri())
        errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        (table,) = driver.find_elements(By.TAG_NAME, "table")
        assert table.is_displayed() and table.size["width"] > 400
        heads = [th.text for th in table.find_elements(By.CSS_SELECTOR, "tr:first-child th")]
        assert heads[0] == "design" and heads[-1] == "expected to fail"
        assert [h.split(" (")[0] for h in heads[1:-1]] == [
            f"pause {m}\u00d7TTL" for m in ("0.15", "0.8", "3", "8")
        ]
        cells = table.find_elements(By.CSS_SELECTOR, "td[data-design]")
        assert len(cells) == 12 and all(c.is_displayed() and c.text for c in cells)
        shown = {(c.get_attribute("data-design"), c.get_attribute("data-pause")): c for c in cells}
        failed = shown["unfenced (no fencing check)", "8"]
        held = shown["fenced", "8"]
        assert failed.text == "1/1 (100%)" and held.text == "0/1 (0%)"
        # the cells are coloured by what they found, red apart from green
        assert failed.value_of_css_property("background-color") != held.value_of_css_property(
            "background-color"
        )
        shot = tmp_path / "sweep.png"
        driver.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 0


def _cells(page: str) -> list[tuple[str, str, str]]:
    """(design, pause, shown) of every cell of a sweep page."""
    found = re.findall(
        r'<td[^>]* data-design="([^"]*)" data-pause="([^"]*)"[^>]*>([^<]*)</td>', page
    )
    return [(html.unescape(d), p, shown) for d, p, shown in found]


def _paired(spec: RunSpec, schedule: Schedule | None = None) -> RunOutcome:
    outcome = _rule(spec)
    (multiple,) = spec.fault_lengths
    stored = outcome.run_dir.read_results()
    assert stored is not None
    seconds = round(multiple * spec.ttl / 2, 3)
    overlaps = {"kill+pause": {"count": 1, "seconds": seconds}}
    results = {**stored.data, "coverage": {"overlaps": overlaps, "gaps": []}}
    outcome.run_dir.write_json(outcome.run_dir.results, results)
    return outcome


def test_a_sweep_of_two_kinds_overlaps_them_and_tabulates_their_time_together(
    tmp_path: Path,
) -> None:
    grid = Grid(ttls=(0.5, 1.0), multiples=(0.8, 3.0), seeds=(1, 2), pair=("pause", "kill"))
    (spec, *_) = cell_specs(grid, 0.0, 1.0, 3.0, tmp_path)
    assert spec.nemeses == ("pause", "kill") and spec.overlap == 1.0
    assert spec.targets == ("holder",) and spec.fault_lengths == (3.0,)
    cells = run_sweep(grid, _paired, tmp_path / "store")
    fenced = {(c.ttl, c.multiple): c.shown() for c in cells if c.variant.label == "fenced"}
    assert fenced[1.0, 3.0] == "0/2, together 1.50 s/run"
    assert fenced[0.5, 0.8] == "0/2, together 0.20 s/run"
    plain = run_sweep(Grid(ttls=(1.0,), multiples=(3.0,), seeds=(1,)), _rule, tmp_path / "p")
    assert all("together" not in c.shown() for c in plain)
