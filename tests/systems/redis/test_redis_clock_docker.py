"""The redis system's clock on real containers: Redis under fencecheck's clock shim (libfaketime
cannot start it), its wall clock stepped and sped up by the clock nemeses and confirmed by its own
``TIME``. A step forward on the primary frees the lock under its holder: two holders overlap, the
fenced sinks refuse the stale one, the unfenced log takes both."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from harness.nodeside import clock
from nemeses.clock import WALL, ClockRateNemesis, ClockStepNemesis
from nemeses.protocol import Fault
from systems import SystemConfig
from systems.redis import RedisSystem
from tests.support.realsystems import Running, ask, running

pytestmark = pytest.mark.docker

_TTL_S = 20.0


@pytest.fixture(scope="module")
def run() -> Iterator[Running]:
    with running(RedisSystem(), SystemConfig(lease_ttl=_TTL_S, clocked=True)) as started:
        yield started


def _offset(run: Running) -> float:
    """Redis's wall clock minus the real one, read by the test through ``TIME`` on r1."""
    r1 = run.cluster.nodes["r1"]
    seen = ask_time(run)
    return seen - float(r1.run("date +%s.%N", check=True).stdout)


def ask_time(run: Running) -> float:
    """Redis ``TIME`` on r1, as seconds since the epoch."""
    r1 = run.cluster.nodes["r1"]
    auth = {"REDISCLI_AUTH": run.agents.token or ""}
    answer = r1.run(["redis-cli", "-h", r1.ip, "TIME"], check=True, env=auth).stdout
    seconds, micros = answer.split()
    return int(seconds) + int(micros) / 1e6


def test_redis_runs_under_the_shim_and_the_sentinel_does_not(run: Running) -> None:
    r1, r2 = run.cluster.nodes["r1"], run.cluster.nodes["r2"]
    server = clock.preload_of(r1.daemon("redis-server").argv)
    assert server is not None and server.wall_only and server.ask.startswith("redis:")
    assert f"LD_PRELOAD={clock.SHIM}" in r1.daemon("redis-server").argv
    assert clock.preload_of(r2.daemon("redis-sentinel").argv) is None


@pytest.mark.parametrize("fenced", ["store", "owned"])
def test_a_step_forward_on_the_primary_lets_two_holders_overlap_and_the_fence_holds(
    run: Running, fenced: str
) -> None:
    old = ask(run, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    nemesis = ClockStepNemesis()
    nemesis.setup(run.cluster.nodes)
    fault = Fault("clock-step", ("r1",), {"process": "redis-server", "by_s": 1.1 * _TTL_S})
    facts = nemesis.invoke("start-clock-step", fault)["clocks"]["r1:redis-server"]
    try:
        assert facts["clocks"] == WALL
        assert facts["confirmed"]["offset_s"] == pytest.approx(1.1 * _TTL_S, abs=0.1)
        assert _offset(run) == pytest.approx(1.1 * _TTL_S, abs=0.5)
        # w1's lease has 18 s left by every clock but the primary's: the lock is free there.
        new = ask(run, "w2", {"op": "acquire", "lock": "L", "wait": 5})["epoch"]
        assert new > old
        assert ask(run, "w1", {"op": "holds"})["holds"] == {"L": old}  # both hold L
        base = {"op": "write", "lock": "L", "key": fenced}
        for sink in (fenced, "log"):
            newer = {**base, "sink": sink, "epoch": new, "id": f"w2-{sink}"}
            assert ask(run, "w2", newer)["ok"] is True
        # The unfenced log takes the stale holder's write after the newer one...
        assert ask(run, "w1", {**base, "sink": "log", "epoch": old, "id": "w1-log"})["ok"]
        read = ask(run, "w2", {"op": "read", "sink": "log", "key": fenced})
        assert [e["id"] for e in read["entries"]] == ["w2-log", "w1-log"]
        # ...the fenced sink refuses it.
        stale = {**base, "sink": fenced, "epoch": old, "id": f"w1-{fenced}"}
        assert ask(run, "w1", stale) == {"ok": False, "error": "stale-epoch"}
        read = ask(run, "w2", {"op": "read", "sink": fenced, "key": fenced})
        assert [e["id"] for e in read["entries"]] == [f"w2-{fenced}"]
    finally:
        stop = nemesis.invoke("stop-clock-step", fault)["clocks"]["r1:redis-server"]
        ask(run, "w2", {"op": "release", "lock": "L"})
    assert stop["confirmed"]["offset_s"] == pytest.approx(0.0, abs=0.1)


def test_a_fast_rate_on_the_primary_runs_its_clock_and_its_expiry_at_that_rate(
    run: Running,
) -> None:
    nemesis = ClockRateNemesis()
    nemesis.setup(run.cluster.nodes)
    fault = Fault("clock-rate", ("r1",), {"process": "redis-server", "rate": 4.0})
    before = _offset(run)
    facts = nemesis.invoke("start-clock-rate", fault)["clocks"]["r1:redis-server"]
    try:
        assert facts["confirmed"]["rate"] == pytest.approx(4.0, rel=0.25)
        auth = {"REDISCLI_AUTH": run.agents.token or ""}
        r1 = run.cluster.nodes["r1"]
        r1.run(["redis-cli", "-h", r1.ip, "SET", "t", "v", "PX", "4000"], check=True, env=auth)
        time.sleep(1.5)  # 6 s by the primary's clock: the 4 s key is gone
        left = r1.run(["redis-cli", "-h", r1.ip, "PTTL", "t"], check=True, env=auth).stdout
        assert int(left) == -2
        assert 3.5 < _offset(run) - before < 7.5
    finally:
        stop = nemesis.invoke("stop-clock-rate", fault)["clocks"]["r1:redis-server"]
        assert nemesis.heal().ok
    assert stop["scheduled"]["jump_s"] == pytest.approx(0.0)
