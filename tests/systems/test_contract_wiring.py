"""How the harness uses the adapter contract: the restart model through the kill nemesis, the
``lock-leader`` target, holder flaws beside bug switches, and bad specs refused up front."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli, main
from harness.record.spec import TestSpec
from harness.run.contract import _Battery
from harness.run.exposure import ExposureError, expose, switches_of
from harness.run.runner import kill_restarter
from nemeses import (
    HOLDER_MEMBER,
    LOCK_FOLLOWER,
    LOCK_LEADER,
    Fault,
    KillNemesis,
    NemesisError,
    generate_schedule,
    resolve,
)
from systems import load_system
from systems.reference import ReferenceSystem
from tests.support.localcluster import MakeCluster


def test_a_kill_restarts_through_the_system_on_the_same_data(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    before = cluster.agent("w1", {"op": "acquire", "lock": "L"})["epoch"]
    cluster.agent("w1", {"op": "release", "lock": "L"})
    kill = KillNemesis(restarter=kill_restarter(cluster.system, cluster.deployment, cluster.agents))
    kill.setup(cluster.nodes)
    for node, daemon in (("l1", "lock-server"), ("w1", "agent")):
        fault = Fault("kill", (node,), {"process": daemon})
        old = cluster.nodes[node].daemon(daemon)
        kill.invoke("start-kill", fault)
        kill.invoke("stop-kill", fault)
        new = cluster.nodes[node].daemon(daemon)
        assert new.pid != old.pid
        assert new.argv == old.argv  # the restart model: the same command line, the same data
    # The restarted lock server kept its epochs; the restarted agent answers, holding nothing.
    assert cluster.agent("w1", {"op": "holds"})["holds"] == {}
    again = cluster.agent("w1", {"op": "acquire", "lock": "L", "wait": 5.0})
    assert again["ok"], again
    assert again["epoch"] > before


def test_lock_leader_windows_fall_back_to_a_drawn_lock_node() -> None:
    nodes = {"e1": "lock", "e2": "lock", "e3": "lock", "w1": "worker"}
    schedule = generate_schedule(
        7,
        nodes,
        lease_ttl_ns=10**9,
        duration_ns=30 * 10**9,
        kinds=("pause",),
        targets=(LOCK_LEADER,),
    )
    assert schedule.windows
    for window in schedule.windows:
        assert window.targets == (LOCK_LEADER,)
        assert window.fallback in ("e1", "e2", "e3")
        assert resolve(window, list(nodes), None, "e2").targets == ("e2",)
        assert resolve(window, list(nodes), None, None).targets == (window.fallback,)


@pytest.mark.parametrize("symbol", [LOCK_FOLLOWER, HOLDER_MEMBER])
def test_follower_and_holder_member_windows_fall_back_to_a_drawn_lock_node(symbol: str) -> None:
    nodes = {"e1": "lock", "e2": "lock", "e3": "lock", "w1": "worker"}
    schedule = generate_schedule(
        7, nodes, lease_ttl_ns=10**9, duration_ns=30 * 10**9, kinds=("pause",), targets=(symbol,)
    )
    assert schedule.windows
    for window in schedule.windows:
        assert window.targets == (symbol,) and window.symbolic
        assert window.fallback in ("e1", "e2", "e3")
        assert resolve(window, list(nodes), None, follower="e3", member="e3").targets == ("e3",)
        assert resolve(window, list(nodes), None).targets == (window.fallback,)


def test_a_follower_needs_two_lock_nodes() -> None:
    with pytest.raises(NemesisError, match="lock-follower target needs at least two lock nodes"):
        generate_schedule(
            1,
            {"l1": "lock", "w1": "worker"},
            lease_ttl_ns=10**9,
            duration_ns=30 * 10**9,
            targets=(LOCK_FOLLOWER,),
        )


@pytest.mark.parametrize(
    ("symbol", "problem"),
    [
        (LOCK_FOLLOWER, "cannot say which lock-service member leads"),
        (HOLDER_MEMBER, "cannot say which lock-service member a holder's client"),
    ],
)
def test_member_targets_are_refused_for_a_system_that_cannot_name_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], symbol: str, problem: str
) -> None:
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as done:
        main(["run", "--store", str(store), "--no-progress", "--target", symbol])
    assert done.value.code == EXIT_ERROR
    assert problem in capsys.readouterr().err
    assert not store.exists()


def test_a_partition_aimed_at_a_follower_cuts_it_from_the_other_members_only() -> None:
    nodes = {"z1": "lock", "z2": "lock", "z3": "lock", "s1": "store", "w1": "worker"}
    schedule = generate_schedule(
        7,
        nodes,
        lease_ttl_ns=10**9,
        duration_ns=30 * 10**9,
        kinds=("partition",),
        targets=(LOCK_FOLLOWER,),
    )
    assert schedule.windows
    for window in schedule.windows:
        assert window.fallback in ("z1", "z2", "z3")
        fault = resolve(window, list(nodes), None, "z3", follower="z1")
        assert fault.targets == ("z1",)
        # Its clients (w1) and the store still reach it; the quorum does not.
        assert sorted(map(tuple, fault.params["drops"])) == [
            ("z1", "z2"),
            ("z1", "z3"),
            ("z2", "z1"),
            ("z3", "z1"),
        ]


def test_lock_leader_is_refused_for_a_system_that_cannot_name_its_leader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as done:
        main(["run", "--store", str(store), "--no-progress", "--target", LOCK_LEADER])
    assert done.value.code == EXIT_ERROR
    assert "cannot say which lock-service member leads" in capsys.readouterr().err
    assert not store.exists()
    with pytest.raises(SystemExit) as done:
        main(["run", "--store", str(store), "--no-progress", "--target", LOCK_FOLLOWER])
    assert done.value.code == EXIT_ERROR
    assert "cannot target lock-follower" in capsys.readouterr().err


def test_list_shows_holder_flaws_apart_from_the_systems_switches() -> None:
    shown = CliRunner().invoke(cli, ["list"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    systems, _, flaws = shown.output.partition("holder flaws")
    assert "no-store-check" in systems and "retry-on-reject" not in systems
    assert "retry-on-reject" in flaws and "reacquire-no-reread" in flaws
    assert "--nemesis kill --target lock" in systems  # exposed_by, shown as a command line


def test_expose_takes_the_faults_from_the_switchs_data() -> None:
    exposed = expose(TestSpec(bugs=("short-lock-delay",), nemeses=("kill",)))
    assert exposed.nemeses == ("pause",)
    assert exposed.workload == "sinks"
    assert exposed.fault_lengths == (3.0,)
    assert exposed.lock_delay == 3.0
    flaw = expose(TestSpec(bugs=("reacquire-no-reread",)))
    assert (flaw.workload, flaw.nemeses) == ("rmw", ("pause",))
    with pytest.raises(ExposureError, match="--bug"):
        expose(TestSpec())


def test_expose_takes_the_units_per_lease_a_switch_needs_and_shows_them() -> None:
    spec = TestSpec(system="zookeeper", bugs=("follower-read-check",), ttl=1.0)
    exposed = expose(spec)
    assert exposed.writes_per_lease == 200
    assert (exposed.nemeses, exposed.targets) == (("partition",), ("lock-follower",))
    assert "--writes-per-lease 200" in describe_exposure("zookeeper", "follower-read-check")
    longer = expose(replace(spec, writes_per_lease=500))
    assert longer.writes_per_lease == 500, "a longer tenure asked for is kept"


def describe_exposure(system: str, switch: str) -> str:
    return switches_of(load_system(system))[switch].exposed_by.describe()


def test_adapter_check_of_an_unknown_system_is_an_error_naming_the_installed_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["adapter", "check", "no-such-system"])
    assert done.value.code == EXIT_ERROR
    # The message may wrap (the console is 80 columns wide when it is not a terminal).
    assert re.search(r"available systems: .*\breference\b", capsys.readouterr().err, re.S)


def test_adapter_check_proves_grant_seq_only_where_the_client_reports_it() -> None:
    def judged(seqs: dict[str, list[object]]) -> list[tuple[bool, str]]:
        deployment = SimpleNamespace(targets=())  # the battery reads only its targets here
        battery = _Battery(ReferenceSystem(), {}, None, deployment, None)  # type: ignore[arg-type]
        battery.grant_seqs = seqs
        battery.grant_seq_rises()
        return [(item.ok, item.detail) for item in battery.items]

    assert judged({"check": [None, None]}) == []  # not claimed: nothing to prove
    assert judged({"check": [1, 2], "check-read": [1]}) == [
        (True, "grant_seqs {'check': [1, 2], 'check-read': [1]}")
    ]
    ((ok, detail),) = judged({"check": [1, 2, 2]})
    assert (ok, detail) == (False, "check: grant_seq does not rise strictly: [1, 2, 2]")
    ((ok, detail),) = judged({"check": [1, None]})
    assert not ok
    assert "grants without an integer grant_seq >= 0" in detail
