"""Planning a run: every check that can be made before a container starts.

:func:`plan_run` loads the system once, builds its config, works out the nodes, the inventory,
the one lease TTL the holders use and the fault schedule, and refuses a spec that could not run
or could not expose what it plants (:class:`RunError`, with the fix). Nothing is started and no
folder is made until a :class:`Plan` exists; the runner (:mod:`harness.run.runner`) then carries
it out and :mod:`harness.run.judge` judges what was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.node.docker.cluster import ClusterError, NodeSpec
from harness.node.ssh import HostsFile
from harness.run.exposure import switches_of, unexposed
from harness.run.spec import SpecError, TestSpec
from harness.run.store import StoreError, check_store, store_problem
from nemeses import (
    DEFAULT_TTL_MULTIPLES,
    HOLDER_MEMBER,
    KINDS,
    LOCK_FOLLOWER,
    LOCK_LEADER,
    Schedule,
    generate_schedule,
)
from systems import (
    CLOCK_KINDS,
    DISK_KINDS,
    HOLDER_FLAWS,
    AdapterError,
    KnowsClientMember,
    KnowsLeader,
    PlantsBugs,
    Sink,
    System,
    SystemConfig,
    WritesSpanKeys,
    clock_problem,
    disk_problem,
    durability_problem,
    lease_ttl_of,
    load_system,
    replay_problem,
    topology,
)
from systems.holder_flaws import REACQUIRE_NO_REREAD, RETRY_ON_REJECT
from workloads import HolderFlaws, Workload, WorkloadOptions, get_workload

__all__ = ["Plan", "RunError", "plan_run", "schedule_for", "spec_problem", "workload_options"]


class RunError(RuntimeError):
    """The run could not be carried out (bad spec, broken environment); the message says why."""


@dataclass(frozen=True)
class Plan:
    """A run that can be carried out: the loaded system and workload, the system's config, the
    nodes and their roles, the inventory, the lease TTL the holders use, and the fault schedule
    (``fixed``: given, a replay's or a shrink candidate's, not drawn from the seed)."""

    spec: TestSpec
    system: System
    workload: Workload
    config: SystemConfig
    nodes: list[NodeSpec]
    inventory: tuple[Sink, ...]
    ttl: float
    schedule: Schedule
    fixed: bool


def plan_run(
    spec: TestSpec, hosts: HostsFile | None = None, schedule: Schedule | None = None
) -> Plan:
    """Check ``spec`` against its system and plan its run (see the module documentation);
    ``schedule``, when given, is played instead of the seed's. Raises :class:`RunError`."""
    try:
        spec.check()
    except SpecError as problem:
        raise RunError(str(problem)) from None
    system = _load(spec)
    workload = get_workload(spec.workload)
    config = SystemConfig(
        lease_ttl=spec.ttl,
        lock_delay=spec.lock_delay,
        bugs=frozenset(b for b in spec.bugs if b not in HOLDER_FLAWS),
        clocked=bool(set(CLOCK_KINDS) & set(spec.nemeses)),
        lazy_disks=bool(set(DISK_KINDS) & set(spec.nemeses)),
    )
    try:
        if isinstance(system, PlantsBugs):
            system.validate(config)
        nodes = _topology(spec, system, hosts)
        inventory = system.inventory(config)
    except (ValueError, AdapterError) as problem:
        raise RunError(str(problem)) from None
    if spec.workload != "sinks" and not any(sink.fenced for sink in inventory):
        raise RunError(
            f"system {spec.system!r} declares no fenced sink, and the {spec.workload} workload "
            "writes to the inventory's first fenced sink; use --workload sinks"
        )
    _check_spanning(spec, system, inventory)
    too_much = spec.final_reads_problem(
        len(workload.final_read_sinks(workload_options(spec, inventory)))
    )
    if too_much is not None:
        raise RunError(too_much)
    roles = {node.name: node.role for node in nodes}
    ttl = lease_ttl_of(system, config)
    fixed = schedule is not None
    schedule = schedule if schedule is not None else schedule_for(spec, roles, ttl)
    shortfall = unexposed(spec, schedule, roles, switches_of(system))
    if shortfall is not None:
        raise RunError(shortfall)
    try:
        check_store(spec.store, spec.test_name)
    except StoreError as problem:
        raise RunError(str(problem)) from None
    return Plan(spec, system, workload, config, nodes, tuple(inventory), ttl, schedule, fixed)


def spec_problem(spec: TestSpec) -> str | None:
    """Why ``spec`` cannot run (a bad field, an unknown system, workload or bug switch, a target
    or fault its system cannot take, a store that cannot be written), found without starting
    or creating anything, as ``run-all --dry-run`` asks; ``None`` when none is known."""
    try:
        spec.check()
        _load(spec)
    except (SpecError, RunError) as problem:
        return str(problem)
    return store_problem(spec.store)


def _topology(spec: TestSpec, system: System, hosts: HostsFile | None) -> list[NodeSpec]:
    """The nodes and roles of the run: the hosts file's, or those the system's roles ask for."""
    if hosts is None:
        return [NodeSpec(name, role) for name, role in topology(system.roles(), spec.workers)]
    try:
        return [NodeSpec(name, role) for name, role in hosts.roles().items()]
    except ClusterError as problem:
        raise RunError(f"{hosts.path}: {problem}") from None


def _load(spec: TestSpec) -> System:
    try:
        system = load_system(spec.system)
        get_workload(spec.workload)
    except (LookupError, ValueError) as problem:
        raise RunError(str(problem).strip("'\"")) from None
    switches = set(system.bug_switches()) if isinstance(system, PlantsBugs) else set()
    unknown = sorted(set(spec.bugs) - switches - set(HOLDER_FLAWS))
    if unknown:
        raise RunError(
            f"unknown bug switch(es) {', '.join(unknown)} for system {spec.system!r}; choose "
            f"from {', '.join(sorted(switches)) or 'none'} or the holder flaws "
            f"{', '.join(HOLDER_FLAWS)} (see `fencecheck list`)"
        )
    for symbol in (LOCK_LEADER, LOCK_FOLLOWER):
        if symbol in spec.targets and not isinstance(system, KnowsLeader):
            raise RunError(
                f"system {spec.system!r} cannot say which lock-service member leads, so faults "
                f"cannot target {symbol}; target lock or a node name instead"
            )
    if HOLDER_MEMBER in spec.targets and not isinstance(system, KnowsClientMember):
        raise RunError(
            f"system {spec.system!r} cannot say which lock-service member a holder's client "
            f"talks to, so faults cannot target {HOLDER_MEMBER}; target lock or a node name instead"
        )
    for refusal in (
        # An unknown kind is refused with the kinds listed when the schedule is drawn.
        durability_problem(
            system, {k: KINDS[k].kills for k in spec.nemeses if k in KINDS}, spec.targets
        ),
        clock_problem(system, spec.nemeses, spec.targets),
        replay_problem(system, spec.nemeses),
        disk_problem(system, spec.nemeses),
    ):
        if refusal is not None:
            raise RunError(refusal)
    return system


def schedule_for(
    spec: TestSpec,
    roles: Mapping[str, str],
    ttl: float,
    processes: Mapping[str, str] | None = None,
) -> Schedule:
    """The seeded fault schedule; ``processes`` (role -> daemon) is known once the system runs,
    and the same seed draws the same windows with or without it."""
    duration = round(spec.time_limit * 1e9)
    ttl_ns = round(ttl * 1e9)
    if not spec.nemeses:
        return Schedule(spec.seed, ttl_ns, duration, ())
    try:
        return generate_schedule(
            spec.seed,
            roles,
            lease_ttl_ns=ttl_ns,
            duration_ns=duration,
            kinds=spec.nemeses,
            targets=spec.targets,
            processes=processes,
            ttl_multiples=spec.fault_lengths or DEFAULT_TTL_MULTIPLES,
            overlap=spec.overlap,
        )
    except (ValueError, RuntimeError) as problem:
        raise RunError(str(problem)) from None


def _check_spanning(spec: TestSpec, system: System, inventory: Sequence[Sink]) -> None:
    """Refuse writes spanning keys that the system's sink (the first fenced one) cannot take."""
    if spec.keys_per_write == 1:
        return
    sink = next(s.name for s in inventory if s.fenced)
    if not isinstance(system, WritesSpanKeys) or sink not in system.spanning_sinks():
        raise RunError(
            f"system {spec.system!r} cannot write several keys of its sink {sink!r} at once, "
            f"so --keys-per-write {spec.keys_per_write} cannot run; use --keys-per-write 1 or "
            "--system reference"
        )


def workload_options(spec: TestSpec, inventory: Sequence[Sink]) -> WorkloadOptions:
    flaws = HolderFlaws(
        retry_on_reject=RETRY_ON_REJECT in spec.bugs,
        reacquire_no_reread=REACQUIRE_NO_REREAD in spec.bugs,
    )
    return WorkloadOptions(
        keys=spec.keys,
        locks=spec.locks,
        writes_per_lease=spec.writes_per_lease,
        keys_per_write=spec.keys_per_write,
        read_ratio=spec.read_ratio,
        rate=spec.rate,
        fenced_sinks=tuple(s.name for s in inventory if s.fenced),
        all_sinks=tuple(s.name for s in inventory),
        flaws=flaws,
    )
