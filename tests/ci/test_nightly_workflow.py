"""The nightly workflow parses, sets the machine up with our script, and runs a command that
exists, with flags it accepts and a matrix that loads (checked with ``--dry-run``); its exact
command lines, the matrix step's and the merge step's, run for real on a one-row matrix."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import EXIT_VALID, main

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"


def _workflow() -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def _steps(job: str = "matrix") -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _workflow()["jobs"][job]["steps"]
    return steps


def _run_all_argv(shard: int = 1) -> list[str]:
    """The ``fencecheck run-all ...`` arguments of the workflow's matrix step, as shard
    ``shard`` runs them."""
    (command,) = [s["run"] for s in _steps() if "fencecheck run-all" in s.get("run", "")]
    words = shlex.split(command.replace("${{ matrix.shard }}", str(shard)))
    return words[words.index("fencecheck") + 1 :]


def _main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert isinstance(done.value.code, int)
    return done.value.code


def test_the_workflow_is_scheduled() -> None:
    data: dict[Any, Any] = _workflow()
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    assert isinstance(triggers, dict)
    (schedule,) = triggers["schedule"]
    assert len(schedule["cron"].split()) == 5
    assert "workflow_dispatch" in triggers


def test_the_machine_is_set_up_by_our_install_script() -> None:
    runs = [s.get("run", "") for s in _steps()]
    assert any("bash scripts/install.sh" in run for run in runs)
    assert (ROOT / "scripts" / "install.sh").is_file()


def test_the_matrix_command_exists_and_its_flags_and_matrix_are_accepted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = _run_all_argv()
    assert argv[0] == "run-all"
    assert _main(["run-all", "--help"]) == EXIT_VALID
    help_text = capsys.readouterr().out
    for word in argv:
        if word.startswith("--"):
            assert word in help_text, f"run-all has no option {word}"
    assert (ROOT / argv[argv.index("--matrix") + 1]).is_file()
    assert "--junit-xml" in argv
    # The same command with --dry-run loads and checks the matrix without running anything.
    assert _main([*argv, "--dry-run"]) == EXIT_VALID
    listed = capsys.readouterr().out.splitlines()
    assert listed and all(" expect " in line for line in listed)


def test_the_documented_local_command_is_the_one_ci_runs() -> None:
    text = WORKFLOW.read_text()
    assert "fencecheck run-all --matrix matrices/nightly.json" in text
    assert _run_all_argv()[:3] == ["run-all", "--matrix", "matrices/nightly.json"]


def test_the_store_is_uploaded_even_when_runs_fail() -> None:
    uploads = [s for s in _steps() if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    paths = [str(s["with"]["path"]) for s in uploads]
    assert "store/" in paths
    assert all(s.get("if") == "always()" for s in uploads)


def test_the_shards_cover_every_row_once_and_their_junit_files_are_merged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shards = _workflow()["jobs"]["matrix"]["strategy"]["matrix"]["shard"]
    listed: list[str] = []
    for shard in shards:
        argv = _run_all_argv(shard)
        assert argv[argv.index("--shard") + 1] == f"{shard}/{len(shards)}"
        assert _main([*argv, "--dry-run"]) == EXIT_VALID
        listed += capsys.readouterr().out.splitlines()
    assert _main(["run-all", "--matrix", "matrices/nightly.json", "--dry-run"]) == EXIT_VALID
    whole = capsys.readouterr().out.splitlines()
    # Dry runs list rows by their number in the matrix.
    rows = [line.split(". ", 1)[0] for line in listed]
    assert sorted(rows, key=int) == [line.split(". ", 1)[0] for line in whole]
    merged = [s.get("run", "") for s in _steps("junit")]
    assert any("reports/nightly-*.xml" in run and "reports/nightly.xml" in run for run in merged)


def test_every_action_is_pinned_by_commit() -> None:
    uses = [
        str(step["uses"])
        for job in _workflow()["jobs"].values()
        for step in job["steps"]
        if "uses" in step
    ]
    assert uses
    for action in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), f"{action}: pin a commit"


def test_every_nightly_row_has_its_own_seed() -> None:
    rows = json.loads((ROOT / "matrices" / "nightly.json").read_text())["runs"]
    seeds = [row.get("seed") for row in rows]
    assert all(isinstance(seed, int) for seed in seeds)
    assert len(set(seeds)) == len(seeds)


_ONE_ROW = {
    "defaults": {"system": "reference", "time_limit": 12, "ttl": 1.0, "workers": 3},
    "runs": [
        {
            "seed": 7,
            "bugs": ["no-store-check"],
            "nemeses": ["pause"],
            "fault_lengths": [3],
            "expect": "invalid",
            "expect_anomalies": ["stale-write"],
        }
    ],
}


def _as_run_here(command: str) -> list[str]:
    """A step's command line as words, shard 1, without the runner's ``sudo -E`` (the suite
    runs as root)."""
    words = shlex.split(command.replace("${{ matrix.shard }}", "1"))
    return words[2:] if words[:2] == ["sudo", "-E"] else words


@pytest.mark.docker
def test_the_workflow_commands_run_a_one_row_matrix_and_merge_its_junit(tmp_path: Path) -> None:
    """The matrix step and the merge step, word for word, in a folder whose
    matrices/nightly.json has one row: the JUnit file is written where the workflow uploads it
    from (a folder nothing else creates), with a name that carries no seed or time."""
    (tmp_path / "matrices").mkdir()
    (tmp_path / "matrices" / "nightly.json").write_text(json.dumps(_ONE_ROW))
    shutil.copy(ROOT / "constraints.txt", tmp_path / "constraints.txt")
    env = {**os.environ, "CI": "true"}
    (run_all,) = [s["run"] for s in _steps() if "fencecheck run-all" in s.get("run", "")]
    done = subprocess.run(
        _as_run_here(run_all), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == EXIT_VALID, done.stderr[-3000:]
    shard_file = tmp_path / "reports" / "nightly-1.xml"
    (case,) = ET.parse(shard_file).getroot().iter("testcase")
    name = case.get("name", "")
    assert name == "row 01: reference [no-store-check] pause", name
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["seed"] == "7" and props["verdict"] == "invalid"
    (merge,) = [s["run"] for s in _steps("junit") if "merge" in s.get("run", "")]
    merged = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", merge],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert merged.returncode == 0, merged.stderr[-3000:]
    names = [c.get("name") for c in ET.parse(tmp_path / "reports" / "nightly.xml").iter("testcase")]
    assert names == [name]
