"""A nemesis that does nothing but remember what it was asked, for tests of what drives it."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from typing import Any

from harness.node import Node
from nemeses.protocol import Fault, HealReport, NemesisError, fault_fs, kind_of
from nemeses.registry import FAULT_KINDS

__all__ = ["NoopNemesis"]


class NoopNemesis:
    """Accepts every operation of ``kinds`` and applies nothing.

    ``calls`` lists each ``(f, fault)`` in order; ``in_force`` the faults started and not stopped
    (or healed). Operations in ``failing`` raise :class:`NemesisError` after being noted, as a real
    nemesis does when it cannot confirm a fault.
    """

    def __init__(self, kinds: Collection[str] = FAULT_KINDS, failing: Collection[str] = ()) -> None:
        self._fs = fault_fs(*kinds)
        self._failing = frozenset(failing)
        self._lock = threading.Lock()
        self.calls: list[tuple[str, Fault]] = []
        self.in_force: list[Fault] = []
        self.set_up = False
        self.torn_down = False

    @property
    def fs(self) -> frozenset[str]:
        """``start-<kind>`` and ``stop-<kind>`` of every kind given."""
        return self._fs

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Note that setup happened."""
        self.set_up = True

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Note the call and the fault's new state; raise if ``f`` is one of ``failing``."""
        if f not in self._fs:
            raise NemesisError(f"no-op nemesis does not handle {f!r}")
        with self._lock:
            self.calls.append((f, fault))
            if kind_of(f)[1]:
                self.in_force.append(fault)
            elif fault in self.in_force:
                self.in_force.remove(fault)
        if f in self._failing:
            raise NemesisError(f"{f} {fault.describe()}: failing as asked")
        return {}

    def heal(self) -> HealReport:
        """Forget every fault in force."""
        with self._lock:
            healed = [f"healed {fault.describe()}" for fault in self.in_force]
            self.in_force.clear()
        return HealReport(healed=healed)

    def teardown(self) -> None:
        """Heal and note that teardown happened."""
        self.heal()
        self.torn_down = True
