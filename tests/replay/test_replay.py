"""``fencecheck replay``: a stored invalid run, replayed with its seed and recorded schedule,
shows its anomaly again; runs that cannot be replayed exit 3 with the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR, EXIT_INVALID, EXIT_VALID, main
from harness.record import NEMESIS, HistoryWriter, Sink
from harness.record.run_record import NodeEntry, RunRecord
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.replay import load_run, pinned
from harness.run.store import new_run_dir
from tests.support.cli import fencecheck


def _stored(store: Path, schedule: dict[str, object], *, checked: bool, name: str = "") -> Path:
    """A run directory as the runner leaves it (no cluster needed to read one back); its spec
    carries ``name``, whatever folder it is in."""
    spec = RunSpec(store=store, seed=5, name=name)
    run = new_run_dir(RunSpec(seed=5).test_name, store)
    record = RunRecord(
        spec=spec,
        run_id="r",
        started="2026-01-01T00:00:00+00:00",
        command="fencecheck run --seed 5",
        lease_ttl=1.0,
        schedule=None,
        inventory=(Sink("store", True, "none", ""),),
        topology=(NodeEntry("w1", "worker"),),
    )
    # The schedule as test.json holds it, a bad one included (the record would refuse it).
    run.write_json(run.test_json, {**record.to_json(), "schedule": schedule})
    if checked:
        run.write_json(run.results, {"valid": False, "anomaly_types": ["stale-write"]})
    return run.path


def _exit(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert isinstance(done.value.code, int)
    return done.value.code


_SCHEDULE = {"seed": 5, "lease_ttl_ns": 10**9, "duration_ns": 3 * 10**10, "windows": []}


@pytest.mark.parametrize(
    ("schedule", "checked", "says"),
    [
        ({}, True, "records no fault schedule"),
        ({"seed": 5}, True, "bad schedule"),
        (_SCHEDULE, False, "was never checked"),
    ],
)
def test_a_run_that_cannot_be_replayed_exits_3_naming_why(
    schedule: dict[str, object],
    checked: bool,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _stored(tmp_path / "store", schedule, checked=checked)
    assert _exit(["replay", str(run), "--no-progress"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err
    assert len(list((tmp_path / "store").glob("*/*/history.jsonl"))) == 1  # nothing was run


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "up/../../x"])
def test_a_stored_name_that_leaves_the_store_is_refused_before_the_replay_runs(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    run = _stored(store, _SCHEDULE, checked=True, name=name)
    assert _exit(["replay", str(run), "--no-progress"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "cannot be a folder of the store" in err, err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # nothing beside the store
    assert len(list(store.rglob("history.jsonl"))) == 1  # nothing was run


def _window(index: int, kind: str, targets: list[str]) -> dict[str, object]:
    return {
        "index": index,
        "start_ns": 10**9 * (index + 1),
        "duration_ns": 10**9,
        "kind": kind,
        "targets": targets,
        "ttl_multiple": 3.0,
        "fallback": "w1",
        "params": {},
    }


def test_pinned_windows_aim_at_the_nodes_they_landed_on(tmp_path: Path) -> None:
    windows = [
        _window(0, "pause", ["holder"]),
        _window(1, "partition", ["holder"]),
        _window(2, "pause", ["s1"]),
        _window(3, "pause", ["holder"]),
        _window(4, "pause", ["holder"]),
    ]
    run = _stored(tmp_path / "store", {**_SCHEDULE, "windows": windows}, checked=True)
    with HistoryWriter(run / "history.jsonl") as history:
        for window, targets, applied in ((0, ["w2"], True), (1, ["w3"], True), (2, ["s1"], True)):
            value = {"id": window, "targets": targets, "applied": applied}
            history.append(time=window, process=NEMESIS, type="info", f="start-x", value=value)
        value = {"id": 3, "targets": ["w1"], "applied": False, "error": "no such process"}
        history.append(time=3, process=NEMESIS, type="info", f="start-pause", value=value)
    stored = load_run(run)
    aimed = [w.targets for w in pinned(stored).windows]
    # the holder pause lands where it did; a partition, an explicit target, an unapplied
    # window and one that never started keep what the schedule says
    assert aimed == [("w2",), ("holder",), ("s1",), ("holder",), ("holder",)]
    assert [w.start_ns for w in pinned(stored).windows] == [
        w.start_ns for w in stored.schedule.windows
    ]


def test_a_folder_that_is_no_run_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit(["replay", str(tmp_path), "--no-progress"]) == EXIT_ERROR
    assert "is not a run directory" in capsys.readouterr().err


@pytest.mark.docker
def test_a_stored_invalid_run_replays_with_its_anomaly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = fencecheck(
        "run",
        "--bug",
        "no-store-check",
        "--fault-lengths",
        "3",
        "--time-limit",
        "12",
        "--seed",
        "7",
        "--store",
        str(store),
        "--no-progress",
    )
    assert first.returncode == EXIT_INVALID, first.stderr[-2000:]
    original = (store / "latest").resolve()
    assert "stale-write" in json.loads((original / "results.json").read_text())["anomaly_types"]

    again = fencecheck("replay", str(original), "--no-progress")
    story = again.stdout + again.stderr[-2000:]
    assert again.returncode == EXIT_INVALID, story
    assert (
        "reproduced: original invalid (stale-write), replay invalid (stale-write)" in again.stdout
    ), story
    replayed = (store / "latest").resolve()
    assert replayed != original
    old = json.loads((original / "test.json").read_text())
    new = json.loads((replayed / "test.json").read_text())
    assert new["schedule"] == old["schedule"]
    assert new["spec"]["seed"] == old["spec"]["seed"] == 7
    assert new["command"] == f"fencecheck replay {original}"
    assert "stale-write" in json.loads((replayed / "results.json").read_text())["anomaly_types"]

    pinned_run = fencecheck("replay", "--pin", str(original), "--no-progress")
    story = pinned_run.stdout + pinned_run.stderr[-2000:]
    assert pinned_run.returncode in (EXIT_VALID, EXIT_INVALID), story
    landed = {
        event["value"]["id"]: event["value"]["targets"]
        for event in map(json.loads, (original / "history.jsonl").read_text().splitlines())
        if event["process"] == "nemesis" and event["f"] == "start-pause"
    }
    aimed = json.loads(((store / "latest").resolve() / "test.json").read_text())["schedule"]
    assert {w["index"]: w["targets"] for w in aimed["windows"]} == landed


def test_a_replay_that_did_not_reproduce_says_which_windows_landed_otherwise(
    tmp_path: Path,
) -> None:
    """Each window's landing (node, applied, inside a write or not) is compared: the report and
    ``replay`` name the differences instead of a bare "not reproduced"."""
    from harness.report import write_report
    from harness.run.replay import differences
    from harness.run.store import RunDir

    def landed(store: str, windows: list[dict[str, object]]) -> RunDir:
        path = _stored(tmp_path / store, _SCHEDULE, checked=True)
        with HistoryWriter(path / "history.jsonl") as history:
            for value in windows:
                history.append(time=1, process=NEMESIS, type="info", f="start-pause", value=value)
        return RunDir(path)

    first = landed(
        "a",
        [
            {"id": 0, "targets": ["w2"], "applied": True, "mid_write": True},
            {"id": 1, "targets": ["w1"], "applied": True},
            {"id": 2, "targets": ["w3"], "applied": True},
        ],
    )
    again = landed(
        "b",
        [
            {"id": 0, "targets": ["w2"], "applied": True, "mid_write": False},
            {"id": 1, "targets": ["w3"], "applied": True},
        ],
    )
    assert differences(first, again) == [
        "window 0 (pause) began inside a write the first time, between writes in the replay (a "
        "pause between writes only delays a holder that checks its lease)",
        "window 1 (pause) landed on w1 the first time, on w3 in the replay (pin it with --pin)",
        "window 2 (pause) started the first time, not in the replay",
    ]
    assert differences(first, first) == []
    reasons = differences(first, again)
    again.write_json(
        again.replay,
        {
            "of": str(first.path),
            "original": "invalid",
            "again": "valid",
            "reproduced": False,
            "differences": reasons,
        },
    )
    page = write_report(again).read_text()
    assert "not reproduced. Why it may not:" in page and "landed on w1 the first time" in page
