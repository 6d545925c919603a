"""Optional building blocks for adapters: the parts most adapters would otherwise write alike.

Nothing here is part of the contract (:mod:`systems.base`): an adapter may use any of these, all
of them, or none, and still satisfy the same protocols.

- :class:`PackagesBeside`: :class:`~systems.base.NeedsPackages` from the ``packages.txt`` beside
  the adapter's module.
- :class:`SwitchTable`: :class:`~systems.base.PlantsBugs` for an adapter whose bug switches are
  one fixed table.
- :func:`setting_up`: the frame of a :meth:`~systems.base.System.setup`: the config and the
  nodes checked first, a failed start torn down and reported as one
  :class:`~systems.base.AdapterError`.
- :class:`DaemonTable`: each daemon of a system named once (its process name, the role whose
  nodes run it, how to tell it serves), from which its start, the fault targets, the teardown and
  :class:`~systems.base.Restarts` derive.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from harness.node import Daemon, Node, NodeError
from harness.node.wait import WaitStrategy
from systems import deploy
from systems.base import (
    AdapterError,
    BugSwitch,
    PlantsBugs,
    ProcessTarget,
    System,
    SystemConfig,
    check_bugs,
    check_roles,
    nodes_with_role,
    read_packages,
)
from systems.holder_flaws import check_no_clash

__all__ = ["DaemonEntry", "DaemonTable", "PackagesBeside", "SwitchTable", "setting_up"]


class PackagesBeside:
    """Mixin: :meth:`packages` reads ``packages.txt`` beside the module of the class that takes
    the mixin (one Debian package a line, ``#`` comments; see :func:`systems.base.read_packages`).
    """

    _package_list: ClassVar[Path]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The adapter that takes the mixin names the list; its subclasses, wherever they are
        # defined (a variant with a mistake planted, in a test), run on the same nodes.
        if PackagesBeside in cls.__bases__:
            cls._package_list = Path(inspect.getfile(cls)).with_name("packages.txt")

    def packages(self) -> tuple[str, ...]:
        """The Debian packages of ``packages.txt`` beside the adapter's module."""
        return read_packages(self._package_list)


class SwitchTable:
    """Mixin: the bug switches of :class:`~systems.base.PlantsBugs` as one fixed table.

    A subclass sets ``name`` and ``switches`` (name -> :class:`~systems.base.BugSwitch`) in its
    class body. :meth:`validate` refuses switches not in the table: an adapter with more rules
    overrides it and calls this one first. :meth:`lease_ttl` is the configured TTL: an adapter
    with a switch (or a server) that changes it overrides it. A switch named like one of the
    harness's holder flaws is refused as the class is defined.
    """

    name: ClassVar[str]
    switches: ClassVar[Mapping[str, BugSwitch]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A clash is a mistake in the adapter's code, the same for every instance: say so as the
        # class is defined, whatever its constructor does.
        check_no_clash(cls.name, cls.switches)

    def bug_switches(self) -> Mapping[str, BugSwitch]:
        """The switches :attr:`SystemConfig.bugs` may name: the class's ``switches``."""
        return self.switches

    def validate(self, config: SystemConfig) -> None:
        """Raise :class:`~systems.base.ConfigError` for a switch that is not in the table."""
        check_bugs(self.name, list(self.switches), config)

    def lease_ttl(self, config: SystemConfig) -> float:
        """The configured TTL: no switch changes it."""
        return config.lease_ttl


@contextmanager
def setting_up(system: System, nodes: Mapping[str, Node], config: SystemConfig) -> Iterator[None]:
    """The frame of ``system``'s :meth:`~systems.base.System.setup` on ``nodes``.

    Before the body: ``config`` validated (for a :class:`~systems.base.PlantsBugs` system) and
    the nodes checked against :meth:`~systems.base.System.roles`. If the body raises
    :class:`~systems.base.AdapterError` or :class:`harness.node.NodeError`, ``system`` is torn
    down and one :class:`~systems.base.AdapterError` names it and the problem.
    """
    if isinstance(system, PlantsBugs):
        system.validate(config)
    check_roles(system.name, system.roles(), nodes)
    try:
        yield
    except (AdapterError, NodeError) as problem:
        system.teardown(nodes)
        raise AdapterError(f"setting up system {system.name!r} failed:\n{problem}") from None


@dataclass(frozen=True, slots=True)
class DaemonEntry:
    """One daemon of a system: its process name, the role whose nodes run it, and how to tell it
    serves on a node (``ready``; ``ready_again`` after a restart, when that differs: an etcd
    member restarted inside a partition serves but has no leader). ``targeted``: pause, kill and
    restart faults aim at it (a helper such as Redis's Sentinel is not)."""

    name: str
    role: str
    ready: Callable[[Node], WaitStrategy]
    ready_again: Callable[[Node], WaitStrategy] | None = None
    targeted: bool = True


class DaemonTable:
    """The daemons of system ``system``, each named once (:class:`DaemonEntry`): an adapter
    starts them with :meth:`start`, declares :meth:`targets` in its deployment, and implements
    ``teardown`` with :meth:`tear_down` and :class:`~systems.base.Restarts` with :meth:`restart`.
    """

    def __init__(self, system: str, *entries: DaemonEntry) -> None:
        self.system = system
        self.entries = entries

    def entry(self, name: str) -> DaemonEntry:
        """The entry of daemon ``name``; :class:`~systems.base.AdapterError` for one the system
        does not have."""
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise AdapterError(f"the {self.system} system has no daemon {name!r}")

    def start(self, node: Node, name: str, argv: Sequence[str]) -> Daemon:
        """Start daemon ``name`` on ``node`` with ``argv`` and wait until it serves."""
        return deploy.start_and_wait(node, name, argv, self.entry(name).ready(node))

    def targets(self, nodes: Mapping[str, Node]) -> tuple[ProcessTarget, ...]:
        """What process faults aim at: every targeted daemon on each node of its role."""
        return tuple(
            ProcessTarget(entry.role, node.name, entry.name)
            for entry in self.entries
            if entry.targeted
            for node in nodes_with_role(nodes, entry.role)
        )

    def tear_down(self, nodes: Mapping[str, Node]) -> None:
        """SIGKILL every daemon of the table on the nodes of its role (their data stays for
        collection); one :class:`~systems.base.AdapterError` naming each node that failed."""
        roles = {entry.role for entry in self.entries}
        names = tuple(dict.fromkeys(entry.name for entry in self.entries))
        chosen = [node for node in nodes.values() if node.role in roles]
        deploy.tear_down(self.system, chosen, names)

    def restart(self, node: Node, name: str) -> Daemon:
        """Start the killed daemon ``name`` of ``node`` again with its last command line (same
        data, :func:`systems.deploy.restart_daemon`) and wait until it serves again."""
        entry = self.entry(name)
        ready = entry.ready_again or entry.ready
        return deploy.restart_daemon(node, name, ready(node))

    def serves(self, node: Node, name: str) -> bool | None:
        """One readiness check of the restarted daemon ``name`` on ``node`` (its
        ``ready_again``, else ``ready``), for :class:`~systems.base.ChecksReady`; ``None`` for a
        daemon the table does not have."""
        entry = next((entry for entry in self.entries if entry.name == name), None)
        if entry is None:
            return None
        return (entry.ready_again or entry.ready)(node).attempt(node)
