"""Pause, kill, freeze, throttle, the composite and recovery, against fake nodes."""

from __future__ import annotations

import threading

import pytest

from harness.node import Daemon, Node
from nemeses import FAULT_KINDS, fault_kind, standard_nemesis
from nemeses.composite import CompositeNemesis
from nemeses.freeze import FreezeNemesis
from nemeses.kill import KillNemesis
from nemeses.noop import NoopNemesis
from nemeses.pause import PauseNemesis
from nemeses.processes import ProcessImage, restart, running_daemons
from nemeses.protocol import Fault, NemesisError, fault_fs
from nemeses.recovery import heal_nodes
from nemeses.throttle import ThrottleNemesis, cfs_quota
from tests.support.nemesis_fakes import FakeNode, fake_cluster


def state(node: FakeNode, name: str) -> str | None:
    return node.process_state(node.daemon(name))


def test_pause_stops_the_named_daemon_and_stop_continues_it() -> None:
    nodes = fake_cluster()
    nodes["w2"].start_daemon("helper", ["sleep", "100"])
    nemesis = PauseNemesis()
    nemesis.setup(nodes)
    fault = Fault("pause", ("w2",), {"process": "agent"})
    facts = nemesis.invoke("start-pause", fault)
    assert facts == {"pids": {"w2": [nodes["w2"].daemon("agent").pid]}}
    assert state(nodes["w2"], "agent") == "T"
    assert state(nodes["w2"], "helper") == "S"
    nemesis.invoke("stop-pause", fault)
    assert state(nodes["w2"], "agent") == "S"


def test_pause_without_a_process_stops_every_daemon_and_heal_continues_them() -> None:
    nodes = fake_cluster()
    nodes["l1"].start_daemon("second", ["sleep", "100"])
    nemesis = PauseNemesis()
    nemesis.setup(nodes)
    nemesis.invoke("start-pause", Fault("pause", ("l1", "w1"), {}))
    assert {state(nodes["l1"], "lockd"), state(nodes["l1"], "second")} == {"T"}
    assert state(nodes["w1"], "agent") == "T"
    report = nemesis.heal()
    assert report.ok and len(report.healed) == 3
    assert state(nodes["l1"], "lockd") == state(nodes["w1"], "agent") == "S"
    assert nemesis.heal().healed == [], "nothing left to heal the second time"


def test_pause_of_an_unknown_daemon_or_node_names_the_problem() -> None:
    nemesis = PauseNemesis()
    nemesis.setup(fake_cluster())
    with pytest.raises(NemesisError, match="w1: no daemon named 'nope'"):
        nemesis.invoke("start-pause", Fault("pause", ("w1",), {"process": "nope"}))
    with pytest.raises(NemesisError, match="no node 'w7'"):
        nemesis.invoke("start-pause", Fault("pause", ("w7",), {}))


def test_a_paused_daemon_that_died_meanwhile_is_not_a_heal_error() -> None:
    nodes = fake_cluster()
    nemesis = PauseNemesis()
    nemesis.setup(nodes)
    nemesis.invoke("start-pause", Fault("pause", ("w3",), {}))
    del nodes["w3"].processes[nodes["w3"].daemon("agent").pid]
    report = nemesis.heal()
    assert report.ok and "exited" in report.healed[0]


def test_a_store_kill_only_signals_and_restarts_what_setup_captured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kill aimed at a moment (right after a takeover) must be a signal away."""
    nodes = fake_cluster()
    node = nodes["s1"]
    node.processes[node.daemon("stored").pid].env = {"MARK": "kept"}
    nemesis = KillNemesis()
    nemesis.setup(nodes)
    fault = Fault("kill", ("s1",), {"process": "stored"})

    def no_commands(*args: object, **kwargs: object) -> None:
        raise AssertionError("a store kill ran a command on the node after setup")

    monkeypatch.setattr(node, "run", no_commands)
    old = node.daemon("stored")
    nemesis.invoke("start-kill", fault)
    assert node.process_state(old) is None
    monkeypatch.undo()
    nemesis.invoke("stop-kill", fault)
    assert node.processes[node.daemon("stored").pid].env == {"MARK": "kept"}


def test_kill_captures_the_process_and_restart_runs_it_again_the_same_way() -> None:
    nodes = fake_cluster()
    node = nodes["s1"]
    node.processes[node.daemon("stored").pid].env = {"EPOCH_FILE": "/data/epoch"}
    nemesis = KillNemesis()
    nemesis.setup(nodes)
    fault = Fault("kill", ("s1",), {"process": "stored"})
    old = node.daemon("stored")
    nemesis.invoke("start-kill", fault)
    assert node.process_state(old) is None
    assert nemesis.killed()["s1"][0].env == {"EPOCH_FILE": "/data/epoch"}
    nemesis.invoke("stop-kill", fault)
    new = node.daemon("stored")
    assert new.pid != old.pid and new.argv == old.argv
    assert node.processes[new.pid].env == {"EPOCH_FILE": "/data/epoch"}
    assert node.processes[new.pid].cwd == "/"
    assert nemesis.killed() == {}
    with pytest.raises(NemesisError, match="killed nothing there"):
        nemesis.invoke("stop-kill", fault)


class _SlowToServe:
    """A system's restart whose daemon serves only on the third readiness check."""

    def __init__(self) -> None:
        self.checks = 0

    def __call__(self, node: Node, image: ProcessImage) -> Daemon:
        return restart(node, image)

    def serves(self, node: Node, daemon: str) -> bool | None:
        self.checks += 1
        return self.checks >= 3


def test_a_restarted_store_is_done_once_its_readiness_check_says_it_serves() -> None:
    """A paused holder resumed by the restart must meet the store serving, not starting."""
    nodes = fake_cluster()
    restarter = _SlowToServe()
    nemesis = KillNemesis(restarter=restarter)
    nemesis.setup(nodes)
    fault = Fault("kill", ("s1",), {"process": "stored"})
    nemesis.invoke("start-kill", fault)
    facts = nemesis.invoke("stop-kill", fault)
    assert facts["served_by"] == {"s1": "readiness check"}
    assert restarter.checks >= 3


class _Quorum:
    """A system's restart that returns only once every member's restart has begun, as a
    ZooKeeper member's waits for its quorum."""

    def __init__(self, members: int) -> None:
        self.all_begun = threading.Barrier(members, timeout=5)

    def __call__(self, node: Node, image: ProcessImage) -> Daemon:
        daemon = restart(node, image)
        self.all_begun.wait()
        return daemon


def test_a_group_killed_at_once_is_restarted_at_once() -> None:
    """The whole ensemble losing power: restarted one by one, the first member would wait for
    a quorum that never comes."""
    nodes = fake_cluster()
    nemesis = KillNemesis(restarter=_Quorum(2))
    nemesis.setup(nodes)
    fault = Fault("kill", ("l1", "s1"), {})
    nemesis.invoke("start-kill", fault)
    facts = nemesis.invoke("stop-kill", fault)
    assert set(facts["pids"]) == {"l1", "s1"}
    assert state(nodes["l1"], "lockd") == state(nodes["s1"], "stored") == "S"


def test_heal_restarts_what_was_killed() -> None:
    nodes = fake_cluster()
    nemesis = KillNemesis()
    nemesis.setup(nodes)
    nemesis.invoke("start-kill", Fault("kill", ("l1", "w1"), {}))
    report = nemesis.heal()
    assert report.ok
    assert state(nodes["l1"], "lockd") == state(nodes["w1"], "agent") == "S"


def test_freeze_and_throttle_switch_node_state_and_heal_switches_it_back() -> None:
    nodes = fake_cluster()
    freeze, throttle = FreezeNemesis(), ThrottleNemesis()
    for nemesis in (freeze, throttle):
        nemesis.setup(nodes)
    freeze.invoke("start-freeze", Fault("freeze", ("w1", "s1")))
    facts = throttle.invoke("start-throttle", Fault("throttle", ("l1",), {"cpu": 0.02}))
    assert facts == {"quota_us": 1_000, "period_us": 50_000}
    assert nodes["w1"].frozen and nodes["s1"].frozen and not nodes["w2"].frozen
    assert nodes["l1"].quota == (1_000, 50_000)
    freeze.invoke("stop-freeze", Fault("freeze", ("s1",)))
    assert not nodes["s1"].frozen and nodes["w1"].frozen
    assert freeze.heal().ok and throttle.heal().ok
    assert not nodes["w1"].frozen
    assert nodes["l1"].quota == (None, 100_000)


def test_a_half_applied_freeze_is_reported_and_healed() -> None:
    nodes = fake_cluster()
    nodes["w2"].fail_freeze = True
    freeze = FreezeNemesis()
    freeze.setup(nodes)
    with pytest.raises(NemesisError, match="w2: the freezer is broken"):
        freeze.invoke("start-freeze", Fault("freeze", ("w1", "w2")))
    assert nodes["w1"].frozen
    assert freeze.heal().ok
    assert not nodes["w1"].frozen


def test_a_node_without_a_freezer_is_refused_with_an_alternative() -> None:
    class Plain:
        name = "p1"

    freeze = FreezeNemesis()
    freeze.setup({"p1": Plain()})  # type: ignore[dict-item]
    with pytest.raises(NemesisError, match="cannot freeze a node; use pause instead"):
        freeze.invoke("start-freeze", Fault("freeze", ("p1",)))


@pytest.mark.parametrize(
    ("cpu", "quota", "period"),
    [(0.02, 1_000, 50_000), (0.5, 5_000, 10_000), (0.1, 1_000, 10_000), (0.001, 1_000, 1_000_000)],
)
def test_cfs_quota_uses_the_shortest_period_that_reaches_one_ms(
    cpu: float, quota: int, period: int
) -> None:
    assert cfs_quota(cpu) == (quota, period)


def test_cfs_quota_refuses_shares_the_kernel_cannot_enforce() -> None:
    with pytest.raises(NemesisError, match="below what the kernel"):
        cfs_quota(0.0001)
    with pytest.raises(NemesisError, match="above 0"):
        cfs_quota(0)


def test_composite_routes_by_kind_and_refuses_two_members_for_one_kind() -> None:
    nodes = fake_cluster()
    nemesis = standard_nemesis()
    played = [name for name in FAULT_KINDS if fault_kind(name).build is not None]
    assert fault_fs(*played) == nemesis.fs
    nemesis.setup(nodes)
    nemesis.invoke("start-freeze", Fault("freeze", ("w3",)))
    nemesis.invoke("start-pause", Fault("pause", ("w2",), {}))
    assert nodes["w3"].frozen and state(nodes["w2"], "agent") == "T"
    nemesis.teardown()
    assert not nodes["w3"].frozen and state(nodes["w2"], "agent") == "S"
    with pytest.raises(NemesisError, match="two nemeses handle"):
        CompositeNemesis(NoopNemesis(["pause"]), PauseNemesis())
    with pytest.raises(NemesisError, match="no nemesis here performs 'start-kill'"):
        CompositeNemesis(NoopNemesis(["pause"])).invoke("start-kill", Fault("kill", ("w1",)))
    with pytest.raises(NemesisError, match="unknown fault kind"):
        standard_nemesis(["boom"])


def test_running_daemons_finds_processes_by_daemon_name_or_command_pattern() -> None:
    node = fake_cluster()["w1"]
    assert [d.name for d in running_daemons(node, None)] == ["agent"]
    assert [d.pid for d in running_daemons(node, "agent")] == [node.daemon("agent").pid]
    assert [d.name for d in running_daemons(node, "/opt/agent")] == ["agent"]
    with pytest.raises(NemesisError, match="found no process named or matching 'lockd'"):
        running_daemons(node, "lockd")


def test_heal_nodes_undoes_what_it_can_find_and_what_it_is_told() -> None:
    nodes = fake_cluster()
    as_nodes: dict[str, Node] = dict(nodes)
    standard = standard_nemesis(locate=running_daemons)
    standard.setup(as_nodes)
    standard.invoke("start-pause", Fault("pause", ("w1",), {"process": "agent"}))
    standard.invoke("start-throttle", Fault("throttle", ("w2",), {"cpu": 0.05}))
    nodes["s1"].freeze()
    agent = nodes["w3"].daemon("agent")
    del nodes["w3"].processes[agent.pid]
    image = ProcessImage("agent", agent.argv, {"A": "1"}, "/srv")
    report = heal_nodes(as_nodes, frozen=["s1"], killed={"w3": [image]})
    assert report.ok, report.errors
    assert state(nodes["w1"], "agent") == "S"
    assert nodes["w2"].quota == (None, 100_000)
    assert not nodes["s1"].frozen
    assert nodes["w3"].processes[nodes["w3"].daemon("agent").pid].cwd == "/srv"


def test_a_nemesis_refuses_operations_of_another_kind() -> None:
    throttle = ThrottleNemesis()
    throttle.setup(fake_cluster())
    with pytest.raises(NemesisError, match="ThrottleNemesis does not perform 'start-freeze'"):
        throttle.invoke("start-freeze", Fault("freeze", ("w1",)))
