"""``fencecheck run-all``: matrices, expectations, the summary, JSON, JUnit and exit codes.

The runs come from a fake runner (synthetic histories judged by the real checker) so that these
tests need no engine; a real matrix run is the nightly workflow's job.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

import harness.cli.run_all as run_all_module
from harness.cli import EXIT_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, main
from harness.cli.run_all import run_matrix
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.judge import RunOutcome
from harness.run.matrix import MatrixError, entries_from, load_matrix, tally
from tests.report.conftest import weakened

FakeRunner = Callable[[RunSpec], RunOutcome]


def _main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert isinstance(done.value.code, int)
    return done.value.code


@pytest.fixture
def faked(monkeypatch: pytest.MonkeyPatch, fake_runner: FakeRunner) -> None:
    """``run-all`` carries out its runs with the fake runner."""

    def run_test(spec: RunSpec, **_: object) -> RunOutcome:
        return fake_runner(spec)

    monkeypatch.setattr(run_all_module, "run_test", run_test)


@pytest.mark.usefixtures("faked")
def test_flags_make_a_product_and_unexpected_verdicts_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    junit = tmp_path / "junit.xml"
    argv = ["run-all", "--bugs", "none", "--bugs", "store-skips-check", "--store", str(store)]
    code = _main([*argv, "--json", "--junit-xml", str(junit)])
    assert code == EXIT_INVALID
    out = capsys.readouterr()
    results = json.loads(out.out)
    assert [(r["verdict"], r["as_expected"]) for r in results] == [
        ("valid", True),
        ("invalid", False),
    ]
    assert results[1]["mismatch"] == "expected valid, got invalid (stale-write)"
    assert Path(results[1]["report"]).parent.parent.parent == store
    assert "1 as expected, 1 unexpected" in out.err
    assert "UNEXPECTED" in out.err
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == "expected valid, got invalid (stale-write)"


@pytest.mark.usefixtures("faked")
def test_a_matrix_with_expectations_passes_when_bugs_are_caught(tmp_path: Path) -> None:
    matrix = tmp_path / "m.json"
    matrix.write_text(
        json.dumps(
            {
                "defaults": {"time_limit": 5},
                "runs": [
                    {"system": "reference", "expect": "valid"},
                    {
                        "system": "reference",
                        "bugs": "store-skips-check",
                        "expect": "invalid",
                        "expect_anomalies": ["stale-write"],
                    },
                ],
            }
        )
    )
    assert _main(["run-all", "--matrix", str(matrix), "--store", str(tmp_path / "s")]) == 0


@pytest.mark.usefixtures("faked")
def test_a_missed_anomaly_is_unexpected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        '[[runs]]\nbugs = ["store-skips-check"]\nexpect = "invalid"\n'
        'expect_anomalies = ["lost-update"]\n'
    )
    code = _main(["run-all", "--matrix", str(matrix), "--store", str(tmp_path / "s")])
    assert code == EXIT_INVALID
    assert "expected lost-update among the anomalies, got stale-write" in capsys.readouterr().err


@pytest.mark.usefixtures("faked")
def test_a_crashed_run_is_an_error_and_the_matrix_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "j.xml"
    argv = ["run-all", "--bugs", "no-such-bug", "--bugs", "none", "--store", str(tmp_path / "s")]
    assert _main([*argv, "--junit-xml", str(junit), "--json"]) == EXIT_ERROR
    results = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in results] == ["error", "valid"]
    assert results[0]["error"] == "unknown bug switch no-such-bug"
    error = ET.parse(junit).getroot().find("testsuite/testcase/error")
    assert error is not None and "unknown bug switch" in (error.get("message") or "")


def test_run_matrix_stops_after_an_interrupted_run(tmp_path: Path, fake_runner: FakeRunner) -> None:
    entries = entries_from({"cross": {"seed": [1, 2, 3]}}, overrides={"store": str(tmp_path)})

    def interrupted(spec: RunSpec, _schedule: object) -> RunOutcome:
        outcome = fake_runner(spec)
        return RunOutcome(outcome.run_dir, outcome.result, interrupted=spec.seed == 2)

    results = run_matrix(entries, interrupted, Console(file=None, quiet=True))
    assert [r.entry.spec.seed for r in results] == [1, 2]
    assert tally(results) == (2, 2, EXIT_VALID)


def test_fail_fast_stops_at_the_first_surprise(tmp_path: Path, fake_runner: FakeRunner) -> None:
    entries = entries_from(
        {"cross": {"bugs": ["store-skips-check", "none"]}}, overrides={"store": str(tmp_path)}
    )
    results = run_matrix(
        entries, lambda spec, _: fake_runner(spec), Console(quiet=True), fail_fast=True
    )
    assert len(results) == 1 and results[0].mismatch is not None
    assert tally(results) == (1, 0, EXIT_INVALID)


def test_cross_makes_every_combination() -> None:
    entries = entries_from(
        {
            "defaults": {"ttl": 2},
            "cross": {
                "system": ["reference"],
                "bugs": [[], ["no-store-check"]],
                "nemeses": ["pause", "kill,partition"],
                "expect": "any",
            },
        }
    )
    combos = [(e.spec.bugs, e.spec.nemeses, e.spec.ttl, e.expect.verdict) for e in entries]
    assert combos == [
        ((), ("pause",), 2.0, "any"),
        ((), ("kill", "partition"), 2.0, "any"),
        (("no-store-check",), ("pause",), 2.0, "any"),
        (("no-store-check",), ("kill", "partition"), 2.0, "any"),
    ]


@pytest.mark.parametrize(
    ("matrix", "problem"),
    [
        ({"runs": [{"sytem": "reference"}]}, "unknown key(s) sytem"),
        ({"runs": [{"expect": "broken"}]}, "expect must be one of valid, invalid, unknown, any"),
        ({"runs": [{"expect": "invalid", "expect_anomalies": ["stale"]}]}, "unknown anomaly"),
        ({"runs": [{"expect_anomalies": ["stale-write"]}]}, "a valid run reports no anomalies"),
        ({"runs": [{"ttl": "long"}]}, "ttl must be a float"),
        ({"runs": [{"bugs": [1]}]}, "bugs must be a list of names"),
        ({"runs": []}, "no runs"),
        ({"tests": []}, "unknown key(s) tests"),
        ([], "expected an object"),
    ],
)
def test_bad_matrices_are_named(matrix: object, problem: str) -> None:
    with pytest.raises(MatrixError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        entries_from(matrix, "m.json")


def test_bad_matrix_files_are_named(tmp_path: Path) -> None:
    broken = tmp_path / "m.json"
    broken.write_text("{")
    with pytest.raises(MatrixError, match="is not valid JSON"):
        load_matrix(broken)
    with pytest.raises(MatrixError, match="cannot read matrix"):
        load_matrix(tmp_path / "absent.json")


def test_matrix_and_axis_flags_do_not_mix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = tmp_path / "m.json"
    matrix.write_text('{"runs": [{}]}')
    assert _main(["run-all", "--matrix", str(matrix), "--system", "reference"]) == EXIT_ERROR
    assert "drop --system/--bugs/--nemesis or drop --matrix" in capsys.readouterr().err


def test_dry_run_lists_the_runs_with_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run-all", "--nemesis", "pause", "--nemesis", "kill", "--seed", "7", "--dry-run"]
    assert _main(argv) == EXIT_VALID
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "1. reference [no bugs] pause  seed 7  expect valid",
        "2. reference [no bugs] kill  seed 7  expect valid",
    ]


def test_dry_run_names_rows_with_unknown_systems_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = tmp_path / "m.json"
    matrix.write_text('{"runs": [{"system": "reference"}, {"system": "nosuch"}]}')
    argv = ["run-all", "--matrix", str(matrix), "--store", str(tmp_path / "s"), "--dry-run"]
    assert _main(argv) == EXIT_ERROR
    out = capsys.readouterr()
    assert "   cannot run: unknown system 'nosuch'" in out.out
    assert "1 of 2 rows cannot run (row 2, said above)" in out.err
    assert not (tmp_path / "s").exists()  # a dry run creates nothing
    assert _main([*argv, "--json"]) == EXIT_ERROR
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["problem"] is None and "unknown system 'nosuch'" in rows[1]["problem"]


@pytest.mark.parametrize("store", ["/proc/fencecheck-store", "{file}/store"])
def test_dry_run_names_an_unwritable_store_and_exits_3(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("in the way\n")
    where = store.format(file=a_file)
    argv = ["run-all", "--nemesis", "pause", "--store", where, "--dry-run"]
    assert _main(argv) == EXIT_ERROR
    out = capsys.readouterr()
    assert f"cannot run: cannot store runs in {where}" in out.out
    assert "1 of 1 rows cannot run (row 1" in out.err


_NO_STALE = "no stale write was even attempted, so no fence was tested"


@pytest.fixture
def weak_when_correct(monkeypatch: pytest.MonkeyPatch, fake_runner: FakeRunner) -> None:
    """``run-all``'s fake runs: a correct one comes out valid but weak (its coverage names the
    gap a run without faults has)."""

    def run_test(spec: RunSpec, **_: object) -> RunOutcome:
        outcome = fake_runner(spec)
        return outcome if spec.bugs else weakened(outcome, _NO_STALE)

    monkeypatch.setattr(run_all_module, "run_test", run_test)


@pytest.mark.usefixtures("weak_when_correct")
def test_strict_makes_a_weak_valid_run_a_surprise_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--strict`` (or a row's ``"strict": true``) turns valid-but-weak into exit 2 with the
    coverage's reason; an invalid row that was expected invalid is not touched."""
    store = tmp_path / "store"
    argv = ["run-all", "--bugs", "none", "--store", str(store), "--json"]
    assert _main(argv) == EXIT_VALID
    capsys.readouterr()
    assert _main([*argv, "--strict"]) == EXIT_UNKNOWN
    (result,) = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "valid" and not result["as_expected"]
    assert result["mismatch"] == f"weak (strict): {_NO_STALE}"
    matrix = tmp_path / "m.json"
    rows = [
        {"strict": True, "bugs": ["store-skips-check"], "expect": "invalid"},
        {"expect": "valid"},
    ]
    matrix.write_text(json.dumps({"defaults": {"time_limit": 5}, "runs": rows}))
    assert _main(["run-all", "--matrix", str(matrix), "--store", str(store)]) == EXIT_VALID
    rows[1]["strict"] = True
    matrix.write_text(json.dumps({"defaults": {"time_limit": 5}, "runs": rows}))
    assert _main(["run-all", "--matrix", str(matrix), "--store", str(store)]) == EXIT_UNKNOWN
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"runs": [{"strict": "yes"}]}))
    with pytest.raises(MatrixError, match="strict must be true or false"):
        load_matrix(bad)
