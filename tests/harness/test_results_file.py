"""results.json has one writer and one typed reader, and nothing else parses a run's files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.record import Sink
from harness.record.run_record import Interruption, NodeEntry, RunRecord
from harness.record.spec import TestSpec
from harness.run.results import StoredResults, results_json
from harness.run.store import RunDir
from tests.checkers.test_checker_anomalies import HistoryBuilder, judged

ROOT = Path(__file__).resolve().parents[2]
# The record layer: the only modules that open a run's files (history, test.json, results.json,
# replay.json) and decode them.
READERS = {"harness/run/store.py", "harness/record/io.py"}
_RUN_FILE_READ = re.compile(
    r"\.(?:test_json|results|history|replay)\.(?:read_text|read_bytes|open)\("
    r"|open\([\w.]*\.(?:test_json|results|history|replay)\b"
    r"|[\"'](?:test|results|replay)\.json[\"']\s*\)?\s*\.(?:read_text|read_bytes|open)\("
)


def _record(**facts: object) -> RunRecord:
    record = RunRecord(
        spec=TestSpec(seed=3),
        run_id="r1",
        started="2026-12-02T01:00:00+00:00",
        command="fencecheck run --seed 3",
        lease_ttl=1.0,
        schedule=None,
        inventory=(Sink("store", True, seq=True), Sink("log", False)),
        topology=(NodeEntry("w1", "worker"),),
    )
    for name, value in facts.items():
        setattr(record, name, value)
    return record


def _stale_history() -> HistoryBuilder:
    """w3's write under epoch 8 acknowledged, then w2's epoch-7 write accepted: stale."""
    history = HistoryBuilder().acquire("w2", 2, 7).acquire("w3", 3, 8)
    history.write("w3", 3, "new", 8, key="k1").write("w2", 2, "old", 7, key="k2")
    return history.read("w1", 1, [("new", 8)], key="k1").read("w1", 1, [("old", 7)], key="k2")


def test_what_the_writer_writes_the_reader_reads_back() -> None:
    result = judged(_stale_history())
    coverage = {"stale_attempts": 1, "stops_past_lease": {"pause": 2}, "gaps": ["no pause"]}
    stopped = Interruption("SIGINT", "2026-12-02T01:00:09+00:00", "the final reads")
    data = results_json(result, coverage, _record(interrupted=stopped, lost=("w1: gone",)))
    stored = StoredResults.from_json(json.loads(json.dumps(data)))
    assert stored.valid == "invalid" and stored.anomaly_types == tuple(result.anomaly_types)
    assert "stale-write" in stored.anomaly_types
    assert any(line.startswith("stale-write: ") for line in stored.explanations)
    assert stored.interrupted == stopped and stored.lost == ("w1: gone",)
    assert stored.operations == sum(n.get("invoke", 0) for n in result.counts.ops.values())
    (store,) = stored.sinks
    assert store.name == "store" and store.fenced and store.stale_accepted
    assert stored.coverage is not None and stored.gaps == ("no pause",)
    assert stored.coverage.count("stops_past_lease") == 2
    assert stored.coverage.count("stale_attempts") == 1
    assert stored.coverage.count("not_a_number") is None


def test_older_results_without_the_newer_sections_still_load() -> None:
    stored = StoredResults.from_json({"valid": True})
    assert stored.valid == "valid" and stored.coverage is None and stored.gaps == ()
    assert stored.sinks == () and stored.operations is None and stored.interrupted is None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"valid": True, "anomaly_types": "stale-write"}, "anomaly_types"),
        ({"valid": True, "sinks": []}, "sinks"),
        ({"valid": True, "sinks": {"store": 3}}, "sinks.store"),
        ({"valid": True, "coverage": {"gaps": [1]}}, "gaps"),
    ],
)
def test_a_malformed_field_is_named(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field)):
        StoredResults.from_json(data)


def test_a_damaged_results_file_is_named_with_its_path(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert run.read_results() is None  # never checked
    run.results.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=re.escape(str(run.results))):
        run.read_results()


def test_only_the_record_layer_opens_a_runs_files() -> None:
    offenders = []
    for package in ("harness", "checkers", "systems", "nemeses", "workloads"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name in READERS:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if _RUN_FILE_READ.search(line):
                    offenders.append(f"{name}:{number}: {line.strip()}")
    assert not offenders, "read run files through harness.run.store.RunDir:\n" + "\n".join(
        offenders
    )


def test_the_scan_finds_a_stray_reader() -> None:
    assert _RUN_FILE_READ.search("data = json.loads(run.results.read_text())")
    assert _RUN_FILE_READ.search("with open(outcome.run_dir.history) as lines:")
    assert not _RUN_FILE_READ.search("path = run.results")
