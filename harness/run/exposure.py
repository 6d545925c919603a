"""Can this run expose the bug switches it plants? Decided before any container starts.

A run that plants ``unfenced-path`` but never writes to ``store-batch``, or plants
``epoch-in-memory`` but never restarts the lock service, would end ``valid`` and read as "the
harness found nothing", which is a false verdict about the harness itself (DESIGN.md §10). So
``run`` refuses such a spec with the fix, and picks the exposing fault when none was asked for.

What exposes each switch is the explicit table :data:`EXPOSURES`, keyed by switch name (the
adapters' ``BugSwitch.exposed_by`` says the same in words). Switches it does not list (a
third-party system's) are not judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from harness.run.spec import TestSpec
from nemeses import HOLDER, Schedule

__all__ = ["EXPOSURES", "Exposure", "exposing_faults", "unexposed"]

_STOPS: Final = frozenset(("pause", "freeze", "throttle", "partition", "restart-while-paused"))
"""Faults that can keep a holder from renewing past its lease while it still means to write."""
_WORKER: Final = "worker"


@dataclass(frozen=True, slots=True)
class Exposure:
    """What a run needs for one switch's mistake to show.

    A fault window of one of ``kinds`` that hits a node of one of ``roles`` (the holder is a
    ``worker``), longer than the lease TTL when ``past_lease``, under one of ``workloads`` (any
    when empty). ``nemeses`` and ``targets`` are what ``run`` picks when no fault was named.
    """

    kinds: frozenset[str]
    roles: frozenset[str]
    past_lease: bool = True
    workloads: frozenset[str] = frozenset()
    nemeses: tuple[str, ...] = ("pause",)
    targets: tuple[str, ...] = (HOLDER,)


_HOLDER_STOP: Final = Exposure(_STOPS, frozenset((_WORKER,)))

EXPOSURES: Final[Mapping[str, Exposure]] = {
    "no-store-check": _HOLDER_STOP,
    "long-ttl-no-fence": _HOLDER_STOP,
    "retry-on-reject": _HOLDER_STOP,
    "epoch-in-memory": Exposure(
        frozenset(("kill",)), frozenset(("lock",)), False, nemeses=("kill",), targets=("lock",)
    ),
    "store-forgets": Exposure(
        frozenset(("restart-while-paused",)),
        frozenset((_WORKER,)),
        nemeses=("restart-while-paused",),
    ),
    "reacquire-no-reread": Exposure(_STOPS, frozenset((_WORKER,)), workloads=frozenset(("rmw",))),
    "unfenced-path": Exposure(_STOPS, frozenset((_WORKER,)), workloads=frozenset(("sinks",))),
    "short-lock-delay": Exposure(_STOPS, frozenset((_WORKER,)), workloads=frozenset(("sinks",))),
}
"""Per bug switch of the reference system: the run shape that makes its mistake visible."""


def exposing_faults(bugs: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """``(nemeses, targets)`` that expose every listed switch of ``bugs``; ``None`` when no
    switch is listed (the caller keeps its default) or they need different faults."""
    needs = {(EXPOSURES[bug].nemeses, EXPOSURES[bug].targets) for bug in bugs if bug in EXPOSURES}
    return needs.pop() if len(needs) == 1 else None


def unexposed(spec: TestSpec, schedule: Schedule, roles: Mapping[str, str]) -> str | None:
    """Why ``spec`` (with its generated ``schedule``) cannot expose one of its bug switches,
    with the fix, or ``None`` when every listed switch can show. Faults asked for of which none
    fits in the run are refused too: such a run would test nothing it claims to."""
    if spec.nemeses and not schedule.windows:
        return (
            f"--nemesis {','.join(spec.nemeses)} schedules no fault at all in this run "
            "(the shortest fault length x TTL does not fit in --time-limit); "
            "lengthen --time-limit or shorten --fault-lengths"
        )
    for bug in spec.bugs:
        need = EXPOSURES.get(bug)
        if need is None:
            continue
        problem = _shortfall(need, spec, schedule, roles)
        if problem is not None:
            return f"--bug {bug} cannot show in this run: {problem}"
    return None


def _shortfall(
    need: Exposure, spec: TestSpec, schedule: Schedule, roles: Mapping[str, str]
) -> str | None:
    if need.workloads and spec.workload not in need.workloads:
        choice = " or ".join(sorted(need.workloads))
        return (
            f"workload {spec.workload!r} never takes the path it breaks; "
            f"run it with --workload {choice}"
        )
    suggested = f"--nemesis {','.join(need.nemeses)} --target {','.join(need.targets)}"
    if not schedule.windows:
        return (
            "the fault schedule is empty (no fault fits in --time-limit, or --nemesis none); "
            f"lengthen --time-limit or shorten --fault-lengths, with {suggested}"
        )
    kinds = [w for w in schedule.windows if w.kind in need.kinds]
    if not kinds:
        return f"no {' / '.join(sorted(need.kinds))} fault is scheduled; run it with {suggested}"
    hits = [w for w in kinds if need.roles & {_role(t, roles) for t in w.targets}]
    if not hits:
        return (
            f"no fault hits a {' or '.join(sorted(need.roles))} node; "
            f"run it with --target {','.join(need.targets)}"
        )
    if need.past_lease and not any(w.duration_ns > schedule.lease_ttl_ns for w in hits):
        return (
            "no scheduled fault outlasts the lease TTL; "
            "give a fault length above 1 TTL (e.g. --fault-lengths 3) and a --time-limit it fits in"
        )
    return None


def _role(target: str, roles: Mapping[str, str]) -> str:
    return _WORKER if target == HOLDER else roles.get(target, target)
