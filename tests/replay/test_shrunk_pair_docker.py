"""The pair a shrink found (``matrices/shrunk-pair.json``) still shows the two-fault bug when its
exact windows are played again: a holder pause and a store kill at the takeover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import fencecheck

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

_MATRIX = Path(__file__).parents[2] / "matrices" / "shrunk-pair.json"
_TRIES = 3
"""Replays race the resumed holder against the next holder's retry (5 of 6 were invalid when the
row was made), so the row counts as reproduced when one of three shows it, as shrink's own
``--tries`` keeps a candidate; a run that errs is a failure at once."""


def test_the_shrunk_pair_replays_invalid(tmp_path: Path) -> None:
    said = []
    for attempt in range(_TRIES):
        done = fencecheck(
            "run-all", "--matrix", str(_MATRIX), "--store", str(tmp_path / str(attempt)),
            "--no-progress",
        )  # fmt: skip
        text = done.stdout + done.stderr
        said.append(text[-1200:])
        assert "1 run:" in text, said[-1]  # it ran, whatever it found
        if "1 as expected" in text:
            return
    pytest.fail("the shrunk pair was valid in every replay:\n" + "\n".join(said))


def test_the_shrunk_pair_is_two_overlapping_windows() -> None:
    (row,) = json.loads(_MATRIX.read_text())["runs"]
    pause, kill = row["windows"]
    assert (pause["kind"], kill["kind"]) == ("pause", "kill")
    assert kill["params"]["overlaps"] == pause["index"]
    assert pause["start_ns"] <= kill["start_ns"] <= pause["start_ns"] + pause["duration_ns"]
