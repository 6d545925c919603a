"""The system adapter protocol: how a system under test is described, set up and torn down.

An adapter packages a lock service and its sinks (DESIGN.md §2). It says which nodes it needs
(:meth:`System.roles`), which write paths exist and how each is protected (the write-path
inventory, :class:`Sink`), which bug switches it can plant (:class:`BugSwitch`), and it installs
and starts its programs on nodes using only the :class:`harness.node.Node` protocol. The agents'
client is a stdlib-only module the adapter ships to worker nodes; its interface is
:class:`harness.nodeside.agent.HolderClient`.

Optional abilities are separate small protocols (:class:`CollectsData`), checked with
``isinstance``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# One mitigation vocabulary for what adapters declare and what the checkers judge.
from harness.history import MITIGATIONS, Mitigation, Sink
from harness.node import Daemon, Node
from harness.nodeside.agent import HolderClient

__all__ = [
    "MITIGATIONS",
    "AdapterError",
    "BugSwitch",
    "CollectsData",
    "ConfigError",
    "Deployment",
    "Endpoint",
    "HolderClient",
    "Mitigation",
    "ProcessTarget",
    "Sink",
    "System",
    "SystemConfig",
    "check_bugs",
    "check_roles",
    "nodes_with_role",
]


class AdapterError(RuntimeError):
    """Setting a system up, restarting or tearing it down failed; the message says where and why."""


class ConfigError(AdapterError, ValueError):
    """A system configuration the adapter cannot run; the message names the field and the fix."""


@dataclass(frozen=True, slots=True)
class BugSwitch:
    """A mistake an adapter can plant on purpose, and how the harness should catch it."""

    name: str
    description: str
    exposed_by: str  # the fault (and workload) that makes it visible
    anomaly: str  # the anomaly name(s) of DESIGN.md §5 the checker should report


@dataclass(frozen=True, slots=True)
class SystemConfig:
    """What a run asks of the system: lease TTL and lock-delay in seconds, bug switches by name.

    The default is the correct system: no switches.
    """

    lease_ttl: float = 2.0
    lock_delay: float = 0.0
    bugs: frozenset[str] = field(default_factory=frozenset)

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
class Endpoint:
    """A TCP address the controller can reach, and the run secret it must send there (if any)."""

    host: str
    port: int
    token: str | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ProcessTarget:
    """A process nemeses may pause, kill and restart: the daemon ``daemon`` on node ``node``."""

    role: str
    node: str
    daemon: str
    port: int


@dataclass(frozen=True, slots=True)
class Deployment:
    """A system running on a cluster, as :meth:`System.setup` left it.

    ``lease_ttl`` is the TTL the holders actually use (a bug switch may change it); ``agents``
    maps each worker node to the agent address the controller dials.
    """

    system: str
    config: SystemConfig
    lease_ttl: float
    agents: Mapping[str, Endpoint]
    targets: tuple[ProcessTarget, ...]
    inventory: tuple[Sink, ...]

    def targets_for(self, role: str) -> tuple[ProcessTarget, ...]:
        """The targets of one role (``lock``, ``store``, ``worker``)."""
        return tuple(target for target in self.targets if target.role == role)


@runtime_checkable
class System(Protocol):
    """A system under test, packaged for fencecheck.

    Adapters are found through the entry-point group ``fencecheck.systems`` (see
    :mod:`systems.registry`); the entry point names a zero-argument factory (usually the class).
    """

    @property
    def name(self) -> str:
        """The adapter's name, as in specs and on the command line."""
        ...

    def roles(self) -> Mapping[str, int]:
        """How many nodes of each role it needs: exact for every role but ``worker``, a minimum."""
        ...

    def bug_switches(self) -> Mapping[str, BugSwitch]:
        """The switches :attr:`SystemConfig.bugs` may name, by name."""
        ...

    def validate(self, config: SystemConfig) -> None:
        """Raise :class:`ConfigError` for a config this system cannot run (before any node)."""
        ...

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """The write-path inventory under ``config``: what the system *claims* about each sink."""
        ...

    def lease_ttl(self, config: SystemConfig) -> float:
        """The lease TTL the holders will actually use under ``config`` (a switch may change it)."""
        ...

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        """Install and start the system on ``nodes`` (by name) and wait until every part answers.

        Starts from empty data directories. Raises :class:`AdapterError` (or
        :class:`ConfigError`) naming the node and showing the failing process's log.
        """
        ...

    def teardown(self, nodes: Mapping[str, Node]) -> None:
        """Stop every process :meth:`setup` started; safe to call after a partial setup."""
        ...

    def restart(self, node: Node, target: ProcessTarget) -> Daemon:
        """Start a killed target again (same argv, same data dir) and wait until it answers."""
        ...


@runtime_checkable
class CollectsData(Protocol):
    """A system whose nodes keep state worth saving with the run (epoch files, logs of writes)."""

    def collect(self, nodes: Mapping[str, Node]) -> dict[str, dict[str, bytes]]:
        """Files to keep, as node name -> file name -> contents (missing files left out)."""
        ...


def nodes_with_role(nodes: Mapping[str, Node], role: str) -> list[Node]:
    """The nodes of one role, by name."""
    return [nodes[name] for name in sorted(nodes) if nodes[name].role == role]


def check_roles(system: str, needs: Mapping[str, int], nodes: Mapping[str, Node]) -> None:
    """Raise :class:`ConfigError` unless ``nodes`` has the roles ``needs`` asks for."""
    problems = []
    for role, count in needs.items():
        have = [node.name for node in nodes_with_role(nodes, role)]
        if len(have) < count or (role != "worker" and len(have) > count):
            wanted = f"at least {count}" if role == "worker" else f"exactly {count}"
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
            f"its switches are: {', '.join(sorted(switches))}"
        )
