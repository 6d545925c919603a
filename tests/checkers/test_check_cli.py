"""``fencecheck check``: verdicts, exit codes, the JSON shape, and errors that name the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import harness.cli.check  # noqa: F401  # registers the command on the group
from checkers import ANOMALY_NAMES, check_file
from harness.cli import EXIT_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> tuple[int, str, str]:
    outcome = CliRunner().invoke(cli, ["check", *args])
    return outcome.exit_code, outcome.stdout, outcome.stderr


def test_the_bundled_stale_write_example_is_invalid_and_explained() -> None:
    code, out, _ = run(str(EXAMPLES / "stale-write.jsonl"), "--ttl", "2s")
    assert code == EXIT_INVALID
    assert "INVALID" in out
    flat = " ".join(out.split())
    assert "w2 was paused from 12.1 s to 18.4 s; lease TTL 2 s" in flat


def test_the_bundled_valid_example_is_valid() -> None:
    code, out, _ = run(str(EXAMPLES / "valid.jsonl"))
    assert code == EXIT_VALID
    assert out.startswith("VALID")


def test_json_output_has_the_documented_shape() -> None:
    code, out, _ = run(str(EXAMPLES / "stale-write.jsonl"), "--json", "--ttl", "2000ms")
    assert code == EXIT_INVALID
    result: dict[str, Any] = orjson.loads(out)
    assert result["valid"] is False
    assert result["anomaly_types"] == ["stale-write"]
    assert result["lease_ttl"] == 2.0
    (evidence,) = result["anomalies"]["stale-write"]
    assert set(evidence) == {
        "anomaly",
        "explanation",
        "sink",
        "key",
        "lock",
        "ops",
        "faults",
        "details",
    }
    assert evidence["explanation"].startswith("w2's write w2-15 (epoch 7) was accepted")
    op_fields = {
        "role", "f", "type", "index", "time", "invoke_index", "invoke_time", "process", "node",
        "lock", "epoch", "id", "sink", "key", "error", "position",
    }  # fmt: skip
    assert all(set(op) == op_fields for op in evidence["ops"])
    assert evidence["faults"] == [
        {
            "kind": "pause",
            "targets": ["w2"],
            "start": 12_100_000_000,
            "end": 18_400_000_000,
            "start_index": 15,
            "end_index": 20,
            "applied": True,
            "error": None,
            "parts": [],
        }
    ]
    assert result["sinks"]["store"]["valid"] is False
    assert set(result["anomaly_types"]) <= set(ANOMALY_NAMES)


def test_an_inventory_makes_the_unguarded_stale_write_expected(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.json"
    inventory.write_bytes(
        orjson.dumps({"sinks": {"store": {"fenced": False, "mitigation": "none"}}})
    )
    code, out, _ = run(str(EXAMPLES / "stale-write.jsonl"), "--json", "--inventory", str(inventory))
    result = orjson.loads(out)
    assert code == EXIT_VALID
    assert result["anomaly_types"] == []
    assert result["expected_types"] == ["stale-write"]
    assert result["sinks"]["store"]["declared"] is True


def test_the_bundled_inventory_declares_the_store_fenced() -> None:
    code, out, _ = run(
        str(EXAMPLES / "stale-write.jsonl"),
        "--json",
        "--inventory",
        str(EXAMPLES / "inventory.json"),
    )
    assert code == EXIT_INVALID
    assert orjson.loads(out)["sinks"]["store"]["declared"] is True


def test_too_little_evidence_exits_unknown(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    lines = (EXAMPLES / "valid.jsonl").read_bytes().splitlines(keepends=True)
    history.write_bytes(b"".join(line for line in lines if b'"f":"read"' not in line))
    code, out, _ = run(str(history))
    assert code == EXIT_UNKNOWN
    assert "unknown: no successful read" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'{"index":0,"time":0,"process":1,"type":"invoke","f":"read","value":{}}\nnot json\n',
            "history line 2: not valid JSON",
        ),
        (
            b'{"index":0,"time":0,"process":1,"type":"ok","f":"read","value":{}}\n',
            "history line 1: ok of 'read' on process 1 has no invoke",
        ),
    ],
)
def test_bad_input_exits_3_naming_the_line(tmp_path: Path, content: bytes, message: str) -> None:
    history = tmp_path / "history.jsonl"
    history.write_bytes(content)
    code, _, err = run(str(history))
    assert code == EXIT_ERROR
    assert message in err


def test_missing_files_and_bad_options_exit_3_with_the_fix(tmp_path: Path) -> None:
    code, _, err = run(str(tmp_path / "nope.jsonl"))
    assert (code, "pass the path of a history.jsonl" in err) == (EXIT_ERROR, True)
    code, _, err = run(str(EXAMPLES / "valid.jsonl"), "--ttl", "soon")
    assert (code, "write it as 2, 2s or 1500ms" in err) == (EXIT_ERROR, True)
    bad = tmp_path / "inventory.json"
    bad.write_bytes(b'{"store": {"fenced": false, "mitigation": "hope"}}')
    code, _, err = run(str(EXAMPLES / "valid.jsonl"), "--inventory", str(bad))
    assert code == EXIT_ERROR
    assert "use one of lock-delay, idempotent, proxy, none" in err


def test_check_file_agrees_with_the_command() -> None:
    result = check_file(EXAMPLES / "stale-write.jsonl")
    assert result.valid is False
    assert result.to_json()["anomaly_counts"] == {"stale-write": 1}
