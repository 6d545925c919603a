"""The signal matrix: SIGINT, SIGTERM and SIGHUP in every phase of ``fencecheck run``, from the
first import to the last byte of the report, on the no-op system with short runs.

Every cell must end the same way (docs/design.md §8, "Interruptions"): before a run folder exists,
exit 3 with one line saying so and nothing stored; after, the signal recorded with the phase it
came in, the history checked, ``results.json`` and ``report.html`` written, a headline that
agrees with the exit code (never ``VALID``: exit 2 here, since the no-op system is correct), no
container or network left, and ``store/latest`` on the run. The table of all cells is printed,
and is the failure message when a cell is wrong.

A phase is hit by stopping the controller (SIGSTOP) the moment it prints the phase's line,
sending the signal and continuing it: the signal then lands where the controller was. Phases too
short for that are held: the imports by an import hook (``sitecustomize``), the image build by
:class:`tests.support.held_system.HeldNoop`; healing is held by freezing the server node, so the
holders' operations are in flight when the workload ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import pytest

from harness.node.docker.cluster import LABEL_NODE, LABEL_RUN
from harness.node.docker.engine import engine
from systems import ENTRY_POINT_GROUP

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
BEFORE_THE_RUN: Final = ("imports", "image build")
PHASES: Final = (
    *BEFORE_THE_RUN,
    "cluster start",
    "system setup",
    "the workload",
    "healing",
    "the final reads",
    "teardown",
    "the check",
    "the report",
)
_KEYS: Final = {"the final reads": 30_000, "the check": 8000, "the report": 8000}
"""Phases made longer by more keys to read back (and so a longer history to check and show)."""

_SITECUSTOMIZE: Final = '''
import importlib.abc, os, sys, time
from pathlib import Path

class _HoldImports(importlib.abc.MetaPathFinder):
    """Holds the import of fencecheck's `run` command (one of the commands main() imports)."""

    def find_spec(self, name, path, target=None):
        if name == "harness.cli.run" and os.environ.get("FENCECHECK_TEST_HOLD") == "imports":
            folder = Path(os.environ["FENCECHECK_TEST_HOLD_DIR"])
            (folder / "holding").write_text("imports")
            deadline = time.monotonic() + 30
            while not (folder / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return None

sys.meta_path.insert(0, _HoldImports())
'''


@dataclass
class Cell:
    """What one signal in one phase left behind."""

    phase: str
    signal: str
    rc: int | None = None
    recorded: str = ""
    """The phase ``results.json`` names ("" without results)."""
    results: bool = False
    report: bool = False
    leftovers: int = 0
    latest: bool = False
    """``store/latest`` names this run."""
    headline: str = ""
    final_reads: int | None = None
    """Final reads completed (the final-reads phase only: it must stop before reading all)."""
    output: str = ""

    def problems(self) -> list[str]:
        """What this cell did wrong, in words (empty: all as promised)."""
        wrong = []
        if "Traceback" in self.output:
            wrong.append("a traceback")
        if self.phase in BEFORE_THE_RUN:
            if self.rc != 3:
                wrong.append(f"exit {self.rc}, not 3")
            if "nothing was run" not in self.output or self.signal not in self.output:
                wrong.append("no line naming the signal and saying nothing was run")
            if self.results or self.latest:
                wrong.append("a run stored")
            return wrong
        if self.rc != 2:
            wrong.append(f"exit {self.rc}, not 2 (unknown)")
        if self.recorded != self.phase:
            wrong.append(f"recorded phase {self.recorded!r}")
        if not (self.results and self.report):
            wrong.append("no results.json or report.html")
        if self.leftovers:
            wrong.append(f"{self.leftovers} containers or networks left")
        if not self.latest:
            wrong.append("store/latest not on the run")
        if self.headline != "UNKNOWN":
            wrong.append(f"headline {self.headline!r}")
        if self.final_reads is not None and self.final_reads >= _KEYS["the final reads"]:
            wrong.append("the final reads went on to the end after the signal")
        return wrong

    def row(self) -> str:
        """The cell as a line of the printed table."""
        verdict = "ok" if not self.problems() else "WRONG: " + "; ".join(self.problems())
        yes = {True: "yes", False: "no"}
        return (
            f"{self.phase:<16} {self.signal:<8} rc={self.rc!s:<4} recorded={self.recorded:<16} "
            f"results={yes[self.results]:<3} report={yes[self.report]:<3} "
            f"leftovers={self.leftovers} latest={yes[self.latest]:<3} "
            f"headline={self.headline or '-':<8} {verdict}"
        )


@pytest.fixture
def held_noop(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a run that can load ``held-noop`` and hold its imports."""
    site = tmp_path / "site"
    info = site / "fencecheck_held-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fencecheck-held\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nheld-noop = tests.support.held_system:HeldNoop\n"
    )
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    here = str(Path(__file__).parents[2])
    path = os.pathsep.join(p for p in (str(site), here, os.environ.get("PYTHONPATH", "")) if p)
    yield {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def _signal_now(pid: int, signum: int) -> None:
    """Deliver ``signum`` exactly where the controller is now: stop it, signal, continue."""
    os.kill(pid, signal.SIGSTOP)
    os.kill(pid, signum)
    os.kill(pid, signal.SIGCONT)


def _wait_for(stream: IO[str], needle: str, seen: list[str]) -> None:
    for line in stream:
        seen.append(line)
        if needle in line:
            return
    raise AssertionError(f"never printed {needle!r}")


def _run_dir(store: Path) -> Path | None:
    found = sorted(store.glob("*/*/history.jsonl"))
    return found[-1].parent if found else None


def _freeze(run_id: str, node: str, frozen: bool) -> None:
    for container in engine().containers.list(
        filters={"label": [f"{LABEL_RUN}={run_id}", f"{LABEL_NODE}={node}"]}
    ):
        container.pause() if frozen else container.unpause()


def _cell(phase: str, signum: int, base: Path, env: dict[str, str]) -> Cell:
    name = signal.Signals(signum).name
    cell = Cell(phase, name)
    folder = base / f"{phase.replace(' ', '-')}-{name}"
    store, hold_dir = folder / "store", folder / "hold"
    hold_dir.mkdir(parents=True)
    ttl, limit = ("1", "3") if phase == "healing" else ("0.5", "2")
    argv = [sys.executable, "-m", "harness", "run", "--no-progress", "--store", str(store)]
    argv += ["--system", "held-noop", "--nemesis", "none", "--workers", "1", "--seed", "3"]
    argv += ["--ttl", ttl, "--time-limit", limit, "--keys", str(_KEYS.get(phase, 3))]
    run_env = {**env, "FENCECHECK_TEST_HOLD": phase, "FENCECHECK_TEST_HOLD_DIR": str(hold_dir)}
    run = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_env
    )
    seen: list[str] = []
    try:
        assert run.stderr is not None
        if phase in BEFORE_THE_RUN:
            deadline = time.monotonic() + 60
            while not (hold_dir / "holding").exists():
                assert time.monotonic() < deadline and run.poll() is None, "never held"
                time.sleep(0.02)
            os.kill(run.pid, signum)
            (hold_dir / "release").touch()
        elif phase == "healing":
            _wait_for(run.stderr, "phase: the workload", seen)
            started = _run_dir(store)
            assert started is not None
            run_id = json.loads((started / "test.json").read_text())["run_id"]
            time.sleep(1.0)
            _freeze(run_id, "n1", True)  # the holders' requests now hang past the workload's end
            _wait_for(run.stderr, "phase: healing", seen)
            time.sleep(0.3)
            _signal_now(run.pid, signum)
            _freeze(run_id, "n1", False)
        else:
            _wait_for(run.stderr, f"phase: {phase}", seen)
            if phase in ("the workload", "the final reads"):
                time.sleep(1.0)  # well into it: the final reads begin a TTL after the phase
            _signal_now(run.pid, signum)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    cell.rc = run.returncode
    cell.output = "".join(seen) + err + out
    cell.headline = out.split(maxsplit=1)[0].rstrip(",") if out.strip() else ""
    run_dir = _run_dir(store)
    if run_dir is None:
        return cell
    results_file = run_dir / "results.json"
    cell.results = results_file.exists()
    cell.report = (run_dir / "report.html").exists() and name in (
        run_dir / "report.html"
    ).read_text()
    if cell.results:
        results = json.loads(results_file.read_text())
        cell.recorded = (results.get("interrupted") or {}).get("phase", "")
    latest = store / "latest"
    cell.latest = latest.exists() and latest.resolve() == run_dir.resolve()
    run_id = json.loads((run_dir / "test.json").read_text())["run_id"]
    client = engine()
    label = {"label": f"{LABEL_RUN}={run_id}"}
    cell.leftovers = len(client.containers.list(all=True, filters=label)) + len(
        client.networks.list(filters=label)
    )
    if phase == "the final reads":
        cell.final_reads = _final_reads_done(run_dir / "history.jsonl")
    return cell


def _final_reads_done(history: Path) -> int:
    """Final reads (processes 1,000,000 and up) that completed."""
    events = (json.loads(line) for line in history.read_text().splitlines())
    return sum(
        1
        for e in events
        if e.get("f") == "read"
        and e["type"] != "invoke"
        and isinstance(e["process"], int)
        and e["process"] >= 1_000_000
    )


def test_every_signal_in_every_phase_ends_checked_and_agreed(
    tmp_path: Path, held_noop: dict[str, str]
) -> None:
    cells = [(phase, signum) for phase in PHASES for signum in SIGNALS]
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda c: _cell(c[0], c[1], tmp_path, held_noop), cells))
    table = "\n".join(cell.row() for cell in done)
    print(table)
    wrong = [cell for cell in done if cell.problems()]
    assert not wrong, table + "\n\n" + "\n\n".join(_telling(c.output) for c in wrong[:2])


def _telling(output: str) -> str:
    """The part of a cell's output that tells what went wrong: from a traceback on, if any."""
    at = output.find("Traceback")
    return output[at : at + 3000] if at >= 0 else output[-1500:]
