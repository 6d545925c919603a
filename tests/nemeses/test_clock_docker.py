"""Both clock kinds against a real container: a wire server started under libfaketime has its
clock stepped and sped up, as the controller sees it from outside the nemesis too; the node's own
clock never moves, and a daemon not under libfaketime is refused by name."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.node import DockerNode
from harness.nodeside import wire
from nemeses.clock import ClockRateNemesis, ClockStepNemesis
from nemeses.protocol import Fault, NemesisError
from tests.support.clocked import PORT, start_clocked_server

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def node(node_image: str) -> Iterator[DockerNode]:
    with Cluster(f"test-clock-{new_run_id()}", [NodeSpec("w1", "worker")], image=node_image) as c:
        w1 = c.node("w1")
        start_clocked_server(w1)
        yield w1


def _offset(node: DockerNode) -> float:
    """The server's clock minus the real one, read by the controller (not by the nemesis)."""
    before = time.time()
    seen = float(wire.call((node.ip, PORT), {"op": wire.CLOCK}, 5.0)["wall"])
    return seen - (before + time.time()) / 2


def test_a_step_moves_the_process_clock_and_back_and_not_the_nodes(node: DockerNode) -> None:
    nemesis = ClockStepNemesis()
    nemesis.setup({"w1": node})
    fault = Fault("clock-step", ("w1",), {"process": "clocky", "by_s": -30.0, "back": True})
    facts = nemesis.invoke("start-clock-step", fault)["clocks"]["w1:clocky"]
    assert facts["scheduled"]["jump_s"] == pytest.approx(-30.0)
    assert facts["confirmed"]["offset_s"] == pytest.approx(-30.0, abs=0.05)
    assert facts["confirmed"]["latency_ms"] < 50
    assert _offset(node) == pytest.approx(-30.0, abs=0.1)
    real = float(node.run("date +%s.%N", check=True).stdout)
    assert real == pytest.approx(time.time(), abs=2.0)  # the node's clock stayed
    stop = nemesis.invoke("stop-clock-step", fault)["clocks"]["w1:clocky"]
    assert stop["confirmed"]["offset_s"] == pytest.approx(0.0, abs=0.05)
    assert _offset(node) == pytest.approx(0.0, abs=0.1)


def test_a_rate_window_starts_and_ends_without_a_jump_and_keeps_what_it_gained(
    node: DockerNode,
) -> None:
    nemesis = ClockRateNemesis()
    nemesis.setup({"w1": node})
    fault = Fault("clock-rate", ("w1",), {"process": "clocky", "rate": 4.0})
    at_start = _offset(node)
    facts = nemesis.invoke("start-clock-rate", fault)["clocks"]["w1:clocky"]
    assert facts["scheduled"]["jump_s"] == pytest.approx(0.0)
    assert facts["confirmed"]["rate"] == pytest.approx(4.0, rel=0.1)
    assert abs(facts["confirmed"]["offset_s"] - at_start) < 0.3  # 50 ms at 4x, no jump
    time.sleep(1.0)
    gained = _offset(node) - at_start
    assert 2.5 < gained < 4.5  # ~1.05 s at 4x gains ~3.2 s
    stop = nemesis.invoke("stop-clock-rate", fault)["clocks"]["w1:clocky"]
    assert stop["scheduled"]["jump_s"] == pytest.approx(0.0)
    assert stop["scheduled"]["rate"] == 1.0
    kept = _offset(node)
    time.sleep(0.3)
    assert _offset(node) == pytest.approx(kept, abs=0.05)  # at rate 1 again
    assert nemesis.heal().ok


def test_a_daemon_not_under_libfaketime_is_refused_by_name(node: DockerNode) -> None:
    node.start_daemon("sleeper", ["sleep", "600"])
    nemesis = ClockStepNemesis()
    nemesis.setup({"w1": node})
    with pytest.raises(NemesisError, match=r"sleeper .*cannot take clock faults"):
        nemesis.invoke("start-clock-step", Fault("clock-step", ("w1",), {"process": "sleeper"}))
