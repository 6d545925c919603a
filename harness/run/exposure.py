"""Can this run expose the mistakes it plants? Decided from each switch's ``exposed_by`` data
(:class:`systems.Exposure`), before any container starts.

A run that plants ``unfenced-path`` but never writes to ``store-batch``, or plants
``epoch-in-memory`` but never restarts the lock service, would end ``valid`` and read as "the
harness found nothing", which is a false verdict about the harness itself (docs/design.md §10).
So ``run`` refuses such a spec with the fix (:func:`unexposed`) unless it is asked for as a
control run (``--control``: it goes ahead, warned, and its verdict says why the bug could not
show, :func:`unshown`), picks the exposing faults when
none were asked for, with every other field of the exposure the user did not set
(:func:`exposure_fields`), and ``--expose`` takes the whole shape from the switch even over the
options given (:func:`expose`). Which spec fields an exposure may set is the spec-field table's
(:data:`harness.record.spec.SPEC_FIELDS`, ``exposable``); :class:`~systems.Exposure` has one
field for each (:data:`EXPOSURE_NAMES` maps the two named differently).

How an :class:`~systems.Exposure` is read: a plain stop (a kind whose entry says it
``stops_holder`` and is not a compound: pause, freeze, throttle, partition) can stand in for
another, since any of them keeps a holder from renewing, and a stop must outlast the
lease; a kill need not. Its ``workload`` is required unless it is ``append``, the path every
workload shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields, replace
from typing import Any, Final

from harness.record.schedule import group_of
from harness.record.spec import SPEC_FIELDS, TestSpec
from nemeses import (
    HOLDER,
    HOLDER_MEMBER,
    KINDS,
    LOCK_FOLLOWER,
    LOCK_LEADER,
    WAITER,
    Schedule,
    Window,
)
from nemeses.schedule import OVERLAPS
from systems import HOLDER_FLAWS, BugSwitch, Exposure, PlantsBugs, System, load_system

__all__ = [
    "EXPOSABLE",
    "EXPOSURE_NAMES",
    "ExposureError",
    "Need",
    "expose",
    "exposure_fields",
    "exposure_values",
    "need_of",
    "planted_fields",
    "planted_with",
    "switches_of",
    "unexposed",
    "unshown",
]

_STOPS: Final = frozenset(name for name, kind in KINDS.items() if kind.stops_holder)
"""Faults that keep a holder from renewing past its lease while it still means to write (each
kind's entry says: :attr:`nemeses.FaultKind.stops_holder`)."""
_PLAIN_STOPS: Final = frozenset(name for name in _STOPS if not KINDS[name].parts)
"""The stops that are one fault, not a compound: any of them can stand in for another."""
_ANY_WORKLOAD: Final = "append"
_WORKER: Final = "worker"
EXPOSABLE: Final = tuple(name for name, field in SPEC_FIELDS.items() if field.exposable)
"""The spec fields an :class:`~systems.Exposure` may set, in the table's order."""
EXPOSURE_NAMES: Final = {"nemeses": "faults", "fault_lengths": "ttl_multiples"}
"""The spec fields whose :class:`~systems.Exposure` field has another name."""
_UNSET: Final = {f.name: f.default for f in fields(Exposure) if f.default is not MISSING}
"""An exposure's field at its default sets nothing (0: the run's own)."""
_FAULTS: Final = ("nemeses", "targets")
"""Set together: targets are where *those* faults must hit."""
_AT_LEAST: Final = frozenset(("int", "float", "duration"))
"""``--expose`` raises these to the exposure's value, keeping a larger one asked for."""


class ExposureError(ValueError):
    """The spec plants nothing whose exposure is known; the message says what to pass."""


@dataclass(frozen=True, slots=True)
class Need:
    """What a run must contain for one switch's mistake to show: a fault of one of ``kinds``
    hitting a node of one of ``roles``, longer than the lease when ``past_lease``, under one of
    ``workloads`` (any when empty), with at least ``locks`` locks."""

    kinds: frozenset[str]
    roles: frozenset[str]
    past_lease: bool
    workloads: frozenset[str]
    locks: int = 1


def switches_of(system: System) -> dict[str, BugSwitch]:
    """Every mistake a run of ``system`` can plant: the harness's holder flaws and its switches."""
    switches: dict[str, BugSwitch] = dict(HOLDER_FLAWS)
    if isinstance(system, PlantsBugs):
        switches.update(system.bug_switches())
    return switches


def need_of(how: Exposure) -> Need:
    """What a run needs for an exposure (see the module documentation)."""
    faults = frozenset(how.faults)
    kinds = _STOPS if faults <= _PLAIN_STOPS else faults
    roles = frozenset(_role(target, {}) for target in how.targets)
    workloads = frozenset() if how.workload == _ANY_WORKLOAD else frozenset((how.workload,))
    return Need(kinds, roles, bool(faults & _STOPS), workloads, how.locks)


def exposure_values(how: Exposure) -> dict[str, Any]:
    """The spec fields ``how`` sets, by spec field name: its faults and targets, and each other
    exposable field it gives a value other than its default."""
    values: dict[str, Any] = {}
    for name in EXPOSABLE:
        attr = EXPOSURE_NAMES.get(name, name)
        value = getattr(how, attr)
        if name in _FAULTS or value != _UNSET.get(attr):
            values[name] = value
    return values


def exposure_fields(switches: Mapping[str, BugSwitch], bugs: Iterable[str]) -> dict[str, Any]:
    """The spec fields the exposures of the planted ``bugs`` agree on (faults and targets only
    together); empty when none is planted. ``run --bug`` and a matrix row apply them to every
    field not given."""
    planted = [exposure_values(switches[bug].exposed_by) for bug in bugs if bug in switches]
    if not planted:
        return {}
    first, *others = planted
    agreed = {k: v for k, v in first.items() if all(k in o and o[k] == v for o in others)}
    if not all(name in agreed for name in _FAULTS):
        agreed = {k: v for k, v in agreed.items() if k not in _FAULTS}
    return agreed


def planted_with(switches: Mapping[str, BugSwitch], bugs: Iterable[str]) -> tuple[str, ...]:
    """``bugs`` and the switches each needs beside it (:attr:`~systems.BugSwitch.beside`), in
    order, each once: what ``run --bug`` and a matrix row plant."""
    chosen = list(bugs)
    companions = [c for bug in chosen if bug in switches for c in switches[bug].beside]
    return tuple(dict.fromkeys((*chosen, *companions)))


def planted_fields(system: str, bugs: Sequence[str]) -> dict[str, Any]:
    """What planting ``bugs`` in the system named ``system`` sets: ``bugs`` with the switches
    they need beside them (:func:`planted_with`) and the spec fields their exposures agree on
    (:func:`exposure_fields`); nothing when none is planted or the system cannot be loaded (the
    runner names it). ``run --bug`` and a matrix row apply it."""
    if not bugs:
        return {}
    try:
        switches = switches_of(load_system(system))
    except (LookupError, ValueError):
        return {}
    planted = planted_with(switches, bugs)
    return {**exposure_fields(switches, planted), "bugs": planted}


def expose(spec: TestSpec, system: System | None = None) -> TestSpec:
    """``spec`` shaped by the ``exposed_by`` of its first planted bug switch or holder flaw
    (``--expose``): every field the exposure sets, numbers raised to at least its value (a
    larger one asked for is kept), the others replaced."""
    if not spec.bugs:
        raise ExposureError("--expose needs a planted mistake: pass --bug NAME")
    switches = switches_of(system or load_system(spec.system))
    first = spec.bugs[0]
    if first not in switches:
        raise ExposureError(
            f"{first!r} is neither a bug switch of {spec.system!r} nor a holder flaw; "
            "see `fencecheck list`"
        )
    values = exposure_values(switches[first].exposed_by)
    for name, value in values.items():
        if SPEC_FIELDS[name].kind in _AT_LEAST:
            values[name] = max(getattr(spec, name), value)
    return replace(spec, **values)


def unexposed(
    spec: TestSpec,
    schedule: Schedule,
    roles: Mapping[str, str],
    switches: Mapping[str, BugSwitch],
) -> str | None:
    """Why ``spec`` (with its generated ``schedule``) is refused, with the fix, or ``None``: one
    of its planted switches cannot show (:func:`unshown`), unless it is a control run
    (``spec.control``), which is refused instead when every one can show. Faults asked for of
    which none fits in the run are refused too, control or not: such a run would test nothing
    it claims to."""
    if spec.nemeses and not schedule.windows:
        return (
            f"--nemesis {','.join(spec.nemeses)} schedules no fault at all in this run "
            "(the shortest fault length x TTL does not fit in --time-limit); "
            "lengthen --time-limit or shorten --fault-lengths"
        )
    shortfall = unshown(spec, schedule, roles, switches)
    if not spec.control:
        return shortfall and f"{shortfall} (--control runs it anyway, as a control)"
    if shortfall is None:
        # A run labelled a control that could have shown the bug would misread either way.
        planted = "this run can show every bug it plants" if spec.bugs else "it plants none"
        return (
            f"--control is for a run that cannot show a planted --bug, but {planted}; "
            "drop --control"
        )
    return None


def unshown(
    spec: TestSpec,
    schedule: Schedule,
    roles: Mapping[str, str],
    switches: Mapping[str, BugSwitch],
) -> str | None:
    """Why one of the switches ``spec`` plants cannot show with ``schedule``, with the fix
    (``--bug X cannot show in this run: ...``), or ``None`` when every one can: the refusal of
    a run, and the reason a control run carries."""
    for bug in spec.bugs:
        switch = switches.get(bug)
        if switch is None:
            continue
        missing = [name for name in switch.beside if name not in spec.bugs]
        if missing:
            return (
                f"--bug {bug} cannot show in this run: it shows only beside "
                f"{', '.join(missing)}; plant both (--bug {','.join((bug, *missing))})"
            )
        problem = _shortfall(switch.exposed_by, spec, schedule, roles)
        if problem is not None:
            return f"--bug {bug} cannot show in this run: {problem}"
    return None


def _shortfall(
    how: Exposure, spec: TestSpec, schedule: Schedule, roles: Mapping[str, str]
) -> str | None:
    need = need_of(how)
    if need.workloads and spec.workload not in need.workloads:
        choice = " or ".join(sorted(need.workloads))
        return (
            f"workload {spec.workload!r} never takes the path it breaks; "
            f"run it with --workload {choice}"
        )
    if spec.locks < need.locks:
        return f"its mistake shows only with several locks; run it with --locks {need.locks}"
    suggested = f"--nemesis {','.join(how.faults)} --target {','.join(how.targets)}"
    if not schedule.windows:
        return (
            "the fault schedule is empty (no fault fits in --time-limit, or --nemesis none); "
            f"lengthen --time-limit or shorten --fault-lengths, with {suggested}"
        )
    kinds = [
        w
        for w in schedule.windows
        if w.kind in need.kinds or need.kinds & _compounds_of(w, schedule)
    ]
    if not kinds:
        return f"no {' / '.join(sorted(need.kinds))} fault is scheduled; run it with {suggested}"
    # An exposure may name a node (redis's replica r2) as well as a role.
    hits = [w for w in kinds if need.roles & {*w.targets, *(_role(t, roles) for t in w.targets)}]
    if not hits:
        return (
            f"no fault hits a {' or '.join(sorted(need.roles))} node; "
            f"run it with --target {','.join(how.targets)}"
        )
    if need.past_lease and not any(_span_ns(w, schedule) > schedule.lease_ttl_ns for w in hits):
        return (
            "no scheduled fault outlasts the lease TTL; "
            "give a fault length above 1 TTL (e.g. --fault-lengths 3) and a --time-limit it fits in"
        )
    return None


def _span_ns(window: Window, schedule: Schedule) -> int:
    """How long ``window`` holds a holder stopped: its own length, or for an overlay (a power
    loss at the takeover inside a holder's pause) its base's when that is longer."""
    bases = [w.duration_ns for w in schedule.windows if w.index == window.params.get(OVERLAPS)]
    return max([window.duration_ns, *bases])


def _compounds_of(window: Window, schedule: Schedule) -> frozenset[str]:
    """The compound kinds ``window`` plays as the first part of, overlapped by (or overlapping)
    a window of the compound's other part (the registry's ``parts``): a holder pause with a
    store kill on it stands for ``restart-while-paused``."""
    partners = {
        other.kind
        for other in schedule.windows
        if other.params.get(OVERLAPS) == window.index
        or (OVERLAPS in window.params and other.index == window.params[OVERLAPS])
    }
    return frozenset(
        kind.name
        for kind in KINDS.values()
        if len(kind.parts) == 2 and kind.parts[0] == window.kind and kind.parts[1] in partners
    )


def _role(target: str, roles: Mapping[str, str]) -> str:
    """The role a target selector hits: a symbol's, a node's, or the role it names."""
    if target in (HOLDER, WAITER):
        return _WORKER
    if target in (LOCK_LEADER, LOCK_FOLLOWER, HOLDER_MEMBER):
        return "lock"
    grouped = group_of(target)
    if grouped is not None:
        return grouped[0]
    return roles.get(target, target)
