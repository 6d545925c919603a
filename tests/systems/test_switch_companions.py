"""A switch that shows only beside another (``BugSwitch.beside``) is planted with it."""

from __future__ import annotations

import pytest

from harness.record.schedule import Schedule
from harness.record.spec import TestSpec
from harness.run.exposure import planted_with, switches_of, unshown
from harness.run.matrix import entries_from
from systems import BugSwitch, load_system

_EQUAL = "equal-epoch-any-holder"
_COUNTER = "counter-no-fsync"


@pytest.fixture(scope="module")
def switches() -> dict[str, BugSwitch]:
    return dict(switches_of(load_system("reference")))


def test_the_switches_a_switch_needs_are_added_after_the_ones_asked_for_once(
    switches: dict[str, BugSwitch],
) -> None:
    assert planted_with(switches, (_EQUAL,)) == (_EQUAL, _COUNTER)
    assert planted_with(switches, (_COUNTER, _EQUAL)) == (_COUNTER, _EQUAL)
    assert planted_with(switches, ("lazy-mark",)) == ("lazy-mark",)
    assert planted_with(switches, ("no-such-switch",)) == ("no-such-switch",)


def test_a_run_planting_it_alone_is_refused_with_the_fix(switches: dict[str, BugSwitch]) -> None:
    spec = TestSpec(bugs=(_EQUAL,), nemeses=("power-loss",), targets=("holder", "lock"))
    empty = Schedule(seed=1, lease_ttl_ns=2_000_000_000, duration_ns=60_000_000_000, windows=())
    problem = unshown(spec, empty, {}, switches)
    assert problem is not None
    assert problem.startswith(f"--bug {_EQUAL} cannot show in this run")
    assert f"--bug {_EQUAL},{_COUNTER}" in problem


def test_a_matrix_row_plants_the_companion_and_takes_the_shared_exposure() -> None:
    (entry,) = entries_from({"runs": [{"bugs": [_EQUAL]}]})
    assert entry.spec.bugs == (_EQUAL, _COUNTER)
    assert entry.spec.nemeses == ("power-loss",)
    assert entry.spec.targets == ("holder", "lock")


def test_the_exposure_shown_names_the_companion(switches: dict[str, BugSwitch]) -> None:
    shown = switches[_EQUAL].describe()
    assert shown.startswith(switches[_EQUAL].exposed_by.describe())
    assert shown.endswith(f"--bug {_EQUAL},{_COUNTER}")
    assert switches[_COUNTER].describe() == switches[_COUNTER].exposed_by.describe()
