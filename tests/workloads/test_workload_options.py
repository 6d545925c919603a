"""The workload options of issue 16: key spaces, short leases, several locks per sink, writes
spanning keys; their validation (spec and `run`), key spreading, and what a holder sends."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.record.spec import SpecError, TestSpec, spec_from_dict
from harness.run.plan import rerun_command
from tests.workloads.test_workloads import FakeOps
from workloads import WorkloadOptions, get_workload
from workloads.base import Completion
from workloads.holder import KeyPicker


@dataclass
class SpanningOps(FakeOps):
    """FakeOps that also takes writes spanning keys (recorded as ``write_keys`` calls)."""

    spans: list[list[str]] = field(default_factory=list)

    def write_keys(
        self, lock: str, epoch: int, sink: str, keys: Sequence[str], unit_start: bool = True
    ) -> Completion:
        self.spans.append(list(keys))
        self.calls.append(("write_keys", {"lock": lock, "epoch": epoch, "keys": list(keys)}))
        return Completion("ok", {"lock": lock, "epoch": epoch})


def test_a_holder_writes_every_key_once_before_any_key_twice() -> None:
    keys = KeyPicker(random.Random(7), WorkloadOptions(keys=1000))
    first = [keys.pick("L0")[0] for _ in range(1000)]
    assert len(set(first)) == 1000
    second = Counter(first + [keys.pick("L0")[0] for _ in range(1000)])
    assert set(second.values()) == {2}


def test_holders_with_different_seeds_walk_the_keys_in_different_orders() -> None:
    options = WorkloadOptions(keys=1000)
    one = [KeyPicker(random.Random(f"1:w{n}"), options).pick("L0", 20) for n in (1, 2)]
    # Two holders' first 20 keys of a thousand barely meet: a stale holder's next key is most
    # likely one the new holder has not written.
    assert len(set(one[0]) & set(one[1])) < 5


def test_picks_are_distinct_within_one_write_even_across_a_reshuffle() -> None:
    keys = KeyPicker(random.Random(3), WorkloadOptions(keys=5))
    for _ in range(50):
        picked = keys.pick("L0", 4)
        assert len(set(picked)) == 4
        assert all(key.startswith("L0-k") for key in picked)
    assert sorted(keys.pick("L0", 9)) == [f"L0-k{i}" for i in range(5)]  # at most its keys


def test_a_single_key_is_always_that_key() -> None:
    keys = KeyPicker(random.Random(1), WorkloadOptions(keys=1))
    assert {keys.pick("L3")[0] for _ in range(10)} == {"L3-k0"}


def test_the_same_seed_picks_the_same_keys() -> None:
    options = WorkloadOptions(keys=100, locks=2)
    again = [KeyPicker(random.Random("9:w1"), options).pick("L1", 30) for _ in range(2)]
    assert again[0] == again[1]


def test_append_with_keys_per_write_sends_one_write_spanning_distinct_keys() -> None:
    ops = SpanningOps(budget=12)
    options = WorkloadOptions(keys=10, keys_per_write=3, read_ratio=0.0, writes_per_lease=4)
    get_workload("append").holder(ops, options)
    assert ops.spans, ops.calls
    assert all(len(span) == len(set(span)) == 3 for span in ops.spans)
    assert not [f for f, _ in ops.calls if f == "write"]


def test_one_write_per_lease_makes_a_grant_per_write() -> None:
    ops = FakeOps(budget=30)
    get_workload("append").holder(ops, WorkloadOptions(read_ratio=0.0, writes_per_lease=1))
    kinds = [f for f, _ in ops.calls]
    assert kinds[:6] == ["acquire", "write", "release"] * 2
    assert kinds.count("acquire") == 10


def test_several_locks_share_the_sink_with_disjoint_keys() -> None:
    ops = FakeOps(budget=200)
    options = WorkloadOptions(keys=4, locks=3, read_ratio=0.0, writes_per_lease=2)
    get_workload("append").holder(ops, options)
    writes = [value for f, value in ops.calls if f == "write"]
    assert {w["lock"] for w in writes} == {"L0", "L1", "L2"}
    assert {w["sink"] for w in writes} == {"store"}
    assert all(w["key"].startswith(w["lock"] + "-") for w in writes)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"writes_per_lease": 0}, "--writes-per-lease must be"),
        ({"keys_per_write": 0}, "--keys-per-write must be"),
        ({"keys_per_write": 65, "keys": 1000}, "--keys-per-write must be"),
        ({"keys_per_write": 4, "keys": 3}, "--keys-per-write 4 is more than --keys 3"),
        ({"keys_per_write": 2, "keys": 9, "workload": "rmw"}, "needs --workload append"),
        ({"keys": 100_001}, "--keys must be"),
        ({"locks": 0}, "--locks must be"),
    ],
)
def test_out_of_range_options_name_the_option(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError, match=says):
        TestSpec(**changes).check()


def test_the_new_fields_round_trip_and_are_accepted_in_range() -> None:
    spec = TestSpec(keys=1000, locks=4, writes_per_lease=1, keys_per_write=8)
    spec.check()
    assert spec_from_dict(spec.to_json()) == spec
    # A test.json written before these fields existed still loads, with the old defaults.
    old = {k: v for k, v in spec.to_json().items() if k != "keys_per_write"}
    assert spec_from_dict(old).keys_per_write == 1


def test_the_rerun_command_carries_the_options_that_differ_from_the_defaults() -> None:
    plain = rerun_command(TestSpec(seed=1))
    assert "--keys-per-write" not in plain and "--read-ratio" not in plain
    # A field a planted bug's exposure may set is named even at its default once a bug is planted
    # (the rerun would otherwise take the exposure's value), and only then.
    assert "--writes-per-lease" not in plain and "--partitions" not in plain
    planted = rerun_command(TestSpec(seed=1, bugs=("lazy-mark",)))
    assert planted[planted.index("--writes-per-lease") + 1] == "20"
    assert planted[planted.index("--partitions") + 1] == "isolate,halves,bridge,one-way,lock-cut"
    argv = rerun_command(TestSpec(keys=1000, writes_per_lease=2, keys_per_write=4, seed=1))
    assert argv[argv.index("--keys") + 1] == "1000"
    assert argv[argv.index("--writes-per-lease") + 1] == "2"
    assert argv[argv.index("--keys-per-write") + 1] == "4"
