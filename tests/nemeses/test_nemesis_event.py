"""The typed nemesis event: the player writes it, one reader parses it, the kinds' facts travel.

The player records each window through :class:`harness.record.NemesisEvent` with its kind's facts
from the registry, so readers below the nemeses (coverage, fault windows) never test a kind's
name; histories written before the facts were recorded read the facts of that time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.record import Event, HistoryError, NemesisEvent, read_history
from harness.record.nemesis import _FACTS_BEFORE_RECORDING
from nemeses import KINDS
from nemeses.noop import NoopNemesis
from nemeses.player import NemesisPlayer
from nemeses.schedule import Window
from tests.support.nemesis_fakes import Recording, clock, fake_cluster

MS = 1_000_000
STORED = Path(__file__).parents[1] / "harness" / "stored_runs"


def _play(*windows: Window) -> list[tuple[str, dict[str, Any]]]:
    record = Recording()
    with NemesisPlayer(fake_cluster(), NoopNemesis(), list(windows), clock(), record) as player:
        player.join(10)
    return list(record.events)


def test_the_player_records_each_kinds_facts_from_its_registry_entry() -> None:
    windows = [
        Window(i, (1 + 10 * i) * MS, 5 * MS, name, ("w1",), 0.15, None, {})
        for i, name in enumerate(("pause", "kill", "clock-step", "hold"))
    ]
    for f, value in _play(*windows):
        kind = KINDS[f.partition("-")[2]]
        parsed = NemesisEvent.from_json(f, value)
        assert parsed.facts == kind.facts()
        assert parsed.to_json() == value  # one writer, one reader: they agree
    stops = {f: value for f, value in _play(*windows) if f.startswith("stop-")}
    assert stops["stop-kill"]["restarted"] == ["w1"]  # kill restarts its targets
    assert "restarted" not in stops["stop-pause"]


def test_a_compound_names_the_node_its_stop_restarted_from_its_entry() -> None:
    compound = Window(
        0,
        1 * MS,
        5 * MS,
        "restart-while-paused",
        ("w1",),
        3.0,
        None,
        {"restart": "s1", "process": "agent"},
    )
    (_, start), (_, stop) = _play(compound)
    assert start["facts"] == {
        "stops_holder": True,
        "moves_clock": False,
        "restarts": True,
        "parts": ["pause", "kill"],
    }
    assert stop["restarted"] == ["s1"] and stop["restart"] == "s1"


def test_the_frozen_table_of_old_histories_agrees_with_the_registry() -> None:
    # Old histories and new ones of the same kind must be read alike.
    for name, facts in _FACTS_BEFORE_RECORDING.items():
        assert facts == KINDS[name].facts(), name


@pytest.mark.parametrize("run", ["2026-12-02-valid", "2026-12-02-invalid"])
def test_a_stored_history_without_facts_reads_the_facts_of_its_time(run: str) -> None:
    events = [e for e in read_history(STORED / run / "history.jsonl") if e.process == "nemesis"]
    assert events
    for event in events:
        assert "facts" not in event.value
        parsed = NemesisEvent.of(event)
        assert parsed.facts == KINDS[parsed.kind].facts() and parsed.facts.stops_holder
        assert parsed.applied and parsed.window is not None and parsed.targets
        if parsed.action == "stop" and parsed.facts.restarts:
            assert parsed.restarted == (event.value["restart"],)  # s1, not the paused holder


@pytest.mark.parametrize(
    ("field", "bad", "named"),
    [
        ("facts", {"stops_holder": "yes"}, "facts.stops_holder"),
        ("facts", {"parts": "pause"}, "facts.parts"),
        ("facts", [], "facts must be a JSON object"),
        ("scheduled", -1, "scheduled must be an integer"),
        ("by_s", "3", "by_s must be a number"),
        ("targets", [{"w1": 1}], "targets are malformed"),
        ("lost", 4, "lost must be a JSON object"),
        ("restarted", 7, "restarted are malformed"),
    ],
)
def test_the_reader_names_the_field_at_fault(field: str, bad: object, named: str) -> None:
    raw = Event(3, 10, "nemesis", "info", "stop-kill", {"id": 0, field: bad}, line=4)
    with pytest.raises(HistoryError, match="line 4") as caught:
        NemesisEvent.of(raw)
    assert named in str(caught.value)


_names = st.text("abcdefgw123", min_size=1, max_size=4)


@given(
    kind=st.sampled_from(sorted(KINDS)),
    action=st.sampled_from(("start", "stop", "step")),
    window=st.one_of(st.none(), st.integers(0, 50)),
    targets=st.lists(_names, max_size=3),
    applied=st.booleans(),
    scheduled=st.one_of(st.none(), st.integers(0, 10**12)),
    by_s=st.one_of(st.none(), st.floats(-10, 10, allow_nan=False)),
    params=st.dictionaries(st.sampled_from(("process", "pids", "drops")), st.integers(0, 9)),
)
def test_what_the_writer_writes_the_reader_reads_back(
    kind: str,
    action: str,
    window: int | None,
    targets: list[str],
    applied: bool,
    scheduled: int | None,
    by_s: float | None,
    params: dict[str, int],
) -> None:
    entry = KINDS[kind]
    restarted = tuple(targets) if entry.restarts and action == "stop" and applied else ()
    event = NemesisEvent(
        f=f"{action}-{kind}",
        window=window,
        targets=tuple(targets),
        applied=applied,
        error=None if applied else "it failed",
        facts=entry.facts(),
        scheduled=scheduled,
        confirmed=scheduled if applied else None,
        by_s=by_s,
        restarted=restarted,
        params=params,
    )
    value = json.loads(json.dumps(event.to_json()))
    assert NemesisEvent.from_json(event.f, value) == event


def test_each_entrys_facts_agree_with_each_other() -> None:
    for kind in KINDS.values():
        # A kind that kills a daemon starts it again at its stop, and says which nodes.
        assert (kind.kills is not None) == kind.restarts, kind.name
        assert not (kind.moves_clock and kind.stops_holder), kind.name
        assert all(part in KINDS for part in kind.parts), kind.name
        if kind.parts:
            # A compound's facts are its parts': it stops a holder if its first part does.
            assert kind.stops_holder == KINDS[kind.parts[0]].stops_holder, kind.name
