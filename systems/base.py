"""The system adapter contract: how a system under test is described, set up and torn down.

An adapter packages a lock service and its sinks (docs/design.md §2). **Required** of every system
(:class:`System`): its name and a one-line description, the nodes it needs (:meth:`System.roles`,
which names them: ``e1..e3`` lock-service members, ``s1``, ``w1..``), the write-path inventory
(:meth:`System.inventory`: which sinks exist and how each is protected), :meth:`System.setup`
(install and start the system, return the holder client the harness ships to the workers) and
:meth:`System.teardown`. The harness itself starts an agent on every worker; an adapter never does.

**Optional** abilities are small protocols, checked with ``isinstance``, each one used by the
harness:

- :class:`Restarts`: start one of the system's daemons again after the kill nemesis killed it
  (same command line, same data: the restart model of docs/design.md §7). Without it the kill
  nemesis relaunches the daemon's recorded command line itself and does not wait for readiness.
- :class:`CollectsData`: files worth saving with the run (epoch files, logs of writes).
- :class:`PlantsBugs`: bug switches, mistakes planted on purpose (see :class:`BugSwitch`).
- :class:`KnowsLeader`: which lock-service member leads, for the ``lock-leader`` and
  ``lock-follower`` fault targets.
- :class:`KnowsClientMember`: which member a worker's client talks to, for ``holder-member``.
- :class:`NeedsPackages`: Debian packages its nodes need beyond the base node image.
- :class:`Volatile`: roles whose daemons keep their state in memory only (a system built to
  measure the harness, not to survive a crash); runs that would kill them are refused
  (:func:`durability_problem`).
- :class:`WritesSpanKeys`: sinks that take one write across several keys atomically.
- :class:`FramesRequests`: where the holder client's requests end and which are writes, so that
  the ``replay`` fault can send one again; a run that asks for replay without it is refused
  (:func:`replay_problem`).
- :class:`TakesClockFaults`: which of its daemons run under libfaketime (started with
  :func:`systems.deploy.start_clocked`), so that ``clock-step`` and ``clock-rate`` can move their
  clocks, and why the others cannot; a run that aims a clock fault at one that cannot is refused
  (:func:`clock_problem`). The harness's agents always can.
- :class:`TakesDiskFaults`: where each role's daemons keep their data, so that a run with a disk
  fault kind (one whose registry entry ``needs_disk``: power loss, full disk, failing or slow
  fsync) mounts the lazy
  file system there (:func:`systems.deploy.data_dir`); a run with one on a system without it is
  refused (:func:`disk_problem`).
- :class:`KeepsRecord`: a role whose data of record is on one node a symbolic target names when a
  fault starts (Redis's primary, ``lock-leader``), so that a power loss or a disk fault aimed at
  the holder lands there instead of on a node drawn among the role's (:func:`records_of`).

Holder-side flaws (``retry-on-reject``, ``reacquire-no-reread``) are not a system's: they are the
harness's, available with every system (:mod:`systems.holder_flaws`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, Final, Protocol, runtime_checkable

from harness.node import Daemon, Node

# One mitigation vocabulary for what adapters declare and what the checkers judge.
from harness.record import MITIGATIONS, Mitigation, Sink
from harness.record.schedule import DEFAULT_OVERLAP, TOPOLOGIES, group_of

__all__ = [
    "CONTRACT",
    "MITIGATIONS",
    "PAUSE_PAST_LEASE",
    "ROLE_NAMES",
    "AdapterError",
    "BugSwitch",
    "ChecksReady",
    "CollectsData",
    "ConfigError",
    "Deployment",
    "Exposure",
    "FramesRequests",
    "HolderClientCode",
    "KeepsRecord",
    "KnowsClientMember",
    "KnowsLeader",
    "Mitigation",
    "NeedsPackages",
    "PlantsBugs",
    "ProcessTarget",
    "Restarts",
    "RoleSpec",
    "Sink",
    "System",
    "SystemConfig",
    "TakesClockFaults",
    "TakesDiskFaults",
    "Volatile",
    "WritesSpanKeys",
    "check_bugs",
    "check_roles",
    "clock_problem",
    "disk_problem",
    "durability_problem",
    "lease_ttl_of",
    "nodes_with_role",
    "packages_of",
    "read_packages",
    "records_of",
    "replay_problem",
    "switch_table",
    "topology",
]

CONTRACT: Final = 2
"""The adapter contract version this fencecheck implements. An adapter says which version it was
written for with a class attribute of its own, ``CONTRACT = 2`` (written out, not imported);
:func:`systems.registry.load_system` refuses a mismatch with what changed (CHANGELOG.md)."""

ROLE_NAMES: Final = ("lock", "store", "worker")
"""The roles a node may have: a lock-service member, a sink's server, a lock holder."""


class AdapterError(RuntimeError):
    """Setting a system up, restarting or tearing it down failed; the message says where and why."""


class ConfigError(AdapterError, ValueError):
    """A system configuration the adapter cannot run; the message names the field and the fix."""


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """The nodes of one role: ``count`` of them, named ``prefix1``, ``prefix2``...

    For ``worker`` the count is a minimum (a run may ask for more); for the other roles it is
    exact. A system whose lock service is also its store names only ``lock`` nodes.
    """

    count: int
    prefix: str

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ConfigError(f"a role needs 0 or more nodes, not {self.count}")
        if not self.prefix or not self.prefix[0].isalpha() or not self.prefix.isalnum():
            raise ConfigError(
                f"node name prefix {self.prefix!r} must be letters and digits starting with a "
                "letter (nodes are named prefix1, prefix2...)"
            )


@dataclass(frozen=True, slots=True)
class Exposure:
    """How to make a bug switch visible: the run a mistake needs, one field for each spec field a
    mistake may need (the harness's spec-field table marks them ``exposable``; a test keeps the
    two in step). A field left at its default sets nothing: the run keeps its own value.

    ``faults`` and ``targets``: the fault kinds and where to aim them; ``workload``;
    ``ttl_multiples``: the fault lengths (multiples of the lease TTL, ``--fault-lengths``);
    ``lock_delay`` (seconds); ``keys`` per lock (more than one lease writes, when the mistake
    shows only on a key the new holder has not written, e.g. a mark kept per key); ``locks``
    (several, when it shows only once a lock has been free for a while); ``work_ms``, the
    holder's work per unit (more when its leases must last longer); ``writes_per_lease``, its
    units of work per lease (more when a holder must still hold its lease when the fault ends);
    ``overlap``, the share of fault windows overlapped by a window of another of ``faults``
    (all of them, when the mistake needs two faults at once); ``partitions``, the partition
    topologies (``lock-cut`` when the holder must be cut from the lock service only, so that its
    writes still arrive on time).

    ``run --bug`` applies every field it sets that the command line does not (``--expose``: even
    those); ``fencecheck list`` shows it as a command line.
    """

    faults: tuple[str, ...]
    targets: tuple[str, ...] = ("holder",)
    workload: str = "append"
    ttl_multiples: tuple[float, ...] = ()
    lock_delay: float = 0.0
    keys: int = 0  # 0: the run's own
    locks: int = 1
    work_ms: int = 0  # 0: the run's own
    writes_per_lease: int = 0  # 0: the run's own
    overlap: float = DEFAULT_OVERLAP  # the default: the run's own
    partitions: tuple[str, ...] = TOPOLOGIES  # every one: the run's own
    # A spec field added to the exposable ones gets its field here, named as in the spec.

    def describe(self) -> str:
        """A command-line fragment, e.g. ``--workload sinks --nemesis pause --target holder``."""
        parts = [f"--workload {self.workload}", f"--nemesis {','.join(self.faults)}"]
        parts.append(f"--target {','.join(self.targets)}")
        if self.ttl_multiples:
            parts.append(f"--fault-lengths {','.join(f'{m:g}' for m in self.ttl_multiples)}")
        if self.lock_delay:
            parts.append(f"--lock-delay {self.lock_delay:g}")
        if self.keys:
            parts.append(f"--keys {self.keys}")
        if self.locks > 1:
            parts.append(f"--locks {self.locks}")
        if self.work_ms:
            parts.append(f"--work-ms {self.work_ms}")
        if self.writes_per_lease:
            parts.append(f"--writes-per-lease {self.writes_per_lease}")
        if self.overlap != DEFAULT_OVERLAP:
            parts.append(f"--overlap {self.overlap:g}")
        if self.partitions != TOPOLOGIES:
            parts.append(f"--partitions {','.join(self.partitions)}")
        return " ".join(parts)


PAUSE_PAST_LEASE: Final = Exposure(faults=("pause",), ttl_multiples=(3.0,))
"""Pauses of a holder three lease TTLs long: the usual way to expose a stale holder's write (a
pause shorter than the lease exposes nothing: the holder is still right)."""


@dataclass(frozen=True, slots=True)
class BugSwitch:
    """A mistake an adapter can plant on purpose, how to expose it, and what the checker finds.

    ``anomalies`` are anomaly names of docs/design.md §5, ``sinks`` the sinks they appear on
    (an anomaly of the switch's name elsewhere, at the grants, is not its). ``beside`` names the
    switches it shows only with: a defence that only another's mistake tests (a store that tells
    two holders of one epoch apart, beside a lock service that hands one epoch out twice); ``run
    --bug`` plants them with it.
    """

    name: str
    description: str
    exposed_by: Exposure
    anomalies: tuple[str, ...]
    sinks: tuple[str, ...] = ()
    beside: tuple[str, ...] = ()

    @property
    def anomaly(self) -> str:
        """The expected anomalies in words, e.g. ``stale-write on store, store-batch``."""
        where = f" on {', '.join(self.sinks)}" if self.sinks else ""
        return f"{', '.join(self.anomalies)}{where}"

    def describe(self) -> str:
        """How to expose it as a command-line fragment: its exposure's, and the switches it
        needs beside it (``--bug X,Y``)."""
        beside = f" --bug {','.join((self.name, *self.beside))}" if self.beside else ""
        return self.exposed_by.describe() + beside

    def owns(self, name: str, sink: str | None) -> bool:
        """Whether an anomaly ``name`` found on ``sink`` (``None``: on no sink) is this
        switch's own."""
        return name in self.anomalies and (not self.sinks or sink in self.sinks)


def switch_table(*switches: BugSwitch) -> Mapping[str, BugSwitch]:
    """``switches`` by name, read-only, in their order (what :meth:`PlantsBugs.bug_switches`
    returns). Raises :class:`ConfigError` if two share a name: one would hide the other."""
    table = {switch.name: switch for switch in switches}
    if len(table) < len(switches):
        names = [switch.name for switch in switches]
        twice = sorted({name for name in names if names.count(name) > 1})
        raise ConfigError(f"two bug switches are named {', '.join(twice)}; rename one of each")
    return MappingProxyType(table)


@dataclass(frozen=True, slots=True)
class SystemConfig:
    """What a run asks of the system: lease TTL and lock-delay in seconds, bug switches by name.

    The default is the correct system: no switches. ``secret_file`` is where the harness put the
    run's secret on every node (mode 0600). The contract: every port of the system refuses a
    client without it (daemons built on :mod:`harness.nodeside.wire` take it as
    ``--secret-file``; a system with authentication of its own takes it as a password), and the
    holder client reads it from this file, named in its config, never the secret itself; so
    nothing outside the run can write into it (``adapter check`` tries). ``None`` when no secret
    was installed (programs run by hand).
    """

    lease_ttl: float = 2.0
    lock_delay: float = 0.0
    bugs: frozenset[str] = field(default_factory=frozenset)
    secret_file: str | None = None
    lazy_disks: bool = False
    """Keep each data directory of :class:`TakesDiskFaults` on a lazy file system (a run that asks
    for disk faults; :func:`systems.deploy.data_dir`). Off otherwise: it costs every fsync."""
    clocked: bool = False
    """Start the daemons that can take clock faults under libfaketime (a run that asks for clock
    faults; :func:`systems.deploy.start_clocked`). Off otherwise: a preload costs every clock
    read a file read, and under libfaketime a Python process's timed lock waits never time out
    (measured; see :mod:`harness.nodeside.clock`), which other runs must not pay for."""

    def __post_init__(self) -> None:
        if not self.lease_ttl > 0:
            raise ConfigError(
                f"lease_ttl must be a positive number of seconds, not {self.lease_ttl}"
            )
        if not self.lock_delay >= 0:
            raise ConfigError(f"lock_delay must be >= 0 seconds, not {self.lock_delay}")
        if isinstance(self.bugs, str):
            raise ConfigError("bugs must be a set of switch names, not one string")
        object.__setattr__(self, "bugs", frozenset(self.bugs))


@dataclass(frozen=True, slots=True)
class ProcessTarget:
    """A daemon of the system that faults may pause, kill and restart: ``daemon`` on ``node``."""

    role: str
    node: str
    daemon: str


@dataclass(frozen=True, slots=True)
class HolderClientCode:
    """The holder client the harness ships to every worker: a module defining ``Client(config)``
    (see :class:`harness.nodeside.client.HolderClient`), and its config.

    ``module`` is best given by its dotted name (``"fencecheck_my_lock.client"``): the controller
    then only reads its file and ships it, never imports it, so the client may import what only
    the nodes have (a Debian ``python3-*`` package of the system's package list; the harness
    checks on a worker that every module it imports is there before the agents start). An
    imported module is taken too (contract 2's first form). The module may import
    :mod:`harness.nodeside` (``wire`` and ``client``), which the harness ships beside it;
    ``config`` must be JSON data (addresses of the lock service and sinks...).
    """

    module: ModuleType | str
    config: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Deployment:
    """A system running on a cluster, as :meth:`System.setup` left it.

    ``client`` is what the harness's agents use to reach it; ``targets`` are the system's daemons
    (the pause and kill faults aim at them; a node with none is paused or killed whole);
    ``lease_ttl`` is the TTL the holders use when a switch changes it (else the run's TTL).
    """

    client: HolderClientCode
    targets: tuple[ProcessTarget, ...] = ()
    lease_ttl: float | None = None

    def targets_for(self, role: str) -> tuple[ProcessTarget, ...]:
        """The targets of one role (``lock``, ``store``)."""
        return tuple(target for target in self.targets if target.role == role)


@runtime_checkable
class System(Protocol):
    """A system under test, packaged for fencecheck (the required part of the contract).

    Adapters are found through the entry-point group ``fencecheck.systems`` (see
    :mod:`systems.registry`); the entry point names a zero-argument factory (usually the class).
    The adapter also declares the contract version it was written for as a class attribute,
    ``CONTRACT = 2`` (see :data:`CONTRACT`); the registry checks it before anything else.
    """

    @property
    def name(self) -> str:
        """The adapter's name, as in specs and on the command line."""
        ...

    def describe(self) -> str:
        """One line saying what the system is (shown by ``fencecheck list``)."""
        ...

    def roles(self) -> Mapping[str, RoleSpec]:
        """The nodes it needs, by role (``lock``, ``store``, ``worker``)."""
        ...

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """The write-path inventory under ``config``: what the system *claims* about each sink."""
        ...

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Install and start the system on ``nodes`` (by name) and wait until every part serves.

        Starts from empty data directories. Raises :class:`AdapterError` (or
        :class:`ConfigError`) naming the node and showing the failing process's log.
        """
        ...

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """Stop every process :meth:`setup` started; safe to call after a partial setup."""
        ...


@runtime_checkable
class Restarts(Protocol):
    """A system that can start one of its daemons again after it was killed."""

    def restart(self, node: Node, daemon: str) -> Daemon:
        """Start the killed daemon ``daemon`` of ``node`` again, with the same command line on
        the same data, and return once it serves. Raises :class:`AdapterError` if it cannot."""
        ...


@runtime_checkable
class ChecksReady(Protocol):
    """A system that can tell, by its own readiness check, whether one of its daemons serves
    (not merely listens: a database may accept connections during crash recovery and refuse
    queries), so a fault continues a stale holder the moment a restarted daemon serves."""

    def serves(self, node: Node, daemon: str) -> bool | None:
        """One readiness check of ``daemon`` on ``node``: True once it serves, False while it
        does not, ``None`` when the system has no check for that daemon."""
        ...


@runtime_checkable
class CollectsData(Protocol):
    """A system whose nodes keep state worth saving with the run (epoch files, logs of writes)."""

    def collect(self, nodes: Mapping[str, Node]) -> dict[str, dict[str, bytes]]:
        """Files to keep, as node name -> file name -> contents (missing files left out)."""
        ...


@runtime_checkable
class PlantsBugs(Protocol):
    """A system with bug switches: mistakes it can plant on purpose to prove the harness sees
    them."""

    def bug_switches(self) -> Mapping[str, BugSwitch]:
        """The switches :attr:`SystemConfig.bugs` may name, by name."""
        ...

    def validate(self, config: SystemConfig) -> None:
        """Raise :class:`ConfigError` for a config this system cannot run (before any node)."""
        ...

    def lease_ttl(self, config: SystemConfig) -> float:
        """The lease TTL the holders will actually use under ``config`` (a switch may change it)."""
        ...


@runtime_checkable
class KnowsLeader(Protocol):
    """A system whose lock service has a leader, so faults can aim at ``lock-leader`` and
    ``lock-follower``."""

    def lock_leader(self, nodes: Mapping[str, Node]) -> str | None:
        """The name of the lock-service node that leads now, or ``None`` if none does."""
        ...


@runtime_checkable
class WritesSpanKeys(Protocol):
    """A system some of whose sinks take one write across several keys, all or nothing
    (``--keys-per-write``); its holder client implements
    :class:`harness.nodeside.client.SpansKeys`."""

    def spanning_sinks(self) -> tuple[str, ...]:
        """The sinks that accept a write spanning keys."""
        ...


@runtime_checkable
class KnowsClientMember(Protocol):
    """A system whose holders' clients each talk to one lock-service member, so faults can aim
    at ``holder-member``."""

    def client_member(self, nodes: Mapping[str, Node], worker: str) -> str | None:
        """The lock node ``worker``'s client sends its requests to, or ``None`` if unknown."""
        ...


@runtime_checkable
class NeedsPackages(Protocol):
    """A system whose nodes need Debian packages beyond the base node image's."""

    def packages(self) -> tuple[str, ...]:
        """Debian package names; usually :func:`read_packages` of a file beside the adapter."""
        ...


@runtime_checkable
class Volatile(Protocol):
    """A system some of whose daemons keep everything in memory: a kill of them forgets epochs
    and marks by design, so a run that kills them would report that design, not a finding."""

    def volatile_roles(self) -> tuple[str, ...]:
        """The roles (``lock``, ``store``) whose daemons lose their state when killed."""
        ...


@runtime_checkable
class TakesClockFaults(Protocol):
    """A system some of whose daemons run under libfaketime, so the clock faults can move them."""

    def clock_roles(self) -> Mapping[str, str]:
        """For each role with daemons (``lock``, ``store``): ``""`` when its daemons take clock
        faults, else why they cannot (e.g. a Go program, which libfaketime does not reach)."""
        ...


@runtime_checkable
class FramesRequests(Protocol):
    """A system that says where its holder client's requests end, so that the ``replay`` fault
    can send one again (:mod:`harness.nodeside.proxy`)."""

    def request_framing(self) -> Mapping[str, tuple[str, str]]:
        """For each role the holder talks to (``lock``, ``store``): ``(framing, match)``, where
        ``framing`` is ``lines`` (newline-delimited) or ``resp`` (Redis's RESP), and ``match`` is
        a substring of the requests that are writes (those a replay sends again)."""
        ...


def replay_problem(system: System, framed: Sequence[str]) -> str | None:
    """Why the fault kinds ``framed`` cannot run on ``system`` (``None``: they can, or there
    are none). ``framed`` are the run's kinds that send a holder's request again, so need to
    know where one ends: those whose registry entry says so (``nemeses.FaultKind.needs_framing``,
    passed down by the planner, since this layer does not import the nemeses)."""
    if not framed or isinstance(system, FramesRequests):
        return None
    faults = f"the {', '.join(framed)} fault{'s' if len(framed) > 1 else ''}"
    return (
        f"system {system.name!r} does not say where its requests end (the FramesRequests "
        f"ability), so {faults} cannot send one again; use hold, delay, loss or reset"
    )


_NOT_PRELOADED: Final = "its daemons are not started under libfaketime"
_LOCK_SELECTORS: Final = ("lock-leader", "lock-follower", "holder-member")


def clock_problem(system: System, clocked: Sequence[str], targets: Sequence[str]) -> str | None:
    """Why the clock faults ``clocked`` cannot hit ``targets`` on ``system`` (``None``: they can,
    or there are none), naming the daemons, why, and what can still be moved. ``clocked`` are
    the run's kinds that move a clock, as their registry entries say
    (``nemeses.FaultKind.moves_clock``, passed down by the planner)."""
    if not clocked:
        return None
    roles = system.roles()
    names = dict(topology(roles, 1))
    able = system.clock_roles() if isinstance(system, TakesClockFaults) else {}
    refused: dict[str, str] = {}
    for target in targets:
        role = "lock" if target in _LOCK_SELECTORS else names.get(target, target)
        if role in roles and role != "worker":
            why = able.get(role, _NOT_PRELOADED)
            if why:
                refused.setdefault(role, f"{target}: {why}")
    if not refused:
        return None
    movable = ["the holders' agents (--target holder)"]
    movable += [f"its {role} daemons" for role, why in sorted(able.items()) if not why]
    return (
        f"system {system.name!r} cannot take clock faults on {'; '.join(refused.values())}; "
        f"clock faults can still move {' and '.join(movable)}"
    )


@runtime_checkable
class TakesDiskFaults(Protocol):
    """A system whose daemons keep their data where the lazy file system can sit (the disk
    fault kinds: those whose registry entry ``needs_disk``)."""

    def disk_dirs(self) -> Mapping[str, str]:
        """For each role with daemons (``lock``, ``store``): the directory its daemons keep
        their data in. The adapter makes it with :func:`systems.deploy.data_dir`, which mounts
        the lazy file system there when :attr:`SystemConfig.lazy_disks` is set."""
        ...


@runtime_checkable
class KeepsRecord(Protocol):
    """A system one of whose roles keeps its data of record on a single node, named by a symbolic
    target when a fault starts (a primary its replicas copy): a power loss or a disk fault aimed
    at the holder lands there. Drawn among the role's nodes instead, it may hit a replica, which
    loses nothing the primary does not still hold."""

    def record_targets(self) -> Mapping[str, str]:
        """For each such role, the symbolic target of that node (``{"lock": "lock-leader"}``; a
        system naming ``lock-leader`` also :class:`KnowsLeader`)."""
        ...


def records_of(system: System) -> Mapping[str, str]:
    """The roles whose data of record ``system`` names a node for (:class:`KeepsRecord`), with
    the symbolic target of that node; empty for a system without the ability."""
    return system.record_targets() if isinstance(system, KeepsRecord) else {}


def disk_problem(system: System, asked: Sequence[str]) -> str | None:
    """Why the disk faults ``asked`` cannot run on ``system`` (``None``: they can, or there are
    none): every role with daemons must declare its data directory (:class:`TakesDiskFaults`),
    since the faults hit the store and lock nodes. ``asked`` are the run's kinds that act on the
    lazy file system, as their registry entries say (``nemeses.FaultKind.needs_disk``, passed
    down by the planner)."""
    if not asked:
        return None
    declared = system.disk_dirs() if isinstance(system, TakesDiskFaults) else {}
    missing = sorted(role for role in system.roles() if role != "worker" and role not in declared)
    if not missing:
        return None
    return (
        f"system {system.name!r} does not say where its {'/'.join(missing)} daemons keep their "
        f"data (systems.base.TakesDiskFaults), so {', '.join(asked)} cannot put the lazy file "
        "system under it; drop those kinds from --nemesis, or add disk_dirs() to the adapter"
    )


def durability_problem(
    system: System, kills: Mapping[str, str | None], targets: Sequence[str]
) -> str | None:
    """Why faults aimed at ``targets`` cannot run on ``system`` (``None`` if they can): a kill
    that may hit a :class:`Volatile` role's node tests nothing but its lack of a disk.

    ``kills`` maps each fault kind of the run to whose daemons it kills and restarts, as its
    registry entry says (``nemeses.FaultKind.kills``): ``"targets"`` (its targets'), ``"service"``
    (a lock or store daemon's whatever its targets) or ``None`` (nobody's)."""
    if not isinstance(system, Volatile) or not system.volatile_roles():
        return None
    volatile = set(system.volatile_roles())
    names = {name for name, role in topology(system.roles(), 1) if role in volatile}
    symbolic = {"lock-leader"} if "lock" in volatile else set()
    grouped = {t for t in targets if (group := group_of(t)) is not None and group[0] in volatile}
    hit = sorted(set(targets) & (volatile | names | symbolic | grouped))
    service = [kind for kind, whose in kills.items() if whose == "service"]
    aimed = [kind for kind, whose in kills.items() if whose == "targets"]
    if service or (aimed and hit):
        return (
            f"system {system.name!r} keeps its {'/'.join(sorted(volatile))} state in memory only, "
            f"so killing it ({service[0] if service else aimed[0]} of "
            f"{', '.join(hit) or 'a lock or store daemon'}) proves nothing; use pause, freeze, "
            "throttle or partition, kill only holders (--target holder), or a durable system"
        )
    return None


def packages_of(system: System) -> tuple[str, ...]:
    """The extra Debian packages ``system``'s nodes need (none without :class:`NeedsPackages`)."""
    return system.packages() if isinstance(system, NeedsPackages) else ()


def lease_ttl_of(system: System, config: SystemConfig) -> float:
    """The TTL the holders use under ``config``: the system's, where a bug switch may change it."""
    return system.lease_ttl(config) if isinstance(system, PlantsBugs) else config.lease_ttl


def read_packages(path: Path) -> tuple[str, ...]:
    """The package names of a list file: one a line, ``#`` starts a comment."""
    try:
        text = path.read_text()
    except OSError as problem:
        raise AdapterError(f"cannot read the package list {path}: {problem}") from None
    return tuple(name for line in text.splitlines() if (name := line.split("#", 1)[0].strip()))


def topology(roles: Mapping[str, RoleSpec], workers: int) -> list[tuple[str, str]]:
    """The cluster's nodes as ``(name, role)``: each role's nodes, workers ``max(workers,
    minimum)`` of them. Raises :class:`ConfigError` for an unknown role or clashing names."""
    unknown = sorted(set(roles) - set(ROLE_NAMES))
    if unknown:
        raise ConfigError(f"unknown role(s) {', '.join(unknown)}; roles are {ROLE_NAMES}")
    if "worker" not in roles or roles["worker"].count < 1:
        raise ConfigError("a system needs at least one worker node (the lock holders)")
    nodes: list[tuple[str, str]] = []
    for role in ROLE_NAMES:
        spec = roles.get(role)
        if spec is None:
            continue
        count = max(workers, spec.count) if role == "worker" else spec.count
        nodes += [(f"{spec.prefix}{index}", role) for index in range(1, count + 1)]
    names = [name for name, _ in nodes]
    if len(set(names)) != len(names):
        raise ConfigError(f"two roles share a node name prefix: {names}; give each its own")
    return nodes


def nodes_with_role(nodes: Mapping[str, Node], role: str) -> list[Node]:
    """The nodes of one role, by name."""
    return [nodes[name] for name in sorted(nodes) if nodes[name].role == role]


def check_roles(system: str, needs: Mapping[str, RoleSpec], nodes: Mapping[str, Node]) -> None:
    """Raise :class:`ConfigError` unless ``nodes`` has the roles ``needs`` asks for."""
    problems = []
    for role, spec in needs.items():
        have = [node.name for node in nodes_with_role(nodes, role)]
        if len(have) < spec.count or (role != "worker" and len(have) > spec.count):
            wanted = f"at least {spec.count}" if role == "worker" else f"exactly {spec.count}"
            problems.append(f"{wanted} {role} node(s), got {len(have)} ({', '.join(have) or '-'})")
    if problems:
        raise ConfigError(
            f"system {system!r} needs " + "; ".join(problems) + ": change the cluster's node counts"
        )


def check_bugs(system: str, switches: Sequence[str], config: SystemConfig) -> None:
    """Raise :class:`ConfigError` if ``config`` names a switch the system does not have."""
    unknown = sorted(config.bugs - set(switches))
    if unknown:
        raise ConfigError(
            f"system {system!r} has no bug switch {', '.join(map(repr, unknown))}; "
            f"its switches are: {', '.join(sorted(switches)) or 'none'}"
        )
