"""The run record round-trips through test.json, and old or damaged records are handled."""

from __future__ import annotations

import errno
import io
from pathlib import Path

import docker.errors
import pytest
from rich.console import Console

from harness.record import Sink
from harness.record.run_record import Interruption, NodeEntry, RunRecord
from harness.record.schedule import Schedule
from harness.record.spec import TestSpec
from harness.run.store import new_run_dir


def _record() -> RunRecord:
    return RunRecord(
        spec=TestSpec(bugs=("no-store-check",), seed=7),
        run_id="r1",
        started="2026-11-30T12:00:00+00:00",
        command="fencecheck run --bug no-store-check",
        lease_ttl=1.5,
        schedule=Schedule(7, 1_500_000_000, 30_000_000_000, ()),
        inventory=(Sink("store", True, seq=True), Sink("audit", False, "lock-delay")),
        topology=(NodeEntry("l1", "lock"), NodeEntry("w1", "worker")),
        versions={"fencecheck": "0.1.0"},
    )


def test_an_unfinished_record_round_trips_and_an_old_one_counts_as_finished() -> None:
    record = _record()
    record.finished = False  # as the runner writes it at the start, until it reaches its check
    assert record.to_json()["finished"] is False
    assert RunRecord.from_json(record.to_json()).finished is False
    old = {key: value for key, value in record.to_json().items() if key != "finished"}
    assert RunRecord.from_json(old).finished is True


def test_a_record_round_trips_with_what_happened_to_the_run() -> None:
    record = _record()
    record.error = "RuntimeError: the engine went away"
    record.interrupted = Interruption("SIGINT", "2026-11-30T12:00:09+00:00", "the workload")
    record.heal_errors = ("w1: cannot thaw",)
    again = RunRecord.from_json(record.to_json())
    assert again == record
    assert again.sinks["store"].seq and again.roles == {"l1": "lock", "w1": "worker"}
    assert again.interrupted is not None
    assert again.interrupted.describe() == (
        "interrupted by SIGINT at 2026-11-30T12:00:09+00:00 during the workload"
    )


def test_a_plain_run_writes_no_empty_facts() -> None:
    data = _record().to_json()
    assert not {"error", "interrupted", "heal_errors"} & set(data)


def test_an_older_record_without_the_newer_fields_still_loads() -> None:
    data = _record().to_json()
    for row in data["inventory"]:
        del row["seq"], row["description"]
    del data["versions"], data["topology"]
    record = RunRecord.from_json(data)
    assert not record.sinks["store"].seq and record.topology == ()


def test_a_damaged_record_names_what_is_missing() -> None:
    data = _record().to_json()
    del data["lease_ttl"]
    with pytest.raises(ValueError, match="lease_ttl"):
        RunRecord.from_json(data)
    with pytest.raises(ValueError, match="malformed"):
        RunRecord.from_json({**_record().to_json(), "inventory": [1]})


def test_an_engine_error_is_not_blamed_on_the_disk(tmp_path: Path) -> None:
    from harness.run.runner import _RunState

    def failed_with(problem: BaseException) -> str:
        state = _RunState(new_run_dir("t", tmp_path), _record(), Console(file=io.StringIO()))
        state.fail(problem)
        assert state.record.error is not None
        return state.record.error

    # docker's HTTP errors are OSErrors (through requests) with no errno.
    refused = docker.errors.APIError("403 Forbidden: network has active endpoints")
    assert "disk" not in failed_with(refused) and "active endpoints" in failed_with(refused)
    full = OSError(errno.ENOSPC, "No space left on device", "history.jsonl")
    assert "free space on the store's disk" in failed_with(full)
