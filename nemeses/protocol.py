"""The nemesis protocol: what a fault injector is, what a fault is, what healing reports.

A nemesis has four methods, in Jepsen's spirit: :meth:`Nemesis.setup` once the nodes exist,
:meth:`Nemesis.invoke` to start or stop one fault, :meth:`Nemesis.heal` to undo everything still in
force, :meth:`Nemesis.teardown` at the end. The operations it performs are listed in
:attr:`Nemesis.fs` as ``start-<kind>`` / ``stop-<kind>``; they are the ``f`` of its history events.
A compound kind has no nemesis of its own: it is played as overlapping windows of its parts
(:attr:`nemeses.kinds.FaultKind.composed`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.node import Node

__all__ = [
    "Fault",
    "FaultKey",
    "HealReport",
    "Nemesis",
    "NemesisError",
    "fault_fs",
    "kind_of",
    "start_f",
    "stop_f",
]


FaultKey = tuple[str, tuple[str, ...], str]
"""The hashable identity of a :class:`Fault` (:attr:`Fault.key`)."""


class NemesisError(RuntimeError):
    """A fault could not be applied, confirmed or undone; the message names node and cause."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One concrete fault: its kind, the nodes it hits, and kind-specific parameters.

    ``targets`` are node names (a schedule's symbolic ``"holder"`` is resolved before a fault is
    built). ``params`` is JSON data, flattened into the history event's ``value``: ``process``
    (pause, kill), ``cpu`` (throttle), ``topology``, ``peers`` and ``drops`` (partition).
    """

    kind: str
    targets: tuple[str, ...]
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> FaultKey:
        """A hashable identity: two equal faults have equal keys (a start matches its stop)."""
        return (self.kind, self.targets, json.dumps(self.params, sort_keys=True, default=str))

    def describe(self) -> str:
        """A short human description, e.g. ``pause w2 (process agent)``."""
        extra = ", ".join(
            f"{key} {value}" for key, value in sorted(self.params.items()) if key != "drops"
        )
        text = f"{self.kind} {','.join(self.targets) or '(no targets)'}"
        return f"{text} ({extra})" if extra else text


@dataclass(slots=True)
class HealReport:
    """What a heal undid (``healed``, human lines) and what it could not (``errors``)."""

    healed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.errors

    def merge(self, other: HealReport) -> HealReport:
        """Add ``other``'s lines to this report; returns self."""
        self.healed.extend(other.healed)
        self.errors.extend(other.errors)
        return self


def start_f(kind: str) -> str:
    """The history ``f`` of the event that starts a fault of ``kind``: ``start-<kind>``."""
    return f"start-{kind}"


def stop_f(kind: str) -> str:
    """The history ``f`` of the event that ends a fault of ``kind``: ``stop-<kind>``."""
    return f"stop-{kind}"


def fault_fs(*kinds: str) -> frozenset[str]:
    """The operations of a nemesis handling ``kinds``: start and stop of each."""
    return frozenset(f for kind in kinds for f in (start_f(kind), stop_f(kind)))


def kind_of(f: str) -> tuple[str, bool]:
    """Split an operation into its fault kind and whether it starts (True) or stops the fault."""
    action, _, kind = f.partition("-")
    if action not in ("start", "stop") or not kind:
        raise NemesisError(f"unknown nemesis operation {f!r}; expected start-<kind> or stop-<kind>")
    return kind, action == "start"


class Nemesis(Protocol):
    """A fault injector.

    ``invoke`` returns only once the fault is observed in force (start) or observed undone
    (stop), so the caller's clock reading right after it is the confirmed time. It raises
    :class:`NemesisError` when it cannot apply or confirm; whatever it did apply stays known to
    :meth:`heal`. Implementations must tolerate a stop for a fault whose start failed half-way.
    """

    @property
    def fs(self) -> frozenset[str]:
        """The operations this nemesis performs, e.g. ``{"start-pause", "stop-pause"}``."""
        ...

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Prepare the nodes (by name) before the first fault; may clean leftovers of a crash."""
        ...

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Perform operation ``f`` for ``fault``; returns facts observed (JSON data) to record."""
        ...

    def heal(self) -> HealReport:
        """Undo every fault still in force. Idempotent; tries every node and collects errors."""
        ...

    def teardown(self) -> None:
        """Heal, then release what setup acquired; raise :class:`NemesisError` if healing failed."""
        ...
