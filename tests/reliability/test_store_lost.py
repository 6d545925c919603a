"""A store that goes away or can no longer be written under a running run is named as such:
exit 3 with one line saying what happened to the store, never "a fencecheck bug", never a VALID
headline beside the error, and nothing left on the engine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR
from harness.node.docker.cluster import LABEL_RUN
from harness.node.docker.engine import engine

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


def _start(store: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "harness", "run", "--system", "noop", "--nemesis", "none"]
    argv += ["--ttl", "0.5", "--time-limit", "4", "--workers", "1", "--seed", "5"]
    return subprocess.Popen(
        [*argv, "--store", str(store), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )


def _running(store: Path) -> tuple[Path, str]:
    """The run in progress, once its workload has recorded something, and its run id."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for history in store.glob("*/*/history.jsonl"):
            if history.stat().st_size > 2000:
                run_id = json.loads((history.parent / "test.json").read_text())["run_id"]
                return history.parent, run_id
        time.sleep(0.1)
    raise AssertionError("the run never got going")


def _nothing_left(run_id: str) -> None:
    client = engine()
    label = {"label": f"{LABEL_RUN}={run_id}"}
    assert not client.containers.list(all=True, filters=label)
    assert not client.networks.list(filters=label)


def test_a_store_deleted_mid_run_is_named(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = _start(store)
    try:
        _, run_id = _running(store)
        shutil.rmtree(store)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == EXIT_ERROR, err
    assert "was deleted while the run wrote to it" in err
    assert "fencecheck bug" not in err and "Traceback" not in err
    _nothing_left(run_id)


def test_a_store_that_turns_unwritable_mid_run_is_never_valid(tmp_path: Path) -> None:
    # A read-only remount is refused while the history is open for writing, so the run folder is
    # made immutable instead: nothing new can be written in it, even by root.
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("needs chattr and root")
    store = tmp_path / "store"
    run = _start(store)
    folder: Path | None = None
    try:
        folder, run_id = _running(store)
        subprocess.run(["chattr", "+i", str(folder)], check=True)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
        if folder is not None:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
    assert run.returncode == EXIT_ERROR, err
    headline = out.split(maxsplit=1)[0].rstrip(",")
    assert headline == "UNKNOWN", out
    assert "Operation not permitted" in err
    assert "Traceback" not in err and "fencecheck bug" not in err
    assert not (store / "latest").exists()  # its results could not be written: not checked
    _nothing_left(run_id)
