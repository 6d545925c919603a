"""What every node-level nemesis shares: the nodes by name, fan-out to targets, teardown."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from harness.node import Daemon, Node
from nemeses._fanout import on_each
from nemeses._observe import CONFIRM_TIMEOUT_S
from nemeses.processes import Locator, recorded_daemons
from nemeses.protocol import Fault, FaultKey, HealReport, NemesisError, fault_fs, kind_of

__all__ = ["NodeNemesis", "ProcessNemesis", "ToggleNemesis", "raise_failures"]

_R = TypeVar("_R")
_H = TypeVar("_H")


class NodeNemesis:
    """Base of the nemeses that act on named nodes; subclasses add ``fs``, ``invoke``, ``heal``."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Remember the nodes by name."""
        self._nodes = dict(nodes)

    @property
    def fs(self) -> frozenset[str]:
        """The operations performed (subclasses override)."""
        raise NotImplementedError

    def heal(self) -> HealReport:
        """Undo every fault still in force (subclasses override)."""
        raise NotImplementedError

    def starts(self, f: str) -> bool:
        """True if ``f`` starts a fault, False if it stops one; :class:`NemesisError` if this
        nemesis does not perform ``f``."""
        if f not in self.fs:
            raise NemesisError(
                f"{type(self).__name__} does not perform {f!r}; it performs "
                f"{', '.join(sorted(self.fs))}"
            )
        return kind_of(f)[1]

    def teardown(self) -> None:
        """Heal; raise :class:`NemesisError` if anything stayed broken."""
        report = self.heal()
        if not report.ok:
            raise NemesisError("healing failed: " + "; ".join(report.errors))

    def node(self, name: str) -> Node:
        """The node called ``name``, or :class:`NemesisError` listing the known names."""
        try:
            return self._nodes[name]
        except KeyError:
            known = ", ".join(sorted(self._nodes)) or "none (was setup called?)"
            raise NemesisError(f"no node {name!r}; nodes: {known}") from None

    def on_targets(self, fault: Fault, action: Callable[[Node], _R]) -> list[_R]:
        """Run ``action`` on every target of ``fault`` (in parallel); raise one
        :class:`NemesisError` naming every target that failed, after all have been tried."""
        if not fault.targets:
            raise NemesisError(f"{fault.kind}: no target nodes given")
        nodes = [self.node(name) for name in fault.targets]
        results, failures = on_each(nodes, action)
        raise_failures(f"{fault.kind} failed", [(node.name, error) for node, error in failures])
        return results


class ProcessNemesis(NodeNemesis, Generic[_H]):
    """Base of the nemeses that signal daemons (pause, kill).

    ``locate`` finds the daemons a fault aims at: the node's own records inside a run, or
    :func:`nemeses.processes.running_daemons` for a controller that did not start them.
    ``params["process"]`` names the daemon; absent means every daemon of the node. What a fault
    did and heal must undo is held by fault in ``held`` (guarded by ``lock``), recorded before the
    signal goes, so that a half-done fault is still undone.
    """

    def __init__(
        self, locate: Locator = recorded_daemons, confirm_timeout: float = CONFIRM_TIMEOUT_S
    ) -> None:
        super().__init__()
        self._locate = locate
        self._timeout = confirm_timeout
        self.lock = threading.Lock()
        self.held: dict[FaultKey, list[_H]] = {}

    def daemons_of(self, node: Node, fault: Fault) -> list[Daemon]:
        """The daemons ``fault`` aims at on ``node``."""
        return self._locate(node, fault.params.get("process"))


def raise_failures(what: str, failures: Sequence[tuple[str, Exception]]) -> None:
    """Raise one :class:`NemesisError` for ``(node, error)`` failures, if there are any."""
    if failures:
        raise NemesisError(
            f"{what}: " + "; ".join(_message(node, error) for node, error in failures)
        )


def _message(node: str, error: Exception) -> str:
    text = str(error)
    return text if text.startswith(f"{node}:") else f"{node}: {text}"


class ToggleNemesis(NodeNemesis):
    """A fault that is a state of whole nodes, switched on and off per node (freeze, throttle).

    Subclasses name their ``kind`` and implement ``apply`` (returns once in force) and ``undo``.
    A node counts as in force from just before ``apply`` until ``undo`` succeeds, so a half-done
    start is still undone by heal.
    """

    kind: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._in_force: dict[str, Node] = {}

    @property
    def fs(self) -> frozenset[str]:
        """``start-<kind>`` and ``stop-<kind>``."""
        return fault_fs(self.kind)

    def apply(self, node: Node, fault: Fault) -> dict[str, Any]:
        """Put ``fault`` in force on ``node``; return once it is, with facts to record."""
        raise NotImplementedError

    def undo(self, node: Node) -> None:
        """Take the fault off ``node``; return once it is off."""
        raise NotImplementedError

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Apply (start) or undo (stop) the fault on every target node."""
        starting = self.starts(f)
        if not starting:
            self.on_targets(fault, self._switch_off)
            return {}
        facts: dict[str, Any] = {}
        for applied in self.on_targets(fault, lambda node: self._switch_on(node, fault)):
            facts.update(applied)
        return facts

    def _switch_on(self, node: Node, fault: Fault) -> dict[str, Any]:
        with self._lock:
            self._in_force[node.name] = node
        return self.apply(node, fault)

    def _switch_off(self, node: Node) -> None:
        self.undo(node)
        with self._lock:
            self._in_force.pop(node.name, None)

    def heal(self) -> HealReport:
        """Undo the fault on every node where it may be in force."""
        with self._lock:
            nodes = list(self._in_force.values())
        _, failures = on_each(nodes, self._switch_off)
        failed = {node.name for node, _ in failures}
        return HealReport(
            healed=[f"{self.kind} off on {node.name}" for node in nodes if node.name not in failed],
            errors=[_message(node.name, error) for node, error in failures],
        )
