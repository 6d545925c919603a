"""Choosing the faults that expose a planted mistake, from its :class:`systems.Exposure` data."""

from __future__ import annotations

from dataclasses import replace

from harness.run.spec import TestSpec
from systems import HOLDER_FLAWS, BugSwitch, PlantsBugs, System, load_system

__all__ = ["ExposureError", "expose"]


class ExposureError(ValueError):
    """The spec plants nothing whose exposure is known; the message says what to pass."""


def expose(spec: TestSpec, system: System | None = None) -> TestSpec:
    """``spec`` with faults, targets, workload, fault lengths and (if larger) lock-delay taken
    from the ``exposed_by`` of its first planted bug switch or holder flaw."""
    if not spec.bugs:
        raise ExposureError("--expose needs a planted mistake: pass --bug NAME")
    system = system or load_system(spec.system)
    switches: dict[str, BugSwitch] = dict(HOLDER_FLAWS)
    if isinstance(system, PlantsBugs):
        switches.update(system.bug_switches())
    first = spec.bugs[0]
    if first not in switches:
        raise ExposureError(
            f"{first!r} is neither a bug switch of {spec.system!r} nor a holder flaw; "
            "see `fencecheck list`"
        )
    how = switches[first].exposed_by
    return replace(
        spec,
        nemeses=how.faults,
        targets=how.targets,
        workload=how.workload,
        fault_lengths=how.ttl_multiples,
        lock_delay=max(spec.lock_delay, how.lock_delay),
    )
