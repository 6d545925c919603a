"""Adapter discovery, configuration checks, the inventory and the bug switch table."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from checkers import ANOMALY_NAMES
from harness.record import InventoryError
from harness.run.runner import collect_logs
from harness.run.store import new_run_dir
from systems import (
    HOLDER_FLAWS,
    AdapterError,
    CollectsData,
    ConfigError,
    PlantsBugs,
    Restarts,
    RoleSpec,
    Sink,
    System,
    SystemConfig,
    UnknownSystemError,
    available_systems,
    load_system,
    topology,
)
from systems.base import clock_problem
from systems.etcd.adapter import EtcdSystem
from systems.reference import BUG_SWITCHES, Ports, ReferenceSystem
from tests.support.fake import FakeSystem
from tests.support.localcluster import (
    LocalNode,
    MakeCluster,
    free_ports,
    local_nodes,
    local_system,
    wait_dead,
)

# docs/design.md §1, one switch per mistake.
_MISTAKES = {
    "no-store-check",
    "epoch-in-memory",
    "store-forgets",
    "lazy-mark",
    "retry-on-reject",
    "reacquire-no-reread",
    "unfenced-path",
    "long-ttl-no-fence",
    "short-lock-delay",
    "token-before-lease",
    "timestamp-token",
    "grant-to-expired-waiter",
    "mark-per-key",
    "wall-clock-expiry",
    "trust-own-timer",
    "fence-per-connection",
    "non-idempotent-write",
    "mark-no-fsync",
    "ack-before-fsync",
    "counter-no-fsync",
    "equal-epoch-any-holder",
}


def test_the_entry_point_group_finds_the_reference_system() -> None:
    assert "reference" in available_systems()
    system = load_system("reference")
    assert isinstance(system, ReferenceSystem)
    assert isinstance(system, System)
    for ability in (CollectsData, PlantsBugs, Restarts):
        assert isinstance(system, ability)


def test_an_unknown_system_names_the_available_ones() -> None:
    missing = "no-such-system-" + "x" * 8
    with pytest.raises(UnknownSystemError, match=rf"unknown system '{missing}'.*reference"):
        load_system(missing)


def test_the_fake_system_needs_only_the_required_contract() -> None:
    fake = FakeSystem()
    assert isinstance(fake, System)
    for ability in (CollectsData, PlantsBugs, Restarts):
        assert not isinstance(fake, ability)
    node = LocalNode("w1", "worker", "127.0.0.1", Path("/nonexistent"))
    deployment = fake.setup({"w1": node}, SystemConfig())
    fake.teardown({"w1": node})
    assert fake.calls == [("setup", "w1"), ("teardown", "w1")]
    assert deployment.client.module.__name__ == "systems.reference.client"


def test_the_topology_follows_the_roles_a_system_names() -> None:
    etcd_like = {"lock": RoleSpec(3, "e"), "worker": RoleSpec(2, "w")}
    assert topology(etcd_like, workers=1) == [
        ("e1", "lock"),
        ("e2", "lock"),
        ("e3", "lock"),
        ("w1", "worker"),
        ("w2", "worker"),
    ]
    assert [name for name, _ in topology(ReferenceSystem().roles(), 3)] == [
        "l1",
        "s1",
        "w1",
        "w2",
        "w3",
    ]
    with pytest.raises(ConfigError, match="share a node name prefix"):
        topology({"lock": RoleSpec(1, "w"), "worker": RoleSpec(1, "w")}, 1)
    with pytest.raises(ConfigError, match="at least one worker"):
        topology({"lock": RoleSpec(1, "l")}, 1)


def test_every_mistake_has_a_documented_switch_or_holder_flaw() -> None:
    assert set(BUG_SWITCHES) | set(HOLDER_FLAWS) == _MISTAKES
    assert not set(BUG_SWITCHES) & set(HOLDER_FLAWS)
    for name, switch in {**BUG_SWITCHES, **HOLDER_FLAWS}.items():
        assert switch.name == name
        assert switch.description and switch.exposed_by.faults
        assert set(switch.anomalies) <= set(ANOMALY_NAMES), f"{name}: not anomalies of §5"
        assert f"--nemesis {switch.exposed_by.faults[0]}" in switch.exposed_by.describe()
        assert set(switch.beside) <= set(BUG_SWITCHES) - {name}, f"{name}: beside what?"


def test_config_values_are_checked() -> None:
    with pytest.raises(ConfigError, match="lease_ttl"):
        SystemConfig(lease_ttl=0)
    with pytest.raises(ConfigError, match="lock_delay"):
        SystemConfig(lock_delay=-1)
    with pytest.raises(ConfigError, match="set of switch names"):
        SystemConfig(bugs="no-store-check")  # type: ignore[arg-type]
    with pytest.raises(InventoryError, match="mitigation"):
        Sink("s", fenced=False, mitigation="prayer", description="")  # type: ignore[arg-type]


def test_the_reference_system_rejects_unknown_and_pointless_switches() -> None:
    system = ReferenceSystem()
    with pytest.raises(ConfigError, match=r"no bug switch 'typo'.*no-store-check"):
        system.validate(SystemConfig(bugs=frozenset({"typo"})))
    with pytest.raises(ConfigError, match="--lock-delay"):
        system.validate(SystemConfig(bugs=frozenset({"short-lock-delay"})))
    system.validate(SystemConfig(lock_delay=6.0, bugs=frozenset(BUG_SWITCHES)))


def test_the_inventory_declares_each_sink() -> None:
    system = ReferenceSystem()
    plain = {sink.name: sink for sink in system.inventory(SystemConfig())}
    assert plain["store"].fenced and plain["store-batch"].fenced
    assert not plain["audit"].fenced
    assert plain["audit"].mitigation == "none"
    delayed = {sink.name: sink for sink in system.inventory(SystemConfig(lock_delay=3.0))}
    assert delayed["audit"].mitigation == "lock-delay"
    # The unfenced-path mistake is that the inventory still *claims* the batch path is fenced.
    claimed = system.inventory(SystemConfig(bugs=frozenset({"unfenced-path"})))
    assert {sink.name: sink for sink in claimed}["store-batch"].fenced


def test_long_ttl_multiplies_the_lease_ttl() -> None:
    system = ReferenceSystem()
    assert system.lease_ttl(SystemConfig(lease_ttl=2.0)) == 2.0
    longer = SystemConfig(lease_ttl=2.0, bugs=frozenset({"long-ttl-no-fence"}))
    assert system.lease_ttl(longer) == 10.0


def test_setup_needs_one_lock_one_store_and_a_worker(tmp_path: Path) -> None:
    nodes = {"l1": LocalNode("l1", "lock", "127.0.0.1", tmp_path)}
    with pytest.raises(ConfigError, match=r"exactly 1 store node\(s\), got 0.*at least 1 worker"):
        ReferenceSystem().setup(nodes, SystemConfig())


def test_setup_reports_what_it_started_and_teardown_stops_it(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(workers=2)
    deployment = cluster.deployment
    assert sorted(cluster.agents.endpoints) == ["w1", "w2"]
    assert [(t.role, t.node, t.daemon) for t in deployment.targets] == [
        ("lock", "l1", "lock-server"),
        ("store", "s1", "store"),
    ]
    assert deployment.client.module == "systems.reference.client"  # named, never imported
    daemons = [
        (cluster.nodes[t.node], cluster.nodes[t.node].daemon(t.daemon)) for t in deployment.targets
    ]
    assert all(node.process_state(daemon) is not None for node, daemon in daemons)
    cluster.system.teardown(cluster.nodes)
    for node, daemon in daemons:
        wait_dead(node, daemon)


def test_collect_keeps_the_epoch_file_and_the_store_log(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    assert cluster.agent("w1", {"op": "acquire", "lock": "L"})["epoch"] == 1
    request = {"op": "write", "lock": "L", "epoch": 1, "sink": "store", "key": "k", "id": "a"}
    assert cluster.agent("w1", request) == {"ok": True, "seq": 1}
    kept = cluster.system.collect(cluster.nodes)
    assert set(kept) == {"l1", "s1"}
    assert b'"epoch": 1' in kept["l1"]["epochs.json"]
    assert b'"id": "a"' in kept["s1"]["store.log"]


def test_the_store_daemons_log_and_its_data_file_of_the_same_name_are_both_kept(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster = make_cluster()
    assert cluster.agent("w1", {"op": "acquire", "lock": "L"})["epoch"] == 1
    request = {"op": "write", "lock": "L", "epoch": 1, "sink": "store", "key": "k", "id": "a"}
    assert cluster.agent("w1", request)["ok"] is True
    run = new_run_dir("t", tmp_path / "store")
    collect_logs(cluster.system, cluster.nodes, run)
    s1 = run.logs / "s1"
    assert b"listening on" in (s1 / "store.log").read_bytes()  # the daemon's own log
    assert b'"id": "a"' in (s1 / "data-store.log").read_bytes()  # the data file beside it
    assert b'"epoch": 1' in (run.logs / "l1" / "data-epochs.json").read_bytes()


def test_restarting_a_live_process_is_refused(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    with pytest.raises(AdapterError, match="still running"):
        cluster.system.restart(cluster.nodes["l1"], "lock-server")
    cluster.signal("l1", signal.SIGSTOP)  # stopped is not dead either
    with pytest.raises(AdapterError, match="still running"):
        cluster.system.restart(cluster.nodes["l1"], "lock-server")


def test_a_program_that_cannot_start_fails_setup_with_its_log(tmp_path: Path) -> None:
    nodes = local_nodes(tmp_path, 0, workers=1)
    lock_port, store_port = free_ports(2)
    system = local_system(tmp_path, 0, Ports(lock_port, store_port), 10.0)
    try:
        with socket.socket() as squatter:
            squatter.bind((nodes["l1"].ip, lock_port))
            squatter.listen()
            with pytest.raises(
                AdapterError, match=r"lock-server on l1 exited(.|\n)*Address already in use"
            ):
                system.setup(nodes, SystemConfig())
        for node in nodes.values():  # setup tore down what it had started
            for daemon in node.daemons():
                wait_dead(node, daemon)
    finally:
        for node in nodes.values():
            node.close()


def test_clock_faults_aimed_at_a_daemon_that_cannot_take_them_are_refused_with_why() -> None:
    refused = clock_problem(EtcdSystem(), ["clock-step"], ["holder", "lock-leader"])
    assert refused is not None
    assert "lock-leader: etcd is a Go program" in refused and "--target holder" in refused
    assert clock_problem(EtcdSystem(), ["clock-rate"], ["holder", "w2"]) is None
    assert clock_problem(EtcdSystem(), [], ["lock"]) is None
    assert clock_problem(ReferenceSystem(), ["clock-rate"], ["lock", "s1", "holder"]) is None
