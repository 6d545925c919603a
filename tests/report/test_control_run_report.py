"""The verdict of a control run (``run --control``) says, in ``results.json``, the report and
``analyze``, that the run could not have exposed its planted bug; a run that is no control says
nothing of one."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.record.results import StoredResults
from harness.report import write_report
from tests.harness.test_control_run import WHY
from tests.report.conftest import RunFactory, check_run


def test_the_verdict_of_a_control_run_says_it_could_not_have_exposed_the_bug(
    make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(stale=False, checked=False)
    test = json.loads(run.test_json.read_text())
    test["spec"]["control"] = True
    test["unexposed"] = WHY
    run.write_json(run.test_json, test)
    check_run(run)
    stored = StoredResults.from_json(json.loads(run.results.read_text()))
    assert stored.valid == "valid"
    note = stored.control
    assert note is not None and note.startswith(f"A control run (--control): {WHY}")
    assert "could not have exposed that bug" in note and "tested" not in note
    page = write_report(run).read_text()
    assert f'<span class="control-run">{note}.</span>' in page.replace("&#x27;", "'")
    assert "<td>control run</td><td>yes</td>" in page  # the spec table
    with pytest.raises(SystemExit):
        main(["analyze", str(run.path), "--json"])
    assert json.loads(capsys.readouterr().out)["control"] == note


def test_a_run_that_is_no_control_says_nothing_of_one(make_run: RunFactory) -> None:
    run = make_run(stale=False)
    stored = run.read_results()
    assert stored is not None and stored.control is None and "control" not in stored.data
    assert 'class="control-run"' not in write_report(run).read_text()
