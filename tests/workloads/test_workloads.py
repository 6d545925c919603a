"""Workloads against an in-memory fenced store: what each holder sends, and how it reacts."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from workloads import HolderFlaws, WorkloadOptions, final_read_count, final_reads, get_workload
from workloads.base import Completion


@dataclass
class FakeOps:
    """A holder's operations against a tiny fenced store; ``refuse`` scripts stale refusals."""

    node: str = "w1"
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    budget: int = 12
    refuse: set[int] = field(default_factory=set)  # write numbers (1-based) refused as stale
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    epoch: int = 0
    writes: int = 0
    logs: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def stopping(self) -> bool:
        return len(self.calls) >= self.budget

    def acquire(self, lock: str) -> Completion:
        self.epoch += 1
        self.calls.append(("acquire", {"lock": lock, "epoch": self.epoch}))
        return Completion("ok", {"lock": lock, "epoch": self.epoch})

    def release(self, lock: str) -> Completion:
        self.calls.append(("release", {"lock": lock}))
        return Completion("ok", {"lock": lock})

    def write(
        self,
        lock: str,
        epoch: int,
        sink: str,
        key: str,
        prev: str | None = None,
        unit_start: bool = True,
    ) -> Completion:
        self.writes += 1
        value = {
            "lock": lock,
            "epoch": epoch,
            "sink": sink,
            "key": key,
            "prev": prev,
            "unit_start": unit_start,
            "id": f"{self.node}-{self.writes}",
        }
        self.calls.append(("write", value))
        if self.writes in self.refuse:
            return Completion("fail", value, "stale-epoch")
        self.logs.setdefault((sink, key), []).append(value["id"])
        return Completion("ok", value)

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> Completion:
        entries = [{"id": i, "epoch": 1} for i in self.logs.get((sink, key), [])]
        value = {"sink": sink, "key": key, "lock": lock, "epoch": epoch, "entries": entries}
        self.calls.append(("read", value))
        return Completion("ok", value)


def _writes(ops: FakeOps) -> list[dict[str, Any]]:
    return [value for f, value in ops.calls if f == "write"]


def test_append_acquires_writes_under_its_epoch_and_releases() -> None:
    ops = FakeOps(budget=10)
    get_workload("append").holder(ops, WorkloadOptions(read_ratio=0.0, writes_per_lease=3))
    assert [f for f, _ in ops.calls[:5]] == ["acquire", "write", "write", "write", "release"]
    assert {w["epoch"] for w in _writes(ops)[:3]} == {1}
    assert all(w["sink"] == "store" and w["unit_start"] for w in _writes(ops))


def test_a_refusal_ends_the_lease_and_the_correct_holder_does_not_retry() -> None:
    ops = FakeOps(budget=8, refuse={2})
    get_workload("append").holder(ops, WorkloadOptions(read_ratio=0.0, writes_per_lease=5))
    fs = [f for f, _ in ops.calls]
    assert fs[:5] == ["acquire", "write", "write", "release", "acquire"]


def test_retry_on_reject_sends_the_refused_epoch_again() -> None:
    ops = FakeOps(budget=6, refuse={2})
    options = WorkloadOptions(read_ratio=0.0, flaws=HolderFlaws(retry_on_reject=True))
    get_workload("append").holder(ops, options)
    first, refused, retry = _writes(ops)[:3]
    assert refused["epoch"] == retry["epoch"] == first["epoch"]
    assert retry["id"] != refused["id"] and retry["unit_start"] is False


def test_rmw_reads_under_its_lease_before_every_write() -> None:
    ops = FakeOps(budget=9)
    get_workload("rmw").holder(ops, WorkloadOptions(read_ratio=0.0))
    fs = [f for f, _ in ops.calls]
    assert fs[:5] == ["acquire", "read", "write", "read", "write"]
    read, write = ops.calls[3][1], ops.calls[4][1]
    assert read["epoch"] == 1 and read["lock"] == "L0"  # a fenced read
    assert write["prev"] == (read["entries"][-1]["id"] if read["entries"] else None)


def test_rmw_with_the_flaw_replays_a_refused_computation_without_reading() -> None:
    ops = FakeOps(budget=8, refuse={1})
    options = WorkloadOptions(read_ratio=0.0, flaws=HolderFlaws(reacquire_no_reread=True))
    get_workload("rmw").holder(ops, options)
    fs = [f for f, _ in ops.calls]
    assert fs[:6] == ["acquire", "read", "write", "release", "acquire", "write"]
    refused, replayed = _writes(ops)[:2]
    assert (replayed["key"], replayed["prev"]) == (refused["key"], refused["prev"])
    assert replayed["epoch"] == refused["epoch"] + 1


def test_sinks_checks_once_then_fans_out_unfenced_first_secondary_paths_before_primary() -> None:
    ops = FakeOps(budget=5)
    options = WorkloadOptions(
        read_ratio=0.0,
        fenced_sinks=("store", "store-batch"),
        all_sinks=("store", "store-batch", "audit"),
    )
    get_workload("sinks").holder(ops, options)
    unit = _writes(ops)[:3]
    assert [w["sink"] for w in unit] == ["audit", "store-batch", "store"]
    assert [w["unit_start"] for w in unit] == [True, False, False]
    assert len({w["key"] for w in unit}) == 1


def test_sinks_stops_the_unit_at_a_refusal() -> None:
    ops = FakeOps(budget=6, refuse={2})
    options = WorkloadOptions(
        read_ratio=0.0,
        fenced_sinks=("store", "store-batch"),
        all_sinks=("store", "store-batch", "audit"),
    )
    get_workload("sinks").holder(ops, options)
    fs = [(f, v.get("sink")) for f, v in ops.calls[:4]]
    assert fs == [
        ("acquire", None),
        ("write", "audit"),
        ("write", "store-batch"),
        ("release", None),
    ]


def test_final_reads_cover_every_key_of_every_lock() -> None:
    options = WorkloadOptions(keys=2, locks=2, all_sinks=("store", "audit"))
    assert list(final_reads(get_workload("append"), options)) == [
        ("store", "L0-k0"),
        ("store", "L0-k1"),
        ("store", "L1-k0"),
        ("store", "L1-k1"),
    ]
    assert len(list(final_reads(get_workload("sinks"), options))) == 8
    assert final_read_count(get_workload("sinks"), options) == 8
