"""``run --control``: a run whose planted bug its exposure check says cannot show is refused
without it, and with it goes ahead as a control run: one warning before anything starts, the
reason kept in ``test.json`` (its verdict: tests/report/test_control_run_report.py). A run that
could show the bug is no control: refused."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

import harness.run.runner as runner
from harness.record.run_record import RunRecord
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.plan import RunError, plan_run, rerun_command
from harness.run.runner import run_test
from harness.run.store import RunDir
from tests.support.spec_of import spec_of

_PAUSE_ALONE = ["--bug", "store-forgets", "--nemesis", "pause", "--target", "holder"]
_PAUSE_ALONE += ["--overlap", "0", "--time-limit", "60", "--seed", "1"]
WHY = "--bug store-forgets cannot show in this run: no restart-while-paused fault is scheduled"


def _spec(monkeypatch: pytest.MonkeyPatch, store: Path, *flags: str) -> RunSpec:
    return spec_of(["run", *_PAUSE_ALONE, "--store", str(store), *flags], monkeypatch)


def test_a_pause_alone_cannot_show_store_forgets_and_is_refused_without_control(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = _spec(monkeypatch, tmp_path)
    assert spec.control is False
    with pytest.raises(RunError) as refused:
        plan_run(spec)
    assert str(refused.value).startswith(WHY)
    assert "--control runs it anyway" in str(refused.value)  # the way out is named
    assert not tmp_path.joinpath(spec.test_name).exists()  # nothing was made


def test_with_control_it_goes_ahead_and_its_record_keeps_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = _spec(monkeypatch, tmp_path, "--control")
    assert spec.control is True
    plan = plan_run(spec)
    assert plan.unexposed is not None and plan.unexposed.startswith(WHY)
    record = plan.record("r", RunDir(tmp_path / "run"), None)
    written = record.to_json()
    assert written["spec"]["control"] is True and written["unexposed"] == plan.unexposed
    assert RunRecord.from_json(json.loads(json.dumps(written))).unexposed == plan.unexposed
    # The rerun command is a control run again, of the very same spec.
    assert "--control" in record.command.split()
    assert spec_of(rerun_command(spec), monkeypatch) == spec


def test_a_control_run_warns_once_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spec = _spec(monkeypatch, tmp_path, "--control")

    def no_image(*_: object) -> str:
        raise RunError("stopped before the image build")

    monkeypatch.setattr(runner, "_image", no_image)
    said = io.StringIO()
    with pytest.raises(RunError, match="before the image build"):
        run_test(spec, console=Console(file=said, width=400), progress=False)
    lines = said.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: {WHY}")
    assert "going ahead as a control run (--control)" in lines[0]


def test_control_is_refused_where_the_run_could_show_the_bug(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # `run --bug store-forgets` picks its exposure (restart-while-paused): no control then.
    exposed = spec_of(["run", "--bug", "store-forgets", "--seed", "1", "--control"], monkeypatch)
    with pytest.raises(RunError, match="this run can show every bug it plants; drop --control"):
        plan_run(replace(exposed, store=tmp_path))
    with pytest.raises(RunError, match="it plants none; drop --control"):
        plan_run(RunSpec(seed=1, control=True, store=tmp_path))
