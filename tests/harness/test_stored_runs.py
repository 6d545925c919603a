"""Runs stored by today's fencecheck still load, judge and render: the run files' formats.

``stored_runs/`` holds two real runs of 2026-12-02 (format 1 of test.json, written before the
field existed, and format 1 of results.json): a valid reference run and an invalid one
(``--bug no-store-check``). Reading them through the record layer, judging them again and
rendering their reports must give what was stored.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.record.run_record import RunRecord
from harness.record.schedule import Schedule, Window
from harness.report import extract
from harness.run.judge import check_run
from harness.run.store import RunDir
from harness.run.summary import summarize

STORED = Path(__file__).with_name("stored_runs")


@pytest.fixture(params=["2026-12-02-valid", "2026-12-02-invalid"])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> RunDir:
    copy = tmp_path / request.param
    shutil.copytree(STORED / request.param, copy)
    return RunDir(copy)


def test_a_stored_run_reads_judges_and_renders_as_it_was_stored(stored: RunDir) -> None:
    before = json.loads(stored.results.read_text())
    record = RunRecord.from_json(json.loads(stored.test_json.read_text()))
    assert record.spec.system == "reference" and record.inventory
    summary = summarize(stored)
    assert summary.problem is None
    assert summary.verdict == ("valid" if before["valid"] is True else "invalid")
    assert list(summary.anomaly_types) == before["anomaly_types"]
    again = check_run(stored, write=False)
    assert again.valid == before["valid"] and again.anomaly_types == before["anomaly_types"]
    # The coverage now comes from the checker's own pass: every number stored then, again.
    coverage = again.coverage.to_json()
    assert {name: coverage[name] for name in before["coverage"]} == before["coverage"]
    assert extract(stored).summary.verdict == summary.verdict


@pytest.mark.parametrize("name", ["test.json", "results.json"])
def test_a_run_file_of_a_newer_format_is_refused_with_the_fix(stored: RunDir, name: str) -> None:
    path = stored.path / name
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "format": 99}))
    with pytest.raises(ValueError, match="format 99, newer than this fencecheck reads"):
        if name == "test.json":
            RunRecord.from_json(stored.read_test())
        else:
            stored.read_results()


def test_a_stored_runs_schedule_and_spec_read_back_typed_and_write_back_unchanged(
    stored: RunDir,
) -> None:
    """The record layer's one reader and writer of ``test.json``: its spec and fault schedule
    come back as types (``TestSpec``, ``Schedule`` of ``Window``) and write back to the same
    JSON, so a stored run rewritten by today's fencecheck keeps every fact it had."""
    data = json.loads(stored.test_json.read_text())
    record = RunRecord.from_json(data)
    assert isinstance(record.schedule, Schedule) and record.schedule.windows
    assert all(isinstance(window, Window) for window in record.schedule.windows)
    # Written back, every stored fact is kept (newer fields such as "refused" may be added).
    written = record.to_json()
    for part in ("schedule", "spec"):
        assert {key: written[part][key] for key in data[part]} == data[part]
    others = set(data) - {"schedule", "spec", "format"}
    assert {key: written[key] for key in others} == {key: data[key] for key in others}


def test_a_record_without_a_schedule_reads_as_none_and_a_bad_one_names_the_field(
    stored: RunDir,
) -> None:
    data = json.loads(stored.test_json.read_text())
    assert RunRecord.from_json({**data, "schedule": {}}).schedule is None
    with pytest.raises(ValueError, match=r"test\.json: bad schedule"):
        RunRecord.from_json({**data, "schedule": {"seed": 5}})
