"""Matrix rows that carry an exact fault schedule (``windows``): parsing, validation (bad input
exits 3 with one line), ``cross``, and ``run-all`` playing the windows instead of the seed's.

The round trip from a shrink's output is in ``test_shrink_search.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import harness.cli.run_all as run_all_module
from checkers import check_file
from harness.cli import EXIT_ERROR, EXIT_VALID, main
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.judge import RunOutcome
from harness.run.matrix import MatrixError, entries_from
from harness.run.store import new_run_dir
from nemeses import Schedule, Window

_PAUSE = Window(
    index=3,
    start_ns=1_200_000_000,
    duration_ns=1_500_000_000,
    kind="pause",
    targets=("holder",),
    ttl_multiple=3.0,
    fallback="w1",
    params={"process": "agent"},
)
_KILL = Window(5, 400_000_000, 100_000_000, "kill", ("s1",), 0.2, None, {"process": "store"})


def _row(*windows: Window, **fields: Any) -> dict[str, Any]:
    return {
        "ttl": 0.5,
        "time_limit": 6,
        "seed": 4,
        "windows": [w.to_json() for w in windows],
        **fields,
    }


def test_a_row_with_windows_carries_them_ordered_with_its_nemeses_from_their_kinds() -> None:
    (entry,) = entries_from({"runs": [_row(_PAUSE, _KILL)]})
    assert entry.schedule == Schedule(4, 500_000_000, 6_000_000_000, (_KILL, _PAUSE))
    assert set(entry.spec.nemeses) == {"pause", "kill"}
    assert "(2 fixed windows)" in entry.label
    (plain,) = entries_from({"runs": [{"seed": 4}]})
    assert plain.schedule is None


def test_cross_keeps_the_windows_whole_and_defaults_may_hold_them() -> None:
    entries = entries_from({"defaults": _row(_PAUSE), "cross": {"seed": [1, 2], "workers": [2, 3]}})
    assert len(entries) == 4
    assert all(e.schedule is not None and e.schedule.windows == (_PAUSE,) for e in entries)
    assert {(e.spec.seed, e.schedule.seed) for e in entries if e.schedule} == {(1, 1), (2, 2)}


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ({"windows": "pause"}, "windows must be a non-empty list of window objects"),
        ({"windows": []}, "windows must be a non-empty list"),
        ({"windows": [{"index": 0}]}, "window 1: bad schedule window"),
        (_row(Window(0, 0, 10, "nap", ("holder",), 1.0)), "unknown fault kind 'nap'"),
        (_row(Window(0, -5, 10, "pause", ("holder",), 1.0)), "start_ns >= 0, duration_ns > 0"),
        (_row(Window(0, 0, 10, "pause", (), 1.0)), "at least one target"),
        (_row(_PAUSE, _PAUSE), "windows repeat an index"),
        (_row(_PAUSE, time_limit=2), "ends at 2.7 s, after the time_limit of 2 s"),
        (_row(_KILL, nemeses=["pause"]), "is a kill fault but the row's nemeses are pause"),
        (_row(Window(0, 0, 10, "pause", ("w9",), 1.0)), "aims at w9, not a node of this run"),
    ],
)
def test_a_bad_window_is_refused_naming_the_row_and_the_fix(row: dict[str, Any], said: str) -> None:
    with pytest.raises(MatrixError, match="matrix run 1: ") as refused:
        entries_from({"runs": [row]})
    assert said in str(refused.value)
    assert "\n" not in str(refused.value)


def test_run_all_refuses_a_bad_window_with_exit_3_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps({"runs": [_row(_PAUSE, time_limit=2)]}))
    with pytest.raises(SystemExit) as done:
        main(["run-all", "--matrix", str(matrix), "--store", str(tmp_path / "store")])
    assert done.value.code == EXIT_ERROR
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "raise time_limit or move the window" in err
    assert "Traceback" not in err


def test_run_all_plays_a_rows_windows_and_lets_other_rows_draw_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    played: list[Schedule | None] = []

    def run_test(spec: RunSpec, *, schedule: Schedule | None = None, **_: object) -> RunOutcome:
        played.append(schedule)
        run = new_run_dir(spec.test_name, spec.store)
        run.write_json(run.test_json, {"spec": spec.to_json()})
        run.write_json(run.results, {"valid": True, "anomaly_types": []})
        return RunOutcome(run, check_file(run.history), interrupted=False)

    monkeypatch.setattr(run_all_module, "run_test", run_test)
    matrix = tmp_path / "m.json"
    matrix.write_text(json.dumps({"runs": [_row(_PAUSE), {"seed": 1, "time_limit": 6}]}))
    with pytest.raises(SystemExit) as done:
        main(["run-all", "--matrix", str(matrix), "--store", str(tmp_path / "store")])
    assert done.value.code == EXIT_VALID
    assert played == [Schedule(4, 500_000_000, 6_000_000_000, (_PAUSE,)), None]


def test_the_readme_example_row_with_windows_loads() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", readme, flags=re.DOTALL)
    (example,) = [json.loads(b) for b in blocks if '"windows"' in b]
    (entry,) = entries_from(example)
    assert entry.schedule is not None and [w.kind for w in entry.schedule.windows] == ["pause"]
    assert entry.expect.anomalies == ("stale-write",)
