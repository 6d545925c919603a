"""results.json has one writer and one typed reader, and nothing else parses a run's files."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from harness.record import Sink
from harness.record.results import StoredResults, results_json
from harness.record.run_record import Interruption, NodeEntry, RunRecord
from harness.record.spec import TestSpec
from harness.record.verdict import Coverage, SinkCoverage
from harness.run.store import RunDir
from tests.checkers.test_checker_anomalies import HistoryBuilder, judged

ROOT = Path(__file__).resolve().parents[2]
# The record layer: the only modules that open a run's files (history, test.json, results.json,
# replay.json) and decode them.
READERS = {"harness/run/store.py", "harness/record/io.py", "harness/record/files.py"}
"""The modules that open a run's files: the store (paths, atomic writes) and the record layer."""
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
    coverage = Coverage(
        stops_past_lease={"pause": 2},
        sinks={"store": SinkCoverage(writes=2, accepted=2, keys=2, stale_attempts=1)},
        lease_ttl=1.0,
        power_losses={"total": 1, "dropped_data": 0, "writes_dropped": 0, "bytes_dropped": 0},
    )
    result = replace(judged(_stale_history()), coverage=coverage)
    stopped = Interruption("SIGINT", "2026-12-02T01:00:09+00:00", "the final reads")
    record = _record(interrupted=stopped, lost=("w1: gone",))
    data = results_json(result, interrupted=record.interrupted, lost=record.lost)
    stored = StoredResults.from_json(json.loads(json.dumps(data)))
    assert stored.valid == "invalid" and stored.anomaly_types == tuple(result.anomaly_types)
    assert "stale-write" in stored.anomaly_types
    assert any(line.startswith("stale-write: ") for line in stored.explanations)
    assert stored.interrupted == stopped and stored.lost == ("w1: gone",)
    assert stored.operations == sum(n.get("invoke", 0) for n in result.counts.ops.values())
    (store,) = stored.sinks
    assert store.name == "store" and store.fenced and store.stale_accepted
    assert stored.coverage is not None and stored.gaps == tuple(coverage.gaps())
    assert "power losses dropped anything" in stored.gaps[0]
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


_RUN_FILE_ATTRIBUTES = frozenset(("test_json", "results", "history", "replay"))
_RUN_FILE_NAMES = ("test.json", "results.json", "history.jsonl", "replay.json")
_LOADERS = frozenset(("loads", "load", "_loads"))


def _names_a_run_file(node: ast.AST, tainted: set[str]) -> bool:
    """``node`` mentions a run's file (``run.results``, ``"test.json"``) or a name that holds
    one or its content."""
    for part in ast.walk(node):
        if isinstance(part, ast.Attribute) and part.attr in _RUN_FILE_ATTRIBUTES:
            return True
        text = part.value if isinstance(part, ast.Constant) else None
        if isinstance(text, str) and any(name in text for name in _RUN_FILE_NAMES):
            return True
        if isinstance(part, ast.Name) and part.id in tainted:
            return True
    return False


def _targets(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) pairs a statement binds: ``x = ...``, ``with ... as x``, ``for x in``."""
    if isinstance(node, ast.Assign):
        return [(target, node.value) for target in node.targets]
    if isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, ast.With):
        return [(i.optional_vars, i.context_expr) for i in node.items if i.optional_vars]
    if isinstance(node, ast.For):
        return [(node.target, node.iter)]
    return []


def run_file_parses(source: str) -> list[int]:
    """Lines of ``source`` that decode a run file's content with ``json.loads``/``json.load``
    (or orjson's): the file named in the call, or in a name it was read into, within one
    function (followed through assignments, ``with ... as`` and ``for``)."""
    tree = ast.parse(source)
    scopes: list[ast.AST] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    found: set[int] = set()
    for scope in scopes:
        nodes = list(ast.walk(scope))
        tainted: set[str] = set()
        grew = True
        while grew:  # a name read from a name read from a run file is one too
            grew = False
            for node in nodes:
                for target, value in _targets(node):
                    if not _names_a_run_file(value, tainted):
                        continue
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id not in tainted:
                            tainted.add(name.id)
                            grew = True
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in _LOADERS:
                continue
            if any(_names_a_run_file(arg, tainted) for arg in node.args):
                found.add(node.lineno)
    return sorted(found)


def test_only_the_record_layer_parses_a_runs_files() -> None:
    offenders = []
    for package in ("harness", "checkers", "systems", "nemeses", "workloads"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith("harness/record/"):
                continue
            source = path.read_text()
            lines = source.splitlines()
            for number in run_file_parses(source):
                offenders.append(f"{name}:{number}: {lines[number - 1].strip()}")
    assert not offenders, (
        "decode run files through their typed readers (RunDir.read_record, read_results):\n"
        + "\n".join(offenders)
    )


@pytest.mark.parametrize(
    "source",
    [
        "data = json.loads(run.results.read_text())",
        "def f(run):\n    text = run.test_json.read_bytes()\n    return json.loads(text)",
        "def f(folder):\n    path = folder / 'results.json'\n"
        "    with open(path) as stream:\n        return json.load(stream)",
        "def f(run):\n    for line in open(run.history):\n        orjson.loads(line)",
    ],
)
def test_the_parse_scan_finds_a_stray_decoder(source: str) -> None:
    assert run_file_parses(source)


def test_the_parse_scan_passes_other_json() -> None:
    source = (
        "def f(sock, run):\n    line = sock.readline()\n    path = run.results\n"
        "    return json.loads(line)"
    )
    assert run_file_parses(source) == []


def test_the_scan_finds_a_stray_reader() -> None:
    assert _RUN_FILE_READ.search("data = json.loads(run.results.read_text())")
    assert _RUN_FILE_READ.search("with open(outcome.run_dir.history) as lines:")
    assert not _RUN_FILE_READ.search("path = run.results")


def test_evidence_reads_back_into_the_checkers_own_types() -> None:
    result = judged(_stale_history())
    data = results_json(result)
    stored = StoredResults.from_json(json.loads(json.dumps(data)))
    kept = [item for item in stored.evidence if item.name == "stale-write"]
    assert kept and not kept[0].expected
    found = result.anomalies["stale-write"][0]
    assert kept[0].ops == found.ops and kept[0].faults == found.faults
    assert kept[0].explanation == found.explanation and kept[0].sink == found.sink
    assert stored.anomaly_counts == result.anomaly_counts


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (
            {"anomalies": {"stale-write": [{"ops": [{"index": "7"}]}]}},
            "stale-write[0].ops[0].index",
        ),
        ({"sinks": {"store": {"accepted_writes": "3"}}}, "sinks.store.accepted_writes"),
        ({"coverage": {"stale_attempts": 1.5}}, "coverage.stale_attempts"),
        (
            {"coverage": {"overlaps": {"kill+pause": {"seconds": "2"}}}},
            "overlaps.kill+pause.seconds",
        ),
    ],
)
def test_a_malformed_report_field_is_named(data: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=re.escape(field)):
        StoredResults.from_json({"valid": True, **data})
