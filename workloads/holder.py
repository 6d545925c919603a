"""The lease loop every workload shares: acquire, do units of work while the lease lasts, release.

What a unit of work is (one append, a read-modify-write, a write to every sink) is the workload's;
how a holder reacts to a refusal, a local lease expiry or an unknown outcome is decided here once.
"""

from __future__ import annotations

import random
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workloads.base import Completion, Ops, WorkloadOptions

__all__ = ["KeyPicker", "Lease", "Pacer", "Unit", "run_holder", "write_with_flaws"]


@dataclass(frozen=True, slots=True)
class Lease:
    """The grant a holder works under."""

    lock: str
    epoch: int


class Pacer:
    """Spaces a holder's operations to a target rate (no pacing when the rate is 0)."""

    def __init__(self, rate: float) -> None:
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._next = time.monotonic()

    def wait(self) -> None:
        """Sleep until the next operation is due."""
        if not self._interval:
            return
        now = time.monotonic()
        if self._next > now:
            time.sleep(self._next - now)
        self._next = max(self._next, now) + self._interval


class KeyPicker:
    """Which keys a holder writes next: each lock's keys dealt from a seeded shuffled deck.

    A holder writes every key of a lock once before it writes any key twice, so with many keys
    the keys it writes spread over the whole key space instead of clustering by chance. A stale
    holder's write then usually lands on a key the current holder has not touched, where only the
    sink's order across keys (``seq``) or real time can show it stale, not the key's own log.
    """

    def __init__(self, rng: random.Random, options: WorkloadOptions) -> None:
        self._rng = rng
        self._options = options
        # Key numbers, not names, in a machine-int array: a holder may deal from every lock's
        # deck (1000 locks of 100,000 keys), and a list of strings per lock would be gigabytes.
        # Shuffling the numbers draws what shuffling the names drew, so seeds keep their keys.
        self._decks: dict[str, array[int]] = {}

    def pick(self, lock: str, count: int = 1) -> list[str]:
        """``count`` distinct keys of ``lock`` (at most its number of keys)."""
        count = min(count, self._options.keys)
        deck = self._decks.setdefault(lock, array("L"))
        picked: list[int] = []
        while len(picked) < count:
            if not deck:
                deck.extend(range(self._options.keys))
                self._rng.shuffle(deck)
            number = deck.pop()
            if number in picked:  # the deck was refilled mid-draw: keep this key for later
                deck.insert(0, number)
                continue
            picked.append(number)
        return [self._options.key_name(lock, number) for number in picked]


Unit = Callable[[Ops, Lease, WorkloadOptions], Completion]
"""One unit of work under a lease; returns the completion that decides whether the lease goes on."""


def run_holder(ops: Ops, options: WorkloadOptions, unit: Unit) -> None:
    """Act as a holder until ``ops.stopping()``, doing ``unit`` repeatedly under each lease.

    A lease ends after ``writes_per_lease`` units, or as soon as a unit is not ``ok``: refused
    (stale epoch), expired by the holder's own check, or of unknown outcome. Reads of a random key
    are interleaved at ``read_ratio`` so the history has reads during the run, not only at its end.
    """
    pacer = Pacer(options.rate)
    locks = options.lock_names()
    while not ops.stopping():
        lock = ops.rng.choice(locks)
        pacer.wait()
        grant = ops.acquire(lock)
        if not grant.ok:
            continue
        lease = Lease(lock, int(grant.value["epoch"]))
        for _ in range(options.writes_per_lease):
            if ops.stopping():
                break
            pacer.wait()
            if ops.rng.random() < options.read_ratio:
                sink = ops.rng.choice(options.all_sinks)
                ops.read(sink, options.key_name(lock, ops.rng.randrange(options.keys)))
                continue
            if not unit(ops, lease, options).ok:
                break
        ops.release(lock)


def write_with_flaws(
    ops: Ops,
    lease: Lease,
    options: WorkloadOptions,
    sink: str,
    key: str | Sequence[str],
    prev: str | None = None,
    unit_start: bool = True,
) -> Completion:
    """One write to ``key`` (several keys: one write spanning them, without ``prev``); with the
    ``retry_on_reject`` flaw, a refused write is sent once more as is."""

    def send(start: bool) -> Completion:
        if isinstance(key, str):
            return ops.write(lease.lock, lease.epoch, sink, key, prev, start)
        return ops.write_keys(lease.lock, lease.epoch, sink, key, start)

    done = send(unit_start)
    if done.refused and options.flaws.retry_on_reject:
        done = send(False)
    return done
