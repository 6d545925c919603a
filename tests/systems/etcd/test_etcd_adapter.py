"""The etcd adapter's declarations and the holder client's encodings, without an engine."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from harness.node.docker.cluster import NodeSpec
from harness.nodeside import client as api
from harness.record.spec import TestSpec
from harness.run.exposure import expose, need_of, switches_of, unexposed
from harness.run.matrix import MatrixEntry, load_matrix
from nemeses import DEFAULT_TTL_MULTIPLES, generate_schedule
from systems import ConfigError, System, SystemConfig
from systems.base import BugSwitch, topology
from systems.etcd import BUG_SWITCHES, EtcdSystem, holder


def test_it_is_registered_and_asks_for_three_members_a_store_and_workers() -> None:
    project = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    entry = project["project"]["entry-points"]["fencecheck.systems"]["etcd"]
    assert entry == "systems.etcd:EtcdSystem"
    system = EtcdSystem()
    assert isinstance(system, System)
    names = [name for name, _ in topology(system.roles(), 3)]
    assert names == ["e1", "e2", "e3", "s1", "w1", "w2", "w3"]


def test_its_node_image_adds_etcd_and_postgresql_from_debian() -> None:
    packages = EtcdSystem().packages()
    for wanted in ("etcd-server", "etcd-client", "postgresql-15", "python3-psycopg2"):
        assert wanted in packages


def test_the_inventory_has_two_fenced_sinks_and_one_unfenced() -> None:
    sinks = {sink.name: sink for sink in EtcdSystem().inventory(SystemConfig())}
    assert sinks["etcd-txn"].fenced and sinks["postgres"].fenced
    assert not sinks["etcd-put"].fenced and sinks["etcd-put"].mitigation == "none"
    assert all(sink.seq for sink in sinks.values())  # etcd revisions, a PostgreSQL bigserial


@pytest.mark.parametrize(("asked", "used"), [(0.5, 2.0), (2.0, 2.0), (2.5, 3.0), (10.0, 10.0)])
def test_lease_ttls_are_etcds_whole_seconds_of_at_least_two(asked: float, used: float) -> None:
    assert EtcdSystem().lease_ttl(SystemConfig(lease_ttl=asked)) == used


def test_every_switch_says_how_to_expose_it_and_unknown_ones_are_refused() -> None:
    assert set(BUG_SWITCHES) == {
        "lease-id-token",
        "check-then-write",
        "ignore-expired-refresh",
        "shared-lease",
        "pg-check-then-act",
        "pg-async-commit",
        "pg-fsync-off",
    }
    for switch in BUG_SWITCHES.values():
        assert isinstance(switch, BugSwitch) and switch.exposed_by.faults and switch.anomalies
    with pytest.raises(ConfigError, match="no bug switch 'no-store-check'"):
        EtcdSystem().validate(SystemConfig(bugs=frozenset({"no-store-check"})))


def test_padded_epochs_compare_as_bytes_in_number_order() -> None:
    epochs = [0, 9, 10, 99, 100, 2**63 - 1]
    assert sorted(epochs, key=holder._padded) == epochs
    assert sorted(holder._padded(e) for e in epochs) == [holder._padded(e) for e in epochs]


def test_a_prefix_range_ends_just_past_the_prefix() -> None:
    end = holder._prefix_end("/fencecheck/lock/L/")
    assert "/fencecheck/lock/L/" < "/fencecheck/lock/L/ffff" < end
    assert not (end > "/fencecheck/lock/L0/x")  # a lock whose name extends this one's


def test_entries_come_back_in_etcds_acceptance_order() -> None:
    def kv(id: str, epoch: int, revision: int) -> dict[str, str]:
        value = holder._b64(f'{{"id": "{id}", "epoch": {epoch}, "prev": null}}')
        return {"key": holder._b64(f"k/{id}"), "value": value, "mod_revision": str(revision)}

    read = holder._entries([kv("b", 7, 12), kv("a", 6, 9)])
    assert [(e.id, e.epoch, e.seq) for e in read.entries] == [("a", 6, 9), ("b", 7, 12)]


_MATRIX = Path(__file__).parents[3] / "matrices" / "etcd.json"


@pytest.mark.parametrize("entry", load_matrix(_MATRIX), ids=lambda entry: entry.label)
def test_every_row_of_its_matrix_passes_runs_preflight_exposure_check(entry: MatrixEntry) -> None:
    spec, system = entry.spec, EtcdSystem()
    roles = dict(topology(system.roles(), spec.workers))
    ttl = system.lease_ttl(SystemConfig(lease_ttl=spec.ttl, bugs=frozenset(spec.bugs)))
    schedule = generate_schedule(
        spec.seed,
        roles,
        lease_ttl_ns=round(ttl * 1e9),
        duration_ns=round(spec.time_limit * 1e9),
        kinds=spec.nemeses,
        targets=spec.targets,
        ttl_multiples=spec.fault_lengths or DEFAULT_TTL_MULTIPLES,
    )
    assert unexposed(spec, schedule, roles, switches_of(system)) is None
    assert set(spec.bugs) <= set(BUG_SWITCHES)


def test_with_a_lock_delay_etcd_delayed_joins_the_inventory_protected_by_it() -> None:
    system = EtcdSystem()
    assert "etcd-delayed" not in {sink.name for sink in system.inventory(SystemConfig())}
    sinks = {sink.name: sink for sink in system.inventory(SystemConfig(lock_delay=4.0))}
    delayed = sinks["etcd-delayed"]
    assert not delayed.fenced and delayed.mitigation == "lock-delay" and delayed.seq


def test_ignore_expired_refresh_needs_a_lock_delay_and_its_exposure_brings_one() -> None:
    bug = frozenset({holder.IGNORE_EXPIRED_REFRESH})
    with pytest.raises(ConfigError, match="--lock-delay 4 --work-ms 500"):
        EtcdSystem().validate(SystemConfig(bugs=bug))
    EtcdSystem().validate(SystemConfig(bugs=bug, lock_delay=4.0))
    switch = BUG_SWITCHES[holder.IGNORE_EXPIRED_REFRESH]
    assert switch.sinks == (holder.ETCD_DELAYED,)
    spec = expose(TestSpec(system="etcd", bugs=(holder.IGNORE_EXPIRED_REFRESH,)), EtcdSystem())
    assert spec.lock_delay == 4.0 and spec.work_ms == 500 and spec.workload == "sinks"
    # The exposing pauses stay below the lock-delay: the correct system is safe under them.
    assert max(switch.exposed_by.ttl_multiples) * 2.0 < switch.exposed_by.lock_delay
    assert need_of(switch.exposed_by).past_lease


class _Named:
    def __init__(self, name: str, role: str) -> None:
        self.name, self.role, self.ip = name, role, f"10.0.0.{name[1:]}"


def test_each_workers_client_starts_with_the_member_faults_call_its_own() -> None:
    nodes: dict[str, Any] = {
        spec.name: _Named(spec.name, spec.role)
        for spec in (NodeSpec(n, r) for n, r in topology(EtcdSystem().roles(), 4))
    }
    system = EtcdSystem()
    owners = {w: system.client_member(nodes, w) for w in ("w1", "w2", "w3", "w4")}
    assert owners == {"w1": "e1", "w2": "e2", "w3": "e3", "w4": "e1"}
    for worker, member in owners.items():
        first = system._endpoints(nodes, worker)[0]
        assert first == f"http://{nodes[str(member)].ip}:2379"
    assert system.client_member(nodes, "s1") is None


class _StoppedWhileFirst:
    """etcd as a holder that was stopped for a TTL just as it came first in the queue sees it:
    the range finds its key first, then the keepalive finds its lease gone (``alive`` False)."""

    def __init__(self, alive: bool) -> None:
        self.alive = alive
        self.revoked: list[int] = []

    def grant(self, ttl: int, lease: int | None = None) -> int:
        return 7

    def txn(self, compare: Any, success: Any, failure: Any) -> tuple[bool, dict[str, Any]]:
        return True, {"header": {"revision": "40"}}

    def range(self, key: str, prefix: bool = False, **options: Any) -> list[dict[str, Any]]:
        time.sleep(1.05)  # stopped past the lease (1 s) after its last refresh
        return [{"create_revision": "40"}]

    def keepalive_at(self, lease: int) -> tuple[int, int]:
        return (1 if self.alive else 0), 52

    def revoke(self, lease: int) -> bool:
        self.revoked.append(lease)
        return True


@pytest.mark.parametrize("alive", [True, False])
def test_a_holder_stopped_as_it_came_first_asks_its_lease_and_reports_its_end(
    alive: bool,
) -> None:
    client = holder.Client({"node": "w1", "etcd": {"w1": ["http://127.0.0.1:1"]}})
    client._etcd = _StoppedWhileFirst(alive)  # type: ignore[assignment]
    granted = client.acquire("L", 1.0, 5.0)
    assert isinstance(granted, api.Grant)
    assert (granted.epoch, granted.grant_seq) == (40, 40)
    if alive:
        assert granted.lease_ended is None
        return
    ended = granted.lease_ended
    assert ended is not None and (ended.how, ended.grant_seq) == ("expired", 52)
    assert ended.after >= 1.0


def test_both_roles_declare_their_data_dirs_for_the_disk_faults() -> None:
    dirs = EtcdSystem(data_dir="/d").disk_dirs()
    assert dirs == {"lock": "/d/etcd", "store": "/d/postgres"}
    assert "python3-pyfuse3" in EtcdSystem().packages()
    assert BUG_SWITCHES["pg-fsync-off"].exposed_by.faults == ("power-loss",)
