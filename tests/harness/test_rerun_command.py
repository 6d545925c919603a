"""The stored rerun command runs the same run again: its argv, parsed by the real ``fencecheck
run``, gives back the very spec it was made from (seed and every field), and a run that played
fixed windows is rerun by ``replay`` rather than by a seed that would draw other windows."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.record.schedule import TOPOLOGIES
from harness.record.spec import TestSpec
from harness.run.plan import rerun_command
from harness.run.store import RunDir
from tests.support.spec_of import spec_of

_specs = st.builds(
    TestSpec,
    bugs=st.sampled_from([(), ("no-store-check",), ("lazy-mark", "retry-on-reject")]),
    workload=st.sampled_from(["append", "rmw", "sinks"]),
    nemeses=st.sampled_from([("pause",), ("pause", "kill"), ()]),
    targets=st.sampled_from([("holder",), ("holder", "lock", "store")]),
    fault_lengths=st.sampled_from([(), (3.0,), (0.8, 1.5, 3.0)]),
    partitions=st.sampled_from([TOPOLOGIES, ("lock-cut",), ("isolate", "halves")]),
    ttl=st.sampled_from([0.5, 1.0, 2.0]),
    lock_delay=st.sampled_from([0.0, 0.5]),
    time_limit=st.sampled_from([20.0, 30.0, 61.5]),
    workers=st.integers(1, 16),
    keys=st.integers(1, 100_000),
    locks=st.integers(1, 1000),
    rate=st.sampled_from([0.0, 50.0]),
    work_ms=st.integers(0, 500),
    read_ratio=st.sampled_from([0.0, 0.1, 0.25]),
    writes_per_lease=st.integers(1, 100),
    acquire=st.sampled_from(["wait", "try"]),
    op_timeout=st.sampled_from([0.0, 10.0]),
    control=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    name=st.sampled_from(["", "nightly-row-3"]),
    store=st.sampled_from([Path("store"), Path("elsewhere/runs")]),
)


@settings(max_examples=60, deadline=None)
@given(spec=_specs)
def test_the_rerun_command_rebuilds_the_same_spec(spec: TestSpec) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        again = spec_of(rerun_command(spec), monkeypatch)
    assert again == spec


def test_a_run_of_fixed_windows_is_rerun_by_replay(tmp_path: Path) -> None:
    folder = RunDir(tmp_path / "store" / "t" / "20261201T000000")
    argv = rerun_command(replace(TestSpec(seed=7)), folder)
    assert argv == ["fencecheck", "replay", str(folder.path)]
