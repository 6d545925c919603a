"""Coverage and fault windows read a kind's recorded facts, never its name.

Each history here uses kinds no registry has (``warp``, ``crash``, ``stall-and-crash``) with the
facts a player would record for them: what the readers count follows from the facts alone, so a
new fault kind needs no change outside its module and its registry entry.
"""

from __future__ import annotations

from typing import Any

from checkers.coverage import coverage_of
from checkers.explain import RESTARTED
from checkers.faults import FaultTimeline
from harness.record import Event, NemesisFacts
from harness.run.exposure import need_of
from nemeses import KINDS
from systems import Exposure

S = 1_000_000_000
ROLES = {"w1": "worker", "w2": "worker", "l1": "lock", "s1": "store"}


def _nemesis(index: int, time: int, f: str, facts: NemesisFacts, **value: Any) -> Event:
    return Event(index, time, "nemesis", "info", f, {"id": 0, **value, "facts": facts.to_json()})


def _held(index: int, time: int, node: str = "w1") -> list[Event]:
    grant = {"lock": "a", "epoch": 1}
    return [
        Event(index, time, 1, "invoke", "acquire", {"lock": "a"}, node),
        Event(index + 1, time, 1, "ok", "acquire", grant, node),
    ]


def test_a_kind_whose_facts_say_it_moves_a_clock_is_a_clock_window() -> None:
    warp = NemesisFacts(moves_clock=True)
    events = [
        *_held(0, 0),
        _nemesis(2, 1 * S, "start-warp", warp, targets=["w1"], by_s=4.0),
        _nemesis(3, 2 * S, "stop-warp", warp, targets=["w1"]),
    ]
    coverage = coverage_of(events, lease_ttl=2.0, roles=ROLES)
    assert coverage.clock_windows == 1 and coverage.clock_across_expiry == 1
    assert coverage.stops_past_lease == {}  # a clock fault stops nobody


def test_a_kind_whose_facts_say_it_restarts_counts_the_nodes_its_stop_names() -> None:
    crash = NemesisFacts(restarts=True)
    events = [
        _nemesis(0, 1 * S, "start-crash", crash, targets=["w1"]),
        _nemesis(1, 2 * S, "stop-crash", crash, targets=["w1"], restarted=["s1", "l1"]),
    ]
    assert coverage_of(events, roles=ROLES).restarts == {"store": 1, "lock": 1}
    quiet = NemesisFacts()  # the same events from a kind that restarts nothing
    events = [_nemesis(0, 1 * S, "start-crash", quiet), _nemesis(1, 2 * S, "stop-crash", quiet)]
    assert coverage_of(events, roles=ROLES).restarts == {}


def test_a_compound_that_stops_and_restarts_is_read_into_its_parts_by_its_facts() -> None:
    facts = NemesisFacts(stops_holder=True, restarts=True, parts=("freeze", "kill"))
    timeline = FaultTimeline()
    timeline.add(_nemesis(0, 1 * S, "start-stall-and-crash", facts, targets=["w1"]))
    timeline.add(
        _nemesis(
            1,
            4 * S,
            "stop-stall-and-crash",
            facts,
            targets=["w1"],
            restarted=["s1"],
            step_scheduled=2 * S,
            step_confirmed=3 * S,
            scheduled=4 * S,
        )
    )
    (window,) = timeline.windows()
    stopped, restart = window.parts
    assert stopped.kind == "freeze" and stopped.targets == ("w1",)
    assert restart.kind == RESTARTED and restart.targets == ("s1",)
    assert (restart.start, restart.end) == (2 * S, 3 * S)


def test_the_stops_an_exposure_may_stand_in_for_come_from_the_registry() -> None:
    stops = {name for name, kind in KINDS.items() if kind.stops_holder}
    assert need_of(Exposure(faults=("freeze",))).kinds == stops
    assert need_of(Exposure(faults=("freeze",))).past_lease
    assert need_of(Exposure(faults=("kill",))).kinds == {"kill"}
    assert not need_of(Exposure(faults=("kill",))).past_lease
