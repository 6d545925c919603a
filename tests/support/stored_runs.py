"""A stored invalid (or valid) run made without a cluster: its test.json and results.json, for
tests of replay and shrink that judge candidates by a rule."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.record import Sink
from harness.record.run_record import NodeEntry, RunRecord
from harness.record.spec import TestSpec
from harness.run.store import new_run_dir
from nemeses import Schedule

__all__ = ["store_run"]


def store_run(
    spec: TestSpec, schedule: Schedule, roles: Mapping[str, str], anomalies: list[str]
) -> Path:
    """A run of ``spec`` that played ``schedule`` on nodes of ``roles``, found ``anomalies``
    (none: valid), stored in ``spec.store``; its folder."""
    run = new_run_dir(spec.test_name, spec.store)
    record = RunRecord(
        spec=spec,
        run_id="r",
        started="2026-01-01T00:00:00+00:00",
        command="fencecheck run",
        lease_ttl=spec.ttl,
        schedule=schedule,
        inventory=(Sink("store", True, "none", ""),),
        topology=tuple(NodeEntry(name, role) for name, role in roles.items()),
    )
    run.write_json(run.test_json, record.to_json())
    run.write_json(run.results, {"valid": not anomalies, "anomaly_types": anomalies})
    return run.path
