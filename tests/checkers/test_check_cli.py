"""``fencecheck check``: verdicts, exit codes, the JSON shape, and errors that name the fix."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.cli.check  # noqa: F401  # registers the command on the group
from checkers import ANOMALY_NAMES, check_file
from checkers.registry import REGISTRY
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
            "verb": "paused",
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
    # A usage error: the program (main) turns click's 2 into 3.
    done = subprocess.run(
        [sys.executable, "-m", "harness", "check", str(EXAMPLES / "valid.jsonl"), "--ttl", "soon"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, "write e.g. 500ms, 5s, 2m or 1.5" in done.stderr) == (EXIT_ERROR, True)
    bad = tmp_path / "inventory.json"
    bad.write_bytes(b'{"store": {"fenced": false, "mitigation": "hope"}}')
    code, _, err = run(str(EXAMPLES / "valid.jsonl"), "--inventory", str(bad))
    assert code == EXIT_ERROR
    assert "use one of lock-delay, idempotent, proxy, none" in err


def test_integers_beyond_64_bits_are_written_exactly_by_json_output(tmp_path: Path) -> None:
    huge = 2**64 + 1
    text = (EXAMPLES / "stale-write.jsonl").read_text()
    history = tmp_path / "history.jsonl"
    history.write_text(text.replace('"epoch":8', f'"epoch":{huge}'))
    code, out, err = run(str(history), "--json")
    assert (code, err) == (EXIT_INVALID, "")
    assert str(huge) in out
    (evidence,) = json.loads(out)["anomalies"]["stale-write"]
    assert huge in [op["epoch"] for op in evidence["ops"]]


def test_times_beyond_any_float_are_told_exactly(tmp_path: Path) -> None:
    start = 10**309  # no float holds it: a sentence's seconds are worked out in integers
    text = (EXAMPLES / "stale-write.jsonl").read_text()
    history = tmp_path / "history.jsonl"
    lines = [json.loads(line) for line in text.splitlines()]
    for event in lines:
        event["time"] += start
    history.write_text("".join(json.dumps(event) + "\n" for event in lines))
    code, out, err = run(str(history), "--json")
    assert (code, err) == (EXIT_INVALID, "")
    (evidence,) = json.loads(out)["anomalies"]["stale-write"]
    assert (
        f"paused from {start // 10**9 + 12}.1 s to {start // 10**9 + 18}.4 s"
        in (evidence["explanation"])
    )


def test_an_unknown_fs_value_of_any_json_is_counted_and_ignored(tmp_path: Path) -> None:
    lines = (EXAMPLES / "valid.jsonl").read_text().splitlines(keepends=True)
    last = json.loads(lines[-1])
    extra = [
        {"index": last["index"] + 1, "time": last["time"] + 1, "process": 9, "type": "invoke",
         "f": "cas", "value": 7},
        {"index": last["index"] + 2, "time": last["time"] + 2, "process": 9, "type": "ok",
         "f": "cas", "value": [7, 8]},
        {"index": last["index"] + 3, "time": last["time"] + 3, "process": "nemesis",
         "type": "info", "f": "start", "value": "partition"},
    ]  # fmt: skip
    history = tmp_path / "history.jsonl"
    history.write_text("".join(lines) + "".join(json.dumps(event) + "\n" for event in extra))
    code, _, err = run(str(history))
    assert (code, err) == (EXIT_VALID, "")
    events = [json.loads(line) for line in lines]
    write = next(event for event in events if event["f"] == "write")
    write["value"] = [write["value"]]  # a write's value is read: it must be an object
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps(event) + "\n" for event in events))
    code, _, err = run(str(broken))
    assert code == EXIT_ERROR and "a write's value must be a JSON object" in err


def test_a_gzip_cut_short_names_no_line_zero(tmp_path: Path) -> None:
    whole = gzip.compress((EXAMPLES / "valid.jsonl").read_bytes())
    history = tmp_path / "history.jsonl.gz"
    history.write_bytes(whole[: len(whole) // 2])
    code, _, err = run(str(history))
    assert code == EXIT_ERROR and "line 0" not in err and "cannot be read" in err


def test_max_evidence_zero_counts_every_anomaly_and_keeps_no_evidence() -> None:
    code, out, err = run(str(EXAMPLES / "stale-write.jsonl"), "--json", "--max-evidence", "0")
    assert (code, err) == (EXIT_INVALID, "")
    result = json.loads(out)
    assert (result["anomaly_counts"], result["anomalies"]) == (
        {"stale-write": 1},
        {"stale-write": []},
    )
    code, out, _ = run(str(EXAMPLES / "stale-write.jsonl"), "--max-evidence", "0")
    assert code == EXIT_INVALID
    assert "stale-write" in out
    for bad in ("-1", "many"):
        code, _, err = run(str(EXAMPLES / "stale-write.jsonl"), "--max-evidence", bad)
        assert code == EXIT_ERROR
        assert err.strip().splitlines() == [
            f"Error: --max-evidence {bad!r} is not a whole number >= 0: write it as 0, 5, 100"
        ]


def test_grants_without_grant_seq_say_so_in_the_coverage() -> None:
    code, out, _ = run(str(EXAMPLES / "valid.jsonl"))
    assert code == EXIT_VALID
    flat = " ".join(out.split())
    assert "coverage: grants: grant order not observable: the lock service reports no" in flat
    code, out, _ = run(str(EXAMPLES / "valid.jsonl"), "--json")
    assert json.loads(out)["grants"]["grant_seq_observable"] is False


def test_check_file_agrees_with_the_command() -> None:
    result = check_file(EXAMPLES / "stale-write.jsonl")
    assert result.valid is False
    assert result.to_json()["anomaly_counts"] == {"stale-write": 1}


# -- input from pipes, FIFOs and gzip (issue 10, item 8) ----------------------------------------


def test_a_history_on_standard_input_is_checked() -> None:
    outcome = CliRunner().invoke(
        cli, ["check", "-"], input=(EXAMPLES / "stale-write.jsonl").read_bytes()
    )
    assert outcome.exit_code == EXIT_INVALID
    assert outcome.stdout.startswith("INVALID  -:")


def test_a_fifo_and_a_gzipped_file_are_read(tmp_path: Path) -> None:
    data = (EXAMPLES / "valid.jsonl").read_bytes()
    packed = tmp_path / "history.jsonl.gz"
    packed.write_bytes(gzip.compress(data))
    assert run(str(packed))[0] == EXIT_VALID
    fifo = tmp_path / "history.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(gzip.compress(data),))
    writer.start()
    code, out, _ = run(str(fifo))
    writer.join()
    assert (code, out.startswith("VALID")) == (EXIT_VALID, True)


def test_the_help_and_the_sink_table_come_from_the_registry_and_the_coverage() -> None:
    outcome = CliRunner().invoke(cli, ["check", "--help"])
    flat = " ".join(outcome.stdout.split())
    for kind in REGISTRY.values():
        assert f"{kind.name}: {' '.join(kind.meaning.split())}" in flat
    _, out, _ = run(str(EXAMPLES / "valid.jsonl"))
    assert "coverage: store: cross-key staleness not observable" in " ".join(out.split())


# -- never a traceback (issue 10, item 12) ------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = ("index", "time", "process", "node", "type", "f", "value", "error")


@st.composite
def malformed_histories(draw: st.DrawFn) -> tuple[bytes, bool]:
    """The valid example with one line broken; the flag says whether it is surely malformed."""
    lines = (EXAMPLES / "stale-write.jsonl").read_bytes().splitlines(keepends=True)
    at = draw(st.integers(0, len(lines) - 2))  # not the last line: a torn last line is fine
    how = draw(st.sampled_from(("garbage", "field", "drop", "value-field", "big")))
    event = orjson.loads(lines[at])
    sure = True
    if how == "garbage":
        lines[at] = draw(st.binary(min_size=1, max_size=20)).replace(b"\n", b"") + b"}\n"
    elif how == "drop":
        del event[draw(st.sampled_from(("index", "time", "process", "type", "f")))]
    elif how == "field":
        event[draw(st.sampled_from(FIELDS))] = draw(json_values)
        sure = False
    elif how == "value-field":
        value = event.setdefault("value", {})
        name = draw(
            st.sampled_from(
                (
                    *("epoch", "id", "lock", "sink", "key", "entries", "targets", "seq"),
                    *("grant_seq", "waited", "prev", "also", "restart", "mid_write", "applied"),
                    *("scheduled", "confirmed", "step_scheduled", "step_confirmed", "verb"),
                    *("error", "read"),
                )
            )
        )
        value[name] = draw(json_values)
        sure = False
    else:
        event[draw(st.sampled_from(("index", "time", "process")))] = -draw(st.integers(1, 2**70))
    if how != "garbage":
        lines[at] = json.dumps(event).encode() + b"\n"
    return b"".join(lines), sure


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(malformed_histories())
def test_malformed_input_exits_3_with_one_line_and_never_a_traceback(
    case: tuple[bytes, bool],
) -> None:
    data, sure = case
    outcome = CliRunner().invoke(cli, ["check", "-", "--json"], input=data)
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit), repr(
        outcome.exception
    )
    assert "Traceback" not in outcome.output
    assert outcome.exit_code in (EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_ERROR)
    if sure:
        assert outcome.exit_code == EXIT_ERROR
    if outcome.exit_code == EXIT_ERROR:
        assert len(outcome.stderr.strip().splitlines()) == 1


def test_the_bundled_cross_key_example_is_caught_by_seq_and_unobservable_without_it(
    tmp_path: Path,
) -> None:
    code, out, _ = run(str(EXAMPLES / "stale-write-across-keys.jsonl"), "--ttl", "2s")
    assert code == EXIT_INVALID
    flat = " ".join(out.split())
    assert "fenced store/k2 at seq 5, after w3's write w3-4 (epoch 8) to store/k1 at seq 4" in flat
    assert "w2 was paused from 12.1 s to 18.4 s; lease TTL 2 s" in flat
    unsequenced = tmp_path / "history.jsonl"
    text = (EXAMPLES / "stale-write-across-keys.jsonl").read_text()
    unsequenced.write_text(re.sub(r',"seq":\d+', "", text))
    code, out, _ = run(str(unsequenced))
    assert code == EXIT_VALID
    assert "coverage: store: cross-key staleness not observable" in " ".join(out.split())


def test_check_shows_the_coverage_counted_on_its_one_pass() -> None:
    code, out, _ = run(str(EXAMPLES / "stale-write.jsonl"), "--json", "--ttl", "2s")
    assert code == EXIT_INVALID
    coverage = orjson.loads(out)["coverage"]
    assert coverage["stale_attempts"] >= 1 and coverage["epochs_granted"] == 3
    assert coverage["stops_past_lease"] == {"pause": 1}
    # Standard input is read once too, and gets the same coverage.
    piped = CliRunner().invoke(
        cli,
        ["check", "-", "--json", "--ttl", "2s"],
        input=(EXAMPLES / "stale-write.jsonl").read_bytes(),
    )
    assert orjson.loads(piped.stdout)["coverage"] == coverage


def test_check_says_what_the_history_exercised_in_text_too() -> None:
    code, out, _ = run(str(EXAMPLES / "stale-write.jsonl"), "--ttl", "2s")
    assert code == EXIT_INVALID
    flat = " ".join(out.split())
    verdict = check_file(EXAMPLES / "stale-write.jsonl", lease_ttl=2.0)
    stale = verdict.coverage.stale_attempts
    assert stale >= 1
    assert f"exercised: {stale} stale writes attempted, 1 stops past a lease (pause 1)" in flat
    assert "3 epochs granted" in flat


def test_the_verdicts_coverage_is_the_coverage_of_the_same_history() -> None:
    from checkers.coverage import coverage_of
    from harness.record import read_history

    for name in ("stale-write.jsonl", "valid.jsonl", "stale-write-across-keys.jsonl"):
        path = EXAMPLES / name
        verdict = check_file(path, lease_ttl=2.0)
        alone = coverage_of(read_history(path), lease_ttl=2.0)
        assert verdict.coverage == alone, name
        assert verdict.to_json()["coverage"] == alone.to_json()
