"""``fencecheck run --strict``: a valid run that tested less than it claims exits 2, saying why;
without ``--strict`` the same run exits 0 with "VALID, but weak"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import harness.cli.run as run_module
from harness.cli import EXIT_UNKNOWN, EXIT_VALID, main
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.judge import RunOutcome
from tests.report.conftest import weakened

_GAP = "no holder was stopped past its lease while holding it"


@pytest.fixture
def weak_run(monkeypatch: pytest.MonkeyPatch, fake_runner: Callable[[RunSpec], RunOutcome]) -> None:
    """``run`` carries out a fake valid run whose coverage names one gap."""

    def run_test(spec: RunSpec, **_: object) -> RunOutcome:
        return weakened(fake_runner(spec), _GAP)

    monkeypatch.setattr(run_module, "run_test", run_test)


@pytest.mark.usefixtures("weak_run")
@pytest.mark.parametrize(("flags", "code"), [([], EXIT_VALID), (["--strict"], EXIT_UNKNOWN)])
def test_strict_turns_a_weak_run_into_exit_2(
    flags: list[str], code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["run", "--store", str(tmp_path / "store"), "--no-progress", *flags])
    assert done.value.code == code
    out = capsys.readouterr()
    assert f"VALID, but weak: {_GAP}" in " ".join(out.out.split())
    assert ("--strict: valid but weak, exit 2" in out.err) is bool(flags)


@pytest.mark.docker
def test_a_real_run_without_faults_is_weak_and_strict_exits_2(tmp_path: Path) -> None:
    """On a real cluster: no faults, so no holder is stopped past its lease and no stale write
    is attempted; --strict refuses the pass."""
    from tests.support.cli import fencecheck

    done = fencecheck(
        "run", "--nemesis", "none", "--time-limit", "8", "--strict", "--no-progress",
        "--store", str(tmp_path / "store"),
    )  # fmt: skip
    assert done.returncode == EXIT_UNKNOWN, done.stdout[-2000:] + done.stderr[-2000:]
    assert "VALID, but weak" in " ".join(done.stdout.split())
    assert "--strict: valid but weak, exit 2" in done.stderr
