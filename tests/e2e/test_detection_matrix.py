"""The detection matrix: the correct reference system is valid under every fault, and each bug
switch, under the fault that exposes it, is invalid with the anomaly it should produce.

Each case is a whole short run on a real cluster: real agents, real SIGSTOP, real iptables, real
restarts. Seeds are fixed so a failure can be replayed with the same schedule and choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.runner import run_test
from harness.spec import TestSpec

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

_TIME_LIMIT = 20.0


@dataclass(frozen=True)
class Case:
    """One row of the matrix: a spec and what the checker must say about it."""

    id: str
    bugs: tuple[str, ...] = ()
    nemeses: tuple[str, ...] = ("pause",)
    targets: tuple[str, ...] = ("holder",)
    workload: str = "append"
    ttl: float = 1.0
    lock_delay: float = 0.0
    valid: bool = True
    anomalies: tuple[str, ...] = ()  # at least one of these must be reported
    sink: str | None = None  # the sink whose verdict must carry the anomaly
    extra: dict[str, Any] = field(default_factory=dict)


CORRECT = [
    Case("correct-pause"),
    Case("correct-freeze", nemeses=("freeze",)),
    Case("correct-throttle", nemeses=("throttle",)),
    Case("correct-partition", nemeses=("partition",)),
    Case("correct-kill", nemeses=("kill",), targets=("holder", "lock", "store")),
    Case("correct-restart-while-paused", nemeses=("restart-while-paused",)),
    Case("correct-rmw-pause", workload="rmw"),
    Case("correct-sinks-pause", workload="sinks"),
]

BUGS = [
    Case("no-store-check", bugs=("no-store-check",), valid=False, anomalies=("stale-write",)),
    Case(
        "long-ttl-no-fence",
        bugs=("long-ttl-no-fence",),
        ttl=0.5,
        valid=False,
        anomalies=("stale-write",),
    ),
    Case(
        "epoch-in-memory",
        bugs=("epoch-in-memory",),
        nemeses=("kill",),
        targets=("lock",),
        valid=False,
        anomalies=("grant-regression", "epoch-reuse"),
    ),
    Case(
        "store-forgets",
        bugs=("store-forgets",),
        nemeses=("restart-while-paused",),
        valid=False,
        anomalies=("stale-write",),
    ),
    Case(
        "retry-on-reject", bugs=("retry-on-reject",), valid=False, anomalies=("retry-after-reject",)
    ),
    Case(
        "reacquire-no-reread",
        bugs=("reacquire-no-reread",),
        workload="rmw",
        valid=False,
        anomalies=("lost-update",),
    ),
    Case(
        "unfenced-path",
        bugs=("unfenced-path",),
        workload="sinks",
        valid=False,
        anomalies=("stale-write",),
        sink="store-batch",
    ),
    Case(
        "short-lock-delay",
        bugs=("short-lock-delay",),
        workload="sinks",
        lock_delay=3.0,
        valid=False,
        anomalies=("stale-write",),
        sink="audit",
    ),
]


@pytest.mark.parametrize("case", CORRECT + BUGS, ids=lambda case: case.id)
def test_detection_matrix(case: Case, tmp_path: Path) -> None:
    spec = TestSpec(
        bugs=case.bugs,
        workload=case.workload,
        nemeses=case.nemeses,
        targets=case.targets,
        ttl=case.ttl,
        lock_delay=case.lock_delay,
        time_limit=_TIME_LIMIT,
        seed=20261130,
        store=tmp_path / "store",
        **case.extra,
    )
    outcome = run_test(spec, console=Console(stderr=True, force_terminal=False), progress=False)
    results = outcome.run_dir.read_results()
    assert results is not None
    summary = (
        f"{case.id}: valid={results['valid']} anomalies={results['anomaly_types']} "
        f"expected={results.get('expected_types')} unknown={results.get('unknown_reasons')} "
        f"(run dir {outcome.run_dir.path})"
    )
    assert not outcome.interrupted, summary
    assert "run_error" not in results, summary
    failed_faults = [f for f in results.get("faults", []) if f.get("applied") is False]
    assert not failed_faults, summary
    if case.valid:
        assert results["valid"] is True, summary
        assert results["anomaly_types"] == [], summary
        return
    assert results["valid"] is False, summary
    found = set(case.anomalies) & set(results["anomaly_types"])
    assert found, summary
    if case.sink is not None:
        verdict = results["sinks"][case.sink]
        assert verdict["valid"] is False, summary
        assert set(case.anomalies) & set(verdict["anomalies"]), summary
