"""The data behind every anomaly: the operations involved, the faults around them, the names.

An anomaly is data first and a sentence second (docs/design.md §5): :class:`Anomaly` holds the
operations (:class:`OpRef`) and fault windows (:class:`FaultWindow`), and its ``explanation`` is
rendered from them by :mod:`checkers.explain`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from checkers.registry import ANOMALY_NAMES, sentence
from harness.record import Event

__all__ = ["ANOMALY_NAMES", "Anomaly", "FaultWindow", "OpRef"]


@dataclass(frozen=True, slots=True)
class OpRef:
    """One operation as evidence: where it is in the history and what it carried.

    ``index``/``time`` are those of the completion (``ok``, ``fail``, ``info``); for an operation
    still open when the history ended they are ``None`` and ``type`` is ``"invoke"``. ``role``
    says what part the operation plays in its anomaly (``"stale"``, ``"newer"``, ``"read"``...).
    ``position`` is the write's place in its sink's order, when a read showed it.
    """

    role: str
    f: str
    type: str
    index: int | None
    time: int | None
    invoke_index: int | None = None
    invoke_time: int | None = None
    process: int | str | None = None
    node: str | None = None
    lock: str | None = None
    epoch: int | None = None
    id: str | None = None
    sink: str | None = None
    key: str | None = None
    error: str | None = None
    position: int | None = None

    @property
    def holder(self) -> str:
        """Who did it, for sentences: the node, or the process when no node was recorded."""
        if self.node is not None:
            return self.node
        return f"process {self.process}" if self.process is not None else "an unknown holder"

    @classmethod
    def completed(
        cls,
        role: str,
        event: Event,
        invoke: Event,
        *,
        lock: str | None,
        epoch: int | None,
        sink: str | None = None,
        key: str | None = None,
        error: str | None = None,
    ) -> OpRef:
        """The operation ``invoke`` began and ``event`` completed, as evidence."""
        return cls(
            role,
            event.f,
            event.type,
            event.index,
            event.time,
            invoke.index,
            invoke.time,
            event.process,
            event.node,
            lock,
            epoch,
            sink=sink,
            key=key,
            error=error,
        )

    def with_role(self, role: str) -> OpRef:
        """The same operation playing ``role``."""
        return self if role == self.role else replace(self, role=role)

    @property
    def start(self) -> int | None:
        """The earliest time known for the operation (its invoke, else its completion)."""
        return self.invoke_time if self.invoke_time is not None else self.time

    @property
    def end(self) -> int | None:
        """The latest time known for the operation (its completion, else its invoke)."""
        return self.time if self.time is not None else self.invoke_time

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every field present (``null`` when not applicable)."""
        return {
            "role": self.role,
            "f": self.f,
            "type": self.type,
            "index": self.index,
            "time": self.time,
            "invoke_index": self.invoke_index,
            "invoke_time": self.invoke_time,
            "process": self.process,
            "node": self.node,
            "lock": self.lock,
            "epoch": self.epoch,
            "id": self.id,
            "sink": self.sink,
            "key": self.key,
            "error": self.error,
            "position": self.position,
        }


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """A fault in force from ``start`` to ``end`` (ns); ``end`` is ``None`` if never stopped.

    Paired from ``start-X``/``stop-X`` nemesis events (``kind`` is ``X``); any other nemesis
    event is an instant (``start == end``). ``applied`` is false when the nemesis said the fault
    could not be applied (``"applied": false`` or an ``error`` in its value). ``parts`` are the
    faults a compound window is made of (``restart-while-paused``: the pause, then the restart).
    ``verb`` is what the history says the fault did to its targets (``"paused"``), and
    ``part_verbs`` the same for each part: histories carry them, so the checker needs no table
    of fault kinds and explains kinds it has never heard of. ``opened`` and ``closed`` are what
    the history says happened at the start and at the stop, when it says it in a sentence
    (``"l1's clock jumped 3 s forward"``), for faults a verb cannot tell.
    """

    kind: str
    targets: tuple[str, ...]
    start: int
    end: int | None
    start_index: int
    end_index: int | None
    applied: bool = True
    error: str | None = None
    parts: tuple[FaultWindow, ...] = ()
    verb: str | None = None
    part_verbs: tuple[str, ...] = ()
    opened: str | None = None
    closed: str | None = None

    def overlaps(self, start: int, end: int) -> bool:
        """True if the window was in force at some moment of ``[start, end]``."""
        return self.start <= end and (self.end is None or self.end >= start)

    def to_json(self) -> dict[str, Any]:
        """A JSON object with every field present."""
        return {
            "kind": self.kind,
            "targets": list(self.targets),
            "start": self.start,
            "end": self.end,
            "start_index": self.start_index,
            "end_index": self.end_index,
            "applied": self.applied,
            "error": self.error,
            "parts": [part.to_json() for part in self.parts],
            "verb": self.verb,
        }


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One occurrence of a named anomaly with its evidence.

    ``details`` holds what is particular to the anomaly (positions in the sink's order, the
    ``prev`` both writes were based on, an order cycle...). ``lease_ttl`` (ns) is the run's lease
    TTL when known, quoted by explanations.
    """

    name: str
    ops: tuple[OpRef, ...]
    faults: tuple[FaultWindow, ...] = ()
    sink: str | None = None
    key: str | None = None
    lock: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    lease_ttl: int | None = None

    def op(self, role: str) -> OpRef | None:
        """The operation playing ``role``, if any."""
        for op in self.ops:
            if op.role == role:
                return op
        return None

    @property
    def explanation(self) -> str:
        """One sentence, rendered from the evidence, in Elle's manner."""
        return sentence(self)

    def to_json(self) -> dict[str, Any]:
        """The evidence object of the JSON result (stable shape, see README)."""
        return {
            "anomaly": self.name,
            "explanation": self.explanation,
            "sink": self.sink,
            "key": self.key,
            "lock": self.lock,
            "ops": [op.to_json() for op in self.ops],
            "faults": [window.to_json() for window in self.faults],
            "details": dict(self.details),
        }
