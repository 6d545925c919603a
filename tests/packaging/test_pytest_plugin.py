"""The pytest plugin (harness/pytest_plugin.py), as a team's suite uses it: the example file runs
green on a real cluster, matrix rows become tests named by their row, a failed run's report is
attached to the failure and to --junitxml, and without an engine the tests are skipped with the
doctor's reason."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "test_fencing_with_pytest.py"


def _pytest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_matrix_rows_are_collected_as_tests_named_by_row() -> None:
    done = _pytest("--collect-only", str(EXAMPLE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_matrix_row[row 01: reference [no bugs] pause]" in done.stdout
    assert "test_matrix_row[row 02: reference [no-store-check] pause]" in done.stdout


def test_without_an_engine_the_tests_skip_with_the_doctors_reason() -> None:
    done = _pytest("-rs", str(EXAMPLE), env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 skipped" in done.stdout
    assert "fencecheck: no Docker engine" in done.stdout and "scripts/install.sh" in done.stdout


@pytest.mark.docker
def test_the_example_passes_and_junit_carries_each_report(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    store = tmp_path / "store"
    done = _pytest(str(EXAMPLE), f"--junitxml={junit}", f"--fencecheck-store={store}")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == 3
    for case in cases:
        (report,) = [
            p.get("value") for p in case.iter("property") if p.get("name") == "fencecheck_report"
        ]
        assert report is not None and Path(report).is_file() and store in Path(report).parents


@pytest.mark.docker
def test_a_failed_run_shows_its_report_in_the_failure(tmp_path: Path) -> None:
    test_file = tmp_path / "test_caught.py"
    test_file.write_text(
        "def test_expects_valid(fencecheck):\n"
        "    run = fencecheck(bugs=('no-store-check',), nemeses=('pause',),\n"
        "                     fault_lengths=(3.0,), time_limit=12, seed=1)\n"
        "    assert run.valid, run.why\n"
    )
    done = _pytest(
        str(test_file), f"--fencecheck-store={tmp_path / 'store'}", "--rootdir", str(tmp_path)
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert "stale-write" in done.stdout
    assert "fencecheck ---" in done.stdout and "report: " in done.stdout
