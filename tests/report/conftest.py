"""Run directories from synthetic histories, for the report, index and JUnit tests.

The histories are written with the real :class:`HistoryWriter` by a small scripted simulation of
holders taking a lease and writing through a fenced sink (``store``) and an unfenced one
(``journal``, mitigation ``none``). In the stale run the store does not check epochs: a holder
paused past its lease wakes up and its write with the old epoch is accepted after a newer one.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from checkers import Coverage, Verdict
from harness.record import HistoryWriter
from harness.record.spec import TestSpec
from harness.record.verdict import SinkCoverage
from harness.run.judge import RunOutcome
from harness.run.judge import check_run as run_check
from harness.run.plan import RunError
from harness.run.store import RunDir, new_run_dir, point_latest
from tests.support.simulation import recorded_words

MS = 1_000_000
TTL_S = 2.0
STALE_BUG = "store-skips-check"
"""The bug switch of the synthetic runs: the store stops checking epochs."""


@dataclass
class _Sink:
    name: str
    checks_epochs: bool
    entries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    highest: dict[str, int] = field(default_factory=dict)

    def write(self, key: str, write_id: str, epoch: int) -> bool:
        if self.checks_epochs and epoch < self.highest.get(key, 0):
            return False
        self.highest[key] = max(self.highest.get(key, 0), epoch)
        self.entries.setdefault(key, []).append({"id": write_id, "epoch": epoch})
        return True


class Simulation:
    """A scripted run: holders on w1..wN, one lock ``L``, sinks ``store`` and ``journal``."""

    def __init__(self, path: Path, *, store_checks: bool, seed: int = 7) -> None:
        self.writer = HistoryWriter(path)
        self.time = 10 * MS
        self.rng = random.Random(seed)
        self.epoch = 0
        self.sinks = {
            "store": _Sink("store", checks_epochs=store_checks),
            "journal": _Sink("journal", checks_epochs=False),
        }
        self.counter = 0

    def tick(self, ms: float) -> int:
        self.time += int(ms * MS * (0.8 + 0.4 * self.rng.random()))
        return self.time

    def op(
        self,
        process: int,
        node: str,
        f: str,
        value: dict[str, Any],
        outcome: str = "ok",
        result: dict[str, Any] | None = None,
        error: str | None = None,
        took_ms: float = 2.0,
    ) -> None:
        self.writer.append(
            time=self.tick(1), process=process, node=node, type="invoke", f=f, value=value
        )
        self.writer.append(
            time=self.tick(took_ms),
            process=process,
            node=node,
            type=outcome,  # type: ignore[arg-type]
            f=f,
            value={**value, **(result or {})},
            error=error,
        )

    def acquire(self, process: int, node: str) -> int:
        self.epoch += 1
        self.op(process, node, "acquire", {"lock": "L"}, result={"epoch": self.epoch}, took_ms=12)
        return self.epoch

    def write(self, process: int, node: str, sink: str, epoch: int, key: str = "k1") -> bool:
        """Write through ``sink``; True if the sink accepted it."""
        self.counter += 1
        write_id = f"{node}-{self.counter}"
        value = {"lock": "L", "sink": sink, "key": key, "id": write_id, "epoch": epoch}
        took = 4 + 40 * self.rng.random() ** 3
        if self.sinks[sink].write(key, write_id, epoch):
            self.op(process, node, "write", value, took_ms=took)
            return True
        self.op(process, node, "write", value, "fail", error="stale-epoch", took_ms=took)
        return False

    def release(self, process: int, node: str) -> None:
        self.op(process, node, "release", {"lock": "L"}, took_ms=5)

    def nemesis(self, f: str, targets: list[str], applied: bool = True) -> None:
        scheduled = self.time
        confirmed = scheduled + int((0.2 + self.rng.random()) * MS)
        value: dict[str, Any] = {
            "targets": targets,
            **recorded_words(f),
            "scheduled": scheduled,
            "confirmed": confirmed,
            "applied": applied,
        }
        if not applied:
            value["error"] = "no such process"
        self.time = confirmed
        self.writer.append(time=self.time, process="nemesis", type="info", f=f, value=value)

    def final_reads(self, process: int, node: str) -> None:
        for sink in self.sinks.values():
            for key, entries in sink.entries.items():
                self.op(
                    process,
                    node,
                    "read",
                    {"sink": sink.name, "key": key},
                    result={"entries": list(entries)},
                )

    def close(self) -> None:
        self.writer.close()


def _rounds(sim: Simulation, workers: Sequence[int], rounds: int) -> None:
    for _ in range(rounds):
        for w in workers:
            node = f"w{w + 1}"
            epoch = sim.acquire(w, node)
            sim.write(w, node, "store", epoch)
            sim.write(w, node, "journal", epoch)
            sim.release(w, node)
            sim.tick(40)


def _pause_story(sim: Simulation, workers: int) -> None:
    """w2 takes the lease, is paused past its TTL, the others go on, w2 wakes and writes."""
    epoch = sim.acquire(1, "w2")
    sim.write(1, "w2", "store", epoch)
    sim.nemesis("start-pause", ["w2"])
    sim.tick(TTL_S * 1000 + 200)
    others = [w for w in range(workers) if w != 1]
    _rounds(sim, others, 8)
    sim.nemesis("stop-pause", ["w2"])
    # The stale write: the store accepts it only when it does not check epochs. A holder that
    # is refused stops writing with that epoch (anything else would be a retry-after-reject).
    if sim.write(1, "w2", "store", epoch):
        sim.write(1, "w2", "journal", epoch)
    sim.tick(50)


def write_spec(run: RunDir, *, bugs: list[str], seed: int, workers: int, when: datetime) -> None:
    """A ``test.json`` shaped like the runner's: the spec nested, what the run learnt beside it."""
    spec = TestSpec(
        system="reference",
        bugs=tuple(bugs),
        nemeses=("pause",),
        ttl=TTL_S,
        workers=workers,
        seed=seed,
        name="reference-pause",
    )
    pause = int((TTL_S * 1000 + 400) * MS)
    test = {
        "spec": spec.to_json(),
        "run_id": "fc-test",
        "started": when.isoformat(),
        "command": f"fencecheck run --system reference --nemesis pause --seed {seed}"
        + "".join(f" --bug {b}" for b in bugs),
        "lease_ttl": TTL_S,
        "schedule": {
            "seed": seed,
            "lease_ttl_ns": int(TTL_S * 1e9),
            "duration_ns": 30_000 * MS,
            "windows": [
                {
                    "index": 0,
                    "start_ns": 800 * MS,
                    "duration_ns": pause,
                    "kind": "pause",
                    "targets": ["holder"],
                    "ttl_multiple": 1.2,
                    "fallback": None,
                    "params": {},
                }
            ],
        },
        "inventory": [
            {
                "sink": "store",
                "fenced": True,
                "mitigation": "none",
                "description": "append log that refuses epochs below its highest seen",
            },
            {
                "sink": "journal",
                "fenced": False,
                "mitigation": "none",
                "description": "recording sink with no epoch check",
            },
        ],
        "topology": [
            {"name": name, "role": role}
            for name, role in [("l1", "lock"), ("s1", "store")]
            + [(f"w{n + 1}", "worker") for n in range(workers)]
        ],
        "versions": {"fencecheck": "0.1.0", "python": "3.11"},
    }
    run.write_json(run.test_json, test)


def build_run(
    root: Path,
    *,
    stale: bool,
    rounds: int = 6,
    workers: int = 3,
    when: datetime | None = None,
    failed_fault: bool = False,
) -> RunDir:
    """A run directory with ``test.json`` and ``history.jsonl`` (no results yet), the store's
    ``latest``."""
    bugs = [STALE_BUG] if stale else []
    when = when or datetime.now(UTC)
    run = new_run_dir("reference-pause", root, when)
    write_spec(run, bugs=bugs, seed=11, workers=workers, when=when)
    sim = Simulation(run.history, store_checks=not stale)
    _rounds(sim, range(workers), rounds // 2)
    _pause_story(sim, workers)
    if failed_fault:
        sim.nemesis("start-pause", ["l1"], applied=False)
    _rounds(sim, range(workers), rounds - rounds // 2)
    sim.final_reads(90, "w1")
    sim.close()
    point_latest(run)  # as the runner does once a run is over
    return run


RunFactory = Callable[..., RunDir]


def check_run(run: RunDir) -> Verdict:
    """Judge ``run``'s history as the runner does (the real checker, coverage included) and
    write ``results.json``."""
    return run_check(run)


def weakened(outcome: RunOutcome, gap: str) -> RunOutcome:
    """``outcome`` with a coverage whose one gap is ``gap`` (no stale write attempted, or no
    holder stopped past its lease): a valid run that tested less than it claims ("VALID, but
    weak"), as --strict must refuse. The verdict and its ``results.json`` say it alike."""
    stale = 0 if gap.startswith("no stale write") else 1
    coverage = Coverage(
        sinks={"store": SinkCoverage(writes=1, accepted=1, keys=1, stale_attempts=stale)},
        lease_ttl=None if stale == 0 else 1.0,
    )
    assert coverage.gaps() == [gap], f"no coverage of these tests has the one gap {gap!r}"
    stored = outcome.run_dir.read_results()
    assert stored is not None
    results = {**stored.data, "coverage": coverage.to_json()}
    outcome.run_dir.write_json(outcome.run_dir.results, results)
    return replace(outcome, result=replace(outcome.result, coverage=coverage))


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """An empty store directory."""
    root = tmp_path / "store"
    root.mkdir()
    return root


@pytest.fixture
def make_run(store_root: Path) -> RunFactory:
    """Build a run in ``store_root``, checked unless ``checked=False``; each call is later."""
    stamps = iter(
        datetime(2024, 5, 1, 12, 0, tzinfo=UTC) + timedelta(minutes=n) for n in range(999)
    )

    def make(*, checked: bool = True, **kwargs: Any) -> RunDir:
        """``stale``, ``rounds``, ``workers``, ``failed_fault``: see :func:`build_run`."""
        kwargs.setdefault("when", next(stamps))
        run = build_run(store_root, **kwargs)
        if checked:
            check_run(run)
        return run

    return make


@pytest.fixture
def fake_runner() -> Callable[[TestSpec], RunOutcome]:
    """Stands in for :func:`harness.run.runner.run_test`: a synthetic run in the spec's store,
    checked by the real checker. Bug ``store-skips-check`` makes it invalid; an unknown bug name
    makes it raise :class:`RunError`, as the runner does for a spec it cannot run."""

    def run(spec: TestSpec) -> RunOutcome:
        unknown = set(spec.bugs) - {STALE_BUG}
        if unknown:
            raise RunError(f"unknown bug switch {', '.join(sorted(unknown))}")
        run_dir = build_run(Path(spec.store), stale=STALE_BUG in spec.bugs)
        return RunOutcome(run_dir, check_run(run_dir), interrupted=False)

    return run
