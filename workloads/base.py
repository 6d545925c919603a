"""The workload protocol: what a holder does, in terms of recorded operations.

A workload never talks to a network itself. The runner hands each holder an :class:`Ops` whose
every call is one operation in the history (invoke, then ok / fail / info), so the workload stays a
pure description of behaviour and the history is complete by construction.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "Completion",
    "HolderFlaws",
    "Ops",
    "Workload",
    "WorkloadOptions",
    "final_read_count",
    "final_reads",
]


@dataclass(frozen=True, slots=True)
class Completion:
    """How one operation ended: ``ok``, ``fail`` (definitely did not happen) or ``info``."""

    type: Literal["ok", "fail", "info"]
    value: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the operation happened."""
        return self.type == "ok"

    @property
    def refused(self) -> bool:
        """True when a fence refused a write (or fenced read) because its epoch was stale."""
        return self.type == "fail" and self.error == "stale-epoch"


class Ops(Protocol):
    """The operations a holder may perform; each call is recorded in the history."""

    @property
    def node(self) -> str:
        """The holder's identity (its worker node)."""
        ...

    @property
    def rng(self) -> random.Random:
        """This holder's seeded random source: same seed, same choices."""
        ...

    def stopping(self) -> bool:
        """True once the run's time limit has passed or the run was interrupted."""
        ...

    def acquire(self, lock: str) -> Completion:
        """Ask for a lease on ``lock``; ``ok`` carries ``epoch``."""
        ...

    def release(self, lock: str) -> Completion:
        """Give the lease on ``lock`` back."""
        ...

    def write(
        self,
        lock: str,
        epoch: int,
        sink: str,
        key: str,
        prev: str | None = None,
        unit_start: bool = True,
    ) -> Completion:
        """Write a fresh unique id to ``sink``/``key`` carrying ``epoch`` (``value["id"]``).

        At a unit's start the holder checks its own lease, then does its critical-section work
        (the window in which a pause makes it stale), then sends. Later writes of the same unit
        (``unit_start=False``) are sent at once, unchecked, as a real client fans one checked
        result out to several places.
        """
        ...

    def write_keys(
        self, lock: str, epoch: int, sink: str, keys: Sequence[str], unit_start: bool = True
    ) -> Completion:
        """One write spanning ``keys`` of ``sink``, all accepted or none: a fresh id per key,
        the first in ``value["id"]``, the others in ``value["also"]`` (history format §4)."""
        ...

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> Completion:
        """Read the entries of ``sink``/``key``; with ``epoch``, a fenced read raising the mark."""
        ...


@dataclass(frozen=True)
class HolderFlaws:
    """Mistakes that live in the holder's logic rather than in a server (docs/design.md §1)."""

    retry_on_reject: bool = False
    reacquire_no_reread: bool = False


@dataclass(frozen=True)
class WorkloadOptions:
    """Knobs shared by the workloads."""

    keys: int = 3
    locks: int = 1
    writes_per_lease: int = 20
    keys_per_write: int = 1
    """Keys one write spans (atomically, in one request to one sink); 1 is a plain write."""
    read_ratio: float = 0.1
    rate: float = 0.0  # operations per second per holder; 0 means as fast as the system allows
    fenced_sinks: tuple[str, ...] = ("store",)
    all_sinks: tuple[str, ...] = ("store",)
    flaws: HolderFlaws = field(default_factory=HolderFlaws)

    def lock_names(self) -> list[str]:
        """The locks holders contend for."""
        return [f"L{i}" for i in range(self.locks)]

    def key_name(self, lock: str, number: int) -> str:
        """Key ``number`` (0-based, below :attr:`keys`) of ``lock``; keys are disjoint per lock,
        so a key has one lock. Named one at a time: a run may have a hundred million."""
        return f"{lock}-k{number}"


class Workload(Protocol):
    """What holders do. Stateless: every per-holder state lives in :meth:`holder`'s frame."""

    name: str
    description: str

    def holder(self, ops: Ops, options: WorkloadOptions) -> None:
        """Act as one holder until ``ops.stopping()``."""
        ...

    def final_read_sinks(self, options: WorkloadOptions) -> tuple[str, ...]:
        """The sinks whose every key of every lock is read after healing, to judge lost
        writes."""
        ...


def final_reads(workload: Workload, options: WorkloadOptions) -> Iterator[tuple[str, str]]:
    """Every (sink, key) the workload reads after healing, one at a time: a run may have
    millions, so they are never built as one list."""
    for sink in workload.final_read_sinks(options):
        for lock in options.lock_names():
            for number in range(options.keys):
                yield sink, options.key_name(lock, number)


def final_read_count(workload: Workload, options: WorkloadOptions) -> int:
    """How many final reads :func:`final_reads` yields: sinks x locks x keys."""
    return len(workload.final_read_sinks(options)) * options.locks * options.keys
