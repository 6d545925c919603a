"""The zookeeper adapter's description of itself: topology, configuration files, TTL range."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.record.spec import TestSpec
from harness.run.exposure import exposure_fields
from harness.run.plan import plan_run
from systems import ConfigError, SystemConfig, load_system
from systems.base import clock_problem, topology
from systems.zookeeper import BUG_SWITCHES, ZooKeeperSystem


def test_it_is_found_by_name_and_runs_three_members() -> None:
    system = load_system("zookeeper")
    assert isinstance(system, ZooKeeperSystem)
    assert [name for name, _ in topology(system.roles(), 1)] == ["z1", "z2", "z3", "s1", "w1"]
    assert "python3-kazoo" in system.packages()
    assert "zookeeper" not in system.packages()  # it pulls the desktop JRE


def test_each_member_gets_the_ensemble_and_its_own_id() -> None:
    addresses = [f"10.0.0.{n}" for n in (1, 2, 3)]
    files = ZooKeeperSystem(data_dir="/d").config_files(addresses, 2)
    assert files["/d/data/myid"] == b"2\n"
    config = files["/d/zoo.cfg"].decode()
    assert "server.1=10.0.0.1:2888:3888\nserver.2=10.0.0.2:2888:3888\n" in config
    assert "tickTime=500\n" in config and "4lw.commands.whitelist=ruok,srvr,stat,mntr" in config
    assert b"ConsoleAppender" in files["/d/log4j.properties"]


def test_the_server_runs_with_a_small_heap_and_log4j_on_the_classpath() -> None:
    argv = ZooKeeperSystem(heap="64m").server_argv()
    assert "-Xmx64m" in argv
    classpath = argv[argv.index("-cp") + 1].split(":")
    assert "/usr/share/java/log4j-1.2.jar" in classpath
    assert argv[-2] == "org.apache.zookeeper.server.quorum.QuorumPeerMain"


@pytest.mark.parametrize("ttl", [0.5, 10.5])
def test_a_ttl_the_ensemble_cannot_grant_as_a_session_is_refused(ttl: float) -> None:
    with pytest.raises(ConfigError, match="session timeout"):
        ZooKeeperSystem().validate(SystemConfig(lease_ttl=ttl))


def test_the_inventory_and_switches() -> None:
    inventory = ZooKeeperSystem().inventory(SystemConfig(2.0))
    assert {sink.name: sink.fenced for sink in inventory} == {
        "store": True,
        "log": False,
        "ref-store": True,
    }
    assert all(sink.seq for sink in inventory if sink.fenced)
    assert set(BUG_SWITCHES) == {
        "trust-is-acquired",
        "sequence-token",
        "follower-read-check",
        "force-sync-no",
    }


def test_the_data_dir_under_the_lazy_file_system_is_apart_from_the_config() -> None:
    system = ZooKeeperSystem(data_dir="/d")
    config = system.config_files(["10.0.0.1"], 1)["/d/zoo.cfg"].decode()
    assert f"dataDir={system.disk_dirs()['lock']}\n" in config
    assert system.disk_dirs() == {"lock": "/d/data", "store": "/d/store"}
    assert "snapshot.trust.empty=true\n" in config  # its first snapshot is never fsynced


def test_force_sync_no_turns_the_log_fsync_off_and_only_then() -> None:
    system = ZooKeeperSystem(data_dir="/d")
    assert "forceSync" not in system.config_files(["10.0.0.1"], 1)["/d/zoo.cfg"].decode()
    weak = system.config_files(["10.0.0.1"], 1, force_sync=False)["/d/zoo.cfg"].decode()
    assert "forceSync=no\n" in weak


def test_force_sync_no_is_exposed_by_the_whole_ensemble_losing_power_at_once(
    tmp_path: Path,
) -> None:
    """What ``run --bug force-sync-no`` draws, over 20 seeds: every power loss takes all three
    members in one window (one member's, or a majority's, loses nothing a survivor lacks)."""
    picked = exposure_fields(BUG_SWITCHES, ("force-sync-no",))
    assert picked["targets"] == ("lock-all",)
    losses = []
    for seed in range(1, 21):
        spec = TestSpec(
            system="zookeeper", bugs=("force-sync-no",), time_limit=60, seed=seed, store=tmp_path
        )
        losses += [w for w in plan_run(replace(spec, **picked)).schedule.windows]
    assert len(losses) >= 20
    assert {(w.kind, w.targets) for w in losses} == {("power-loss", ("z1", "z2", "z3"))}


def test_clock_faults_reach_the_members_and_not_the_store() -> None:
    system = ZooKeeperSystem()
    assert clock_problem(system, ["clock-rate"], ["lock-leader", "z2", "holder"]) is None
    refused = clock_problem(system, ["clock-step"], ["s1"])
    assert refused is not None and "s1: its daemons are not started under libfaketime" in refused
    # The probe beside each member is never a fault's target.
    assert [entry.name for entry in system.daemons.entries if entry.targeted] == [
        "zookeeper",
        "ref-store",
    ]
