"""Planning a run: every check that can be made before a container starts.

:func:`plan_run` loads the system once, builds its config, works out the nodes, the inventory,
the one lease TTL the holders use and the fault schedule, and refuses a spec that could not run
or could not expose what it plants (:class:`RunError`, with the fix). Nothing is started and no
folder is made until a :class:`Plan` exists; the runner (:mod:`harness.run.runner`) then carries
it out and :mod:`harness.run.judge` judges what was recorded.
"""

from __future__ import annotations

import contextlib
import platform
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version

from harness.node.docker.cluster import ClusterError, NodeSpec
from harness.node.ssh import HostsFile
from harness.record.run_record import NodeEntry, RunRecord
from harness.record.spec import SPEC_FIELDS, SpecError, TestSpec
from harness.run.exposure import switches_of, unexposed, unshown
from harness.run.proxies import proxied
from harness.run.store import RunDir, StoreError, check_store, store_problem
from nemeses import (
    DEFAULT_TTL_MULTIPLES,
    HOLDER_MEMBER,
    KINDS,
    LOCK_FOLLOWER,
    LOCK_LEADER,
    FaultKind,
    Schedule,
    generate_schedule,
    playable,
)
from systems import (
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
    records_of,
    replay_problem,
    topology,
)
from systems.holder_flaws import REACQUIRE_NO_REREAD, RETRY_ON_REJECT
from workloads import HolderFlaws, Workload, WorkloadOptions, get_workload

__all__ = [
    "Plan",
    "RunError",
    "op_timeout_for",
    "plan_run",
    "rerun_command",
    "schedule_for",
    "spec_problem",
    "workload_options",
]


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
    unexposed: str | None = None
    """A control run's (``--control``) reason its planted bug cannot show (:func:`unshown`)."""

    @property
    def through_proxy(self) -> bool:
        """True when the holders' traffic goes through the write-path proxy: asked for
        (``--proxy``) or needed by a proxy fault kind."""
        return self.spec.proxy or proxied(self.spec.nemeses)

    def record(self, run_id: str, run_dir: RunDir, command: Sequence[str] | None) -> RunRecord:
        """The run's first ``test.json``: the spec, the planned TTL, schedule, inventory and
        nodes, the versions, and the command that reruns it (``command`` when the caller ran
        one, else :func:`rerun_command`), not finished yet."""
        rerun = command or rerun_command(self.spec, run_dir if self.fixed else None)
        return RunRecord(
            spec=self.spec,
            run_id=run_id,
            started=datetime.now(UTC).isoformat(),
            command=shlex.join(rerun),
            lease_ttl=self.ttl,
            schedule=self.schedule,
            inventory=self.inventory,
            topology=tuple(NodeEntry(node.name, node.role) for node in self.nodes),
            versions=_versions(),
            finished=False,
            unexposed=self.unexposed,
        )

    def final_schedule(
        self, roles: Mapping[str, str], lease_ttl: float, processes: Mapping[str, str]
    ) -> Schedule:
        """The schedule played once the system runs: a given one as it is (a replay's already
        names the daemons its faults aim at), else the seed's drawn again with the daemons
        (``processes``, role -> daemon) and the TTL the deployment reports; the same seed draws
        the same windows."""
        if self.fixed:
            return self.schedule
        return schedule_for(self.spec, roles, lease_ttl, processes, records_of(self.system))


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
        clocked=bool(_with(spec, lambda kind: kind.moves_clock)),
        lazy_disks=bool(_with(spec, lambda kind: kind.needs_disk)),
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
    # A recorded schedule may hold a kind that is played as others today (a history from before
    # restart-while-paused was a pause and a kill): it plays as that pair, as a new draw would.
    if schedule is not None:
        schedule = playable(schedule)
    else:
        schedule = schedule_for(spec, roles, ttl, records=records_of(system))
    switches = switches_of(system)
    shortfall = unexposed(spec, schedule, roles, switches)
    if shortfall is not None:
        raise RunError(shortfall)
    try:
        check_store(spec.store, spec.test_name)
    except StoreError as problem:
        raise RunError(str(problem)) from None
    unexposed_bug = unshown(spec, schedule, roles, switches) if spec.control else None
    return Plan(
        spec, system, workload, config, nodes, tuple(inventory), ttl, schedule, fixed, unexposed_bug
    )


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
        clock_problem(system, _with(spec, lambda kind: kind.moves_clock), spec.targets),
        replay_problem(system, _with(spec, lambda kind: kind.needs_framing)),
        disk_problem(system, _with(spec, lambda kind: kind.needs_disk)),
    ):
        if refusal is not None:
            raise RunError(refusal)
    return system


def _with(spec: TestSpec, fact: Callable[[FaultKind], bool]) -> tuple[str, ...]:
    """The run's fault kinds whose registry entries state ``fact``: what the systems' checks
    and :class:`SystemConfig` get, so that they need no table of kind names (a kind not in the
    registry is refused with the kinds listed when the schedule is drawn)."""
    return tuple(kind for kind in spec.nemeses if kind in KINDS and fact(KINDS[kind]))


def schedule_for(
    spec: TestSpec,
    roles: Mapping[str, str],
    ttl: float,
    processes: Mapping[str, str] | None = None,
    records: Mapping[str, str] | None = None,
) -> Schedule:
    """The seeded fault schedule; ``processes`` (role -> daemon) is known once the system runs,
    and the same seed draws the same windows with or without it; ``records`` (role -> the
    symbolic target of its node of record, :func:`systems.records_of`) aims a holder's power
    loss."""
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
            records=records,
            topologies=spec.partitions,
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


def op_timeout_for(spec: TestSpec, schedule: Schedule, lease_ttl: float) -> float:
    """How long an operation may take before it is recorded as unknown: ``--op-timeout``, or
    longer than any fault of ``schedule``, so a refusal after a fault is seen as such."""
    if spec.op_timeout:
        return spec.op_timeout
    longest = max((w.duration_ns for w in schedule.windows), default=0) / 1e9
    return longest + 2 * lease_ttl + 2.0


def rerun_command(spec: TestSpec, fixed_in: RunDir | None = None) -> list[str]:
    """The command that runs ``spec`` again exactly: its seed and every field that differs from
    the defaults or that says what the run is (the spec-field table's ``pinned`` ones, and with
    a bug planted its ``exposable`` ones). A run that played a fixed schedule (``fixed_in``: its
    own folder, where ``test.json`` keeps the windows) is rerun by ``replay``, since a seed alone
    would draw another schedule."""
    if fixed_in is not None:
        return ["fencecheck", "replay", str(fixed_in.path)]
    argv = ["fencecheck", "run"]
    for name, spec_field in SPEC_FIELDS.items():
        value = getattr(spec, name)
        # With a bug planted an exposable field is named even at its default: else the bug's
        # exposure would set it on the rerun.
        named = spec_field.pinned or (spec_field.exposable and bool(spec.bugs))
        if named or value != spec_field.default:
            argv += spec_field.argv(value)
    return argv


def _versions() -> dict[str, str]:
    """What the run was made with: fencecheck's, Python's and the Docker engine's versions."""
    info = {"fencecheck": version("fencecheck"), "python": platform.python_version()}
    with contextlib.suppress(Exception):
        from harness.node.docker.engine import engine

        info["docker_engine"] = str(engine().version().get("Version", "?"))
    return info
