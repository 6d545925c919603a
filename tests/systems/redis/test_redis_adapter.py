"""The redis adapter's description of itself: topology, inventory, switches, command line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.record.spec import TestSpec
from harness.run.exposure import exposure_fields
from harness.run.plan import plan_run
from nemeses.schedule import LOCK_LEADER
from systems import ConfigError, SystemConfig, load_system
from systems.base import clock_problem, read_packages, topology
from systems.redis import BUG_SWITCHES, PACKAGES, RedisSystem


def test_it_is_found_by_name_and_runs_on_a_primary_and_its_replica() -> None:
    system = load_system("redis")
    assert isinstance(system, RedisSystem)
    assert topology(system.roles(), 2) == [
        ("r1", "lock"),
        ("r2", "lock"),
        ("w1", "worker"),
        ("w2", "worker"),
    ]
    assert set(system.packages()) == {
        "redis-server",
        "redis-tools",
        "redis-sentinel",
        "python3-redis",
        "python3-pyfuse3",
        "fuse3",
        "gcc",
        "libc6-dev",
    }
    assert system.packages() == read_packages(PACKAGES)


def test_the_inventory_has_two_fenced_sinks_and_an_unfenced_log() -> None:
    sinks = {sink.name: sink for sink in RedisSystem().inventory(SystemConfig())}
    assert {name for name, sink in sinks.items() if sink.fenced} == {"store", "owned"}
    assert not sinks["log"].fenced and sinks["log"].mitigation == "none"


def test_owned_trusts_lease_makes_owned_a_sink_that_relies_on_the_lease() -> None:
    planted = SystemConfig(bugs=frozenset({"owned-trusts-lease"}))
    sinks = {sink.name: sink for sink in RedisSystem().inventory(planted)}
    assert not sinks["owned"].fenced and sinks["owned"].mitigation == "lock-delay"
    assert sinks["owned"].seq and sinks["owned"].expects("stale-write") is False  # it counts
    assert sinks["store"].fenced and sinks["log"].mitigation == "none"
    how = BUG_SWITCHES["owned-trusts-lease"].exposed_by
    assert how.targets == ("lock-leader",) and "clock-step" in how.faults


def test_clock_faults_reach_the_redis_servers_but_not_sentinel() -> None:
    system = RedisSystem()
    assert (
        clock_problem(system, ["clock-step", "clock-rate"], ["lock-leader", "r2", "holder"]) is None
    )
    assert [entry.name for entry in system.daemons.entries if entry.targeted] == ["redis-server"]


def test_redis_keeps_an_append_only_file_unless_no_aof() -> None:
    system = RedisSystem()
    careful = system.server_argv(SystemConfig())
    assert careful[careful.index("--appendonly") + 1] == "yes"
    assert careful[careful.index("--appendfsync") + 1] == "always"
    assert "--appendonly" not in system.server_argv(SystemConfig(bugs=frozenset({"no-aof"})))


def test_sentinel_promotes_the_replica_only_after_the_kills_that_expose_no_aof() -> None:
    system = RedisSystem()
    assert system.sentinel_argv()[0] == "redis-sentinel"
    no_aof = BUG_SWITCHES["no-aof"].exposed_by
    failover = BUG_SWITCHES["async-failover"].exposed_by
    for ttl in (0.5, 1.0, 4.0):
        down_after_ms = system.down_after_ms(SystemConfig(lease_ttl=ttl))
        # A killed primary is back before Sentinel gives up on it; the cut-off replica is promoted.
        assert max(no_aof.ttl_multiples) * ttl * 1000 < down_after_ms
        assert min(failover.ttl_multiples) * ttl * 1000 > down_after_ms
    assert failover.faults == ("partition",) and failover.targets == ("r2",)


def test_every_switch_names_its_exposure_and_anomaly() -> None:
    assert set(BUG_SWITCHES) == {
        "random-value-token",
        "no-aof",
        "unchecked-release",
        "async-failover",
        "appendfsync-everysec",
        "appendfsync-no",
        "owned-trusts-lease",
    }
    for switch in BUG_SWITCHES.values():
        assert switch.exposed_by.faults and switch.anomalies


def test_an_unknown_switch_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="random-value-token"):
        RedisSystem().validate(SystemConfig(bugs=frozenset({"no-fsync"})))


def test_the_appendfsync_switches_weaken_only_the_fsync_and_keep_the_aof() -> None:
    system = RedisSystem()
    for bug, value in (("appendfsync-everysec", "everysec"), ("appendfsync-no", "no")):
        argv = system.server_argv(SystemConfig(bugs=frozenset((bug,))))
        assert argv[argv.index("--appendonly") + 1] == "yes"
        assert argv[argv.index("--appendfsync") + 1] == value
        assert system.switches[bug].exposed_by.faults == ("power-loss",)


@pytest.mark.parametrize("bug", ["appendfsync-everysec", "appendfsync-no"])
def test_the_appendfsync_switches_power_off_the_primary_in_every_window(
    bug: str, tmp_path: Path
) -> None:
    """What ``run --bug X`` draws, over 20 seeds: every power loss lands on the primary (the
    server Sentinel names when the window starts), none on a server drawn among both."""
    picked = exposure_fields(BUG_SWITCHES, (bug,))
    losses = []
    for seed in range(1, 21):
        spec = TestSpec(system="redis", bugs=(bug,), time_limit=60, seed=seed, store=tmp_path)
        schedule = plan_run(replace(spec, **picked)).schedule
        losses += [w for w in schedule.windows if w.kind == "power-loss"]
    assert len(losses) >= 20
    assert {w.targets for w in losses} == {(LOCK_LEADER,)}
    assert not [w for w in losses if "restart" in w.params]


def test_a_power_loss_aimed_at_the_holder_powers_off_the_primary(tmp_path: Path) -> None:
    """``--nemesis power-loss --target holder``: each pair's power loss aims at the server
    Sentinel names when it starts (``lock-leader``), a drawn server standing in."""
    spec = TestSpec(system="redis", nemeses=("power-loss",), time_limit=60, seed=1, store=tmp_path)
    windows = plan_run(spec).schedule.windows
    losses = [w for w in windows if w.kind == "power-loss"]
    assert losses and len(losses) == sum(1 for w in windows if w.kind == "pause")
    assert {w.targets for w in losses} == {(LOCK_LEADER,)}
    assert {w.fallback for w in losses} <= {"r1", "r2"}


def test_the_append_only_file_sits_in_the_declared_disk_dir_apart_from_the_configs() -> None:
    system = RedisSystem(data_dir="/d")
    argv = system.server_argv(SystemConfig())
    assert argv[argv.index("--dir") + 1] == system.disk_dirs()["lock"] == "/d/data"
    assert argv[1] == "/d/redis.conf"
