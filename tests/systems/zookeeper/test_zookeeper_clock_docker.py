"""The zookeeper system's clocks on a real ensemble: the members under libfaketime, each with a
clock probe beside it under the same preload and control file, through which the clock nemeses
confirm a change; and what a rate does to a session: at 4x on the members a live holder's session
expires under it (the members count its timeout four times as fast as it pings), and the next
holder is granted once the clocks run true again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.nodeside import clock, wire
from nemeses.clock import BOTH, ClockRateNemesis, ClockStepNemesis
from nemeses.protocol import Fault
from systems import SystemConfig
from systems.zookeeper import ZooKeeperSystem
from tests.support.realsystems import Running, ask, running

pytestmark = pytest.mark.docker

_SESSION_S = 4.0
_MEMBERS = ("z1", "z2", "z3")


@pytest.fixture(scope="module")
def run() -> Iterator[Running]:
    config = SystemConfig(_SESSION_S, clocked=True)
    with running(ZooKeeperSystem(), config) as started:
        yield started


def _probe_offset(run: Running, member: str) -> float:
    """The probe's clock minus the real one, read by the test (not by the nemesis)."""
    node = run.cluster.nodes[member]
    before = time.time()
    seen = float(
        wire.call((node.ip, ZooKeeperSystem().clock_probe_port), {"op": "clock"}, 5.0)["wall"]
    )
    return seen - (before + time.time()) / 2


def test_each_member_and_its_probe_share_one_control_file(run: Running) -> None:
    for member in _MEMBERS:
        node = run.cluster.nodes[member]
        server = clock.preload_of(node.daemon("zookeeper").argv)
        probe = clock.preload_of(node.daemon("zookeeper-clock").argv)
        assert server is not None and probe is not None
        assert server.control == probe.control == clock.control_file("zookeeper")
        assert server.ask == probe.ask and not server.wall_only


def test_a_step_is_confirmed_through_the_probe_once_per_member(run: Running) -> None:
    nemesis = ClockStepNemesis()
    nemesis.setup(run.cluster.nodes)
    # No process named: every daemon of the node, the member and its probe; one file, one step.
    fault = Fault("clock-step", ("z1",), {"by_s": 0.5 * _SESSION_S})
    clocks = nemesis.invoke("start-clock-step", fault)["clocks"]
    try:
        ((where, facts),) = clocks.items()
        assert where in ("z1:zookeeper", "z1:zookeeper-clock")
        assert facts["clocks"] == BOTH
        assert facts["confirmed"]["offset_s"] == pytest.approx(2.0, abs=0.1)
        assert _probe_offset(run, "z1") == pytest.approx(2.0, abs=0.2)
    finally:
        nemesis.invoke("stop-clock-step", fault)
    assert _probe_offset(run, "z1") == pytest.approx(0.0, abs=0.2)


def _holds(run: Running, worker: str, lock: str) -> bool:
    return lock in ask(run, worker, {"op": "holds"})["holds"]


def test_at_4x_on_the_members_a_live_holders_session_expires_under_it(run: Running) -> None:
    first = ask(run, "w1", {"op": "acquire", "lock": "L", "wait": 30})["epoch"]
    nemesis = ClockRateNemesis()
    nemesis.setup(run.cluster.nodes)
    fault = Fault("clock-rate", _MEMBERS, {"process": "zookeeper", "rate": 4.0})
    clocks = nemesis.invoke("start-clock-rate", fault)["clocks"]
    started = time.monotonic()
    try:
        for member in _MEMBERS:
            assert clocks[f"{member}:zookeeper"]["confirmed"]["rate"] == pytest.approx(4, rel=0.25)
        # w1's agent pings all along; only the members' fast clock can end its session. Every
        # session on the members expires at this rate, so the next grant is asked for after it.
        # The members' own timers run fast too, so elections may come first and put the expiry
        # off (measured: 2.5 s to 22 s): the bound is generous, as without the rate it never ends.
        deadline = started + 15 * _SESSION_S
        while _holds(run, "w1", "L") and time.monotonic() < deadline:
            time.sleep(0.2)
        lost_after = time.monotonic() - started
        assert not _holds(run, "w1", "L")
    finally:
        nemesis.invoke("stop-clock-rate", fault)
        assert nemesis.heal().ok
    # At the real rate again, w2's grant shows the server ended w1's session: w1 never released.
    # w2's own session ended under the rate too, and its client may still be opening a new one:
    # an acquire answered "unavailable" (never sent) is asked again, as a worker would.
    deadline = time.monotonic() + 6 * _SESSION_S
    answers: list[dict[str, Any]] = []
    while not answers or (not answers[-1]["ok"] and time.monotonic() < deadline):
        wait = max(deadline - time.monotonic(), 0.5)
        answers.append(ask(run, "w2", {"op": "acquire", "lock": "L", "wait": wait}))
        if not answers[-1]["ok"]:
            time.sleep(0.2)
    assert answers[-1]["ok"] is True and answers[-1]["epoch"] > first, answers
    print(f"session of {_SESSION_S:g} s at 4x: w1's lease ended after {lost_after:.2f} s")
