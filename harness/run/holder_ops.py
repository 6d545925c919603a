"""Workload operations carried out through an agent and recorded in the history.

This is the bridge between a workload (pure behaviour) and the real holder process on a worker
node. Each call records ``invoke``, sends one request to the agent, and records how it ended:
``ok``, ``fail`` (the agent says it definitely did not happen, or it was never sent) or ``info``
(no answer in time). After an ``info`` the holder continues under a new process number, as the
history format requires, because the old operation may still land.

When the agent or the service behind it cannot be reached (``unreachable``, ``unavailable``), the
next call would fail the same way within microseconds: a dead agent once produced half a million
events in 30 s. So such an outcome is followed by a seeded, exponentially growing wait capped at a
fraction of the lease TTL (short enough that a holder is back within one lease of a recovery, long
enough that an outage costs a few events per TTL), cut short when the run stops.
"""

from __future__ import annotations

import itertools
import random
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final

from harness.record.vocabulary import TIMEOUT, UNAVAILABLE, UNREACHABLE
from harness.run.agent_link import AgentLink, AgentUnreachable
from harness.run.recorder import Recorder
from workloads.base import Completion

__all__ = [
    "BACKOFF_CAP",
    "BACKOFF_FIRST",
    "REACHED_AGENT_S",
    "TRY_GAP",
    "HolderBoard",
    "HolderOps",
    "backoff_delay",
]

BACKOFF_FIRST: Final = 0.05
"""The first wait after an unreachable outcome, as a fraction of the lease TTL."""
BACKOFF_CAP: Final = 0.5
"""The longest wait, as a fraction of the lease TTL: never more than half a lease lost."""
REACHED_AGENT_S: Final = 0.001
"""A write sent this long ago has reached its agent, which checked the lease at once."""
TRY_GAP: Final = 0.05
"""Between two attempts of an acquire made of tries (``--acquire try``), in lease TTLs: a lock
handed on is taken within a twentieth of a lease, at two history events per attempt."""
_OUTAGE: Final = frozenset((UNREACHABLE, UNAVAILABLE))
_CALLS_KEPT: Final = 32
"""How many recent write calls the board times (what a typical one lasts)."""


def backoff_delay(attempt: int, lease_ttl: float, rng: random.Random) -> float:
    """Seconds to wait after the ``attempt``-th outage outcome in a row (1-based).

    Doubles from ``BACKOFF_FIRST`` x TTL up to ``BACKOFF_CAP`` x TTL, jittered down by up to half so
    that holders cut off together do not retry in lockstep.
    """
    ceiling = min(BACKOFF_CAP, BACKOFF_FIRST * 2.0 ** min(attempt - 1, 32)) * lease_ttl
    return ceiling * (0.5 + 0.5 * rng.random())


class HolderBoard:
    """Who holds which lock right now, as far as the history shows, and what each holder is doing:
    the write it has in flight and how many it had accepted since its grant (for holder-aimed
    faults, :class:`nemeses.player.HolderWork`), and who is waiting for a lock (for faults aimed
    at a waiter)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._holders: dict[str, str] = {}  # lock -> node
        self._writing: dict[str, tuple[float, float]] = {}  # node -> (sent, work) of its write
        self._accepted: dict[str, int] = {}  # node -> writes accepted since its last grant
        self._waiting: dict[str, None] = {}  # nodes with an acquire open, oldest first
        # How long the adapter's client took with recent writes (after the agent's work).
        self._calls: deque[float] = deque(maxlen=_CALLS_KEPT)

    def granted(self, lock: str, node: str) -> None:
        """``node`` was granted ``lock``."""
        with self._lock:
            self._holders[lock] = node
            self._accepted[node] = 0

    def gave_up(self, lock: str, node: str) -> None:
        """``node`` released ``lock`` (or stopped believing it holds it)."""
        with self._lock:
            if self._holders.get(lock) == node:
                del self._holders[lock]

    def began_acquire(self, node: str) -> None:
        """``node`` asked for a lock and waits for the answer."""
        with self._lock:
            self._waiting[node] = None

    def ended_acquire(self, node: str) -> None:
        """``node``'s acquire was answered (granted or not)."""
        with self._lock:
            self._waiting.pop(node, None)

    def waiter(self) -> str | None:
        """A node waiting for a lock and holding none, the one that began waiting last (in a
        service that serves its queue in order it waits longest); ``None`` if none."""
        with self._lock:
            holding = set(self._holders.values())
            waiting = [node for node in self._waiting if node not in holding]
            return waiting[-1] if waiting else None

    def current(self) -> str | None:
        """A node that holds a lock now, the most recently granted first; ``None`` if none."""
        with self._lock:
            return next(reversed(self._holders.values()), None)

    def began_write(self, node: str, work_s: float) -> None:
        """``node`` sent a write to its agent, which works ``work_s`` seconds before sending it."""
        with self._lock:
            self._writing[node] = (self._clock(), work_s)

    def ended_write(self, node: str, accepted: bool) -> None:
        """``node``'s write in flight ended, ``accepted`` or not."""
        with self._lock:
            writing = self._writing.pop(node, None)
            if accepted:
                self._accepted[node] = self._accepted.get(node, 0) + 1
            if writing is not None and accepted:
                sent, work_s = writing
                self._calls.append(max(0.0, self._clock() - sent - work_s))

    def in_write_call(self, node: str) -> float | None:
        """Seconds since ``node``'s agent, done with its work, called the adapter's client to
        write (the write is in there until the reply); ``None`` when it is not in such a call."""
        with self._lock:
            writing = self._writing.get(node)
        if writing is None:
            return None
        sent, work_s = writing
        into = self._clock() - sent - work_s - REACHED_AGENT_S
        return into if into >= 0 else None

    def typical_call_s(self) -> float | None:
        """The median length of recent accepted write calls (any holder's), or ``None`` before
        the first."""
        with self._lock:
            calls = list(self._calls)
        return statistics.median(calls) if calls else None

    def in_flight(self, node: str) -> bool:
        """True while ``node`` has a write in flight (sent, no reply yet)."""
        with self._lock:
            return node in self._writing

    def in_critical_section(self, node: str) -> bool:
        """True while ``node``'s agent is working on a write: sent :data:`REACHED_AGENT_S` ago
        or more (so the agent has checked the lease), with at least half its work still ahead
        (so a fault that starts now still finds it there)."""
        with self._lock:
            writing = self._writing.get(node)
        if writing is None:
            return False
        sent, work_s = writing
        return REACHED_AGENT_S <= self._clock() - sent <= work_s / 2

    def accepted_since_grant(self, node: str) -> int:
        """How many of ``node``'s writes were accepted since it was last granted a lock."""
        with self._lock:
            return self._accepted.get(node, 0)


class HolderOps:
    """:class:`workloads.base.Ops` for one worker node, over an :class:`AgentLink`."""

    def __init__(
        self,
        *,
        node: str,
        process: int,
        process_stride: int,
        link: AgentLink,
        recorder: Recorder,
        seed: int,
        stop: threading.Event,
        op_timeout: float,
        acquire_wait: float,
        work_ms: int,
        board: HolderBoard,
        lease_ttl: float,
        tries: bool = False,
    ) -> None:
        self._node = node
        self._process = process
        self._stride = process_stride
        self._link = link
        self._recorder = recorder
        self._rng = random.Random(f"{seed}:{node}")
        self._stop = stop
        self._timeout = op_timeout
        self._acquire_wait = acquire_wait
        self._work_ms = work_ms
        self._board = board
        self._ids = itertools.count(1)
        self._lease_ttl = lease_ttl
        self._tries = tries
        # Its own stream, so how often the system was down never shifts the workload's choices.
        self._backoff_rng = random.Random(f"{seed}:{node}:backoff")
        self._outages = 0

    def close(self) -> None:
        """Close the connection to the agent (idempotent)."""
        self._link.close()

    @property
    def node(self) -> str:
        """The holder's identity."""
        return self._node

    @property
    def rng(self) -> random.Random:
        """Seeded per node: same seed, same choices."""
        return self._rng

    def stopping(self) -> bool:
        """True once the run should wind down."""
        return self._stop.is_set()

    def acquire(self, lock: str) -> Completion:
        """Ask the agent for a lease, waiting up to the configured acquire wait: in one acquire
        that waits, or (``tries``) in attempts that do not wait, each its own operation, every
        :data:`TRY_GAP` TTLs until one is granted, refused otherwise, or the wait is over."""
        self._board.began_acquire(self._node)
        try:
            done = self._attempts(lock) if self._tries else self._attempt(lock, self._acquire_wait)
        finally:
            self._board.ended_acquire(self._node)
        if done.ok:
            self._board.granted(lock, self._node)
        return done

    def _attempts(self, lock: str) -> Completion:
        deadline = time.monotonic() + self._acquire_wait
        while True:
            done = self._attempt(lock, 0.0)
            busy = done.type == "fail" and done.error == TIMEOUT  # a try that found it held
            if not busy or time.monotonic() >= deadline:
                return done
            if self._stop.wait(TRY_GAP * self._lease_ttl):
                return done

    def _attempt(self, lock: str, wait: float) -> Completion:
        return self._call(
            "acquire",
            {"lock": lock},
            {"op": "acquire", "lock": lock, "wait": wait},
            timeout=self._timeout + wait,
        )

    def release(self, lock: str) -> Completion:
        """Give the lease back."""
        self._board.gave_up(lock, self._node)
        return self._call("release", {"lock": lock}, {"op": "release", "lock": lock})

    def write(
        self,
        lock: str,
        epoch: int,
        sink: str,
        key: str,
        prev: str | None = None,
        unit_start: bool = True,
    ) -> Completion:
        """Write a fresh id carrying ``epoch``; the agent checks its lease, works, then sends."""
        value: dict[str, Any] = {"lock": lock, "sink": sink, "key": key, "id": self._new_id()}
        value["epoch"] = epoch
        if prev is not None:
            value["prev"] = prev
        return self._write(value, prev, unit_start)

    def write_keys(
        self, lock: str, epoch: int, sink: str, keys: Sequence[str], unit_start: bool = True
    ) -> Completion:
        """One write spanning ``keys``: the first key and id as a plain write's, the rest in
        ``also`` (each item gets its ``seq`` in the ``ok`` value when the sink reports one)."""
        value: dict[str, Any] = {"lock": lock, "sink": sink, "key": keys[0], "id": self._new_id()}
        value["epoch"] = epoch
        value["also"] = [{"key": key, "id": self._new_id()} for key in keys[1:]]
        return self._write(value, None, unit_start)

    def _new_id(self) -> str:
        return f"{self._node}-{next(self._ids)}"

    def _write(self, value: dict[str, Any], prev: str | None, unit_start: bool) -> Completion:
        work_ms = self._work_ms if unit_start else 0
        request = {
            "op": "write",
            **value,
            "prev": prev,
            "work_ms": work_ms,
            "check_lease": unit_start,
        }
        done = self._call("write", value, request, timeout=self._timeout + work_ms / 1000)
        if done.refused:
            self._board.gave_up(value["lock"], self._node)
        return done

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> Completion:
        """Read a key's entries; with ``lock`` and ``epoch`` a fenced read."""
        value: dict[str, Any] = {"sink": sink, "key": key}
        if lock is not None and epoch is not None:
            value.update(lock=lock, epoch=epoch)
        done = self._call("read", value, {"op": "read", **value})
        if done.refused and lock is not None:
            self._board.gave_up(lock, self._node)
        return done

    def _call(
        self,
        f: str,
        value: dict[str, Any],
        request: dict[str, Any],
        timeout: float | None = None,
    ) -> Completion:
        writing = f == "write"
        if writing:
            self._board.began_write(self._node, request.get("work_ms", 0) / 1000)
        done: Completion | None = None
        try:
            done = self._send(f, value, request, timeout)
        finally:
            if writing:
                self._board.ended_write(self._node, accepted=done is not None and done.ok)
        if done.error is not None and done.error.partition(":")[0] in _OUTAGE:
            self._outages += 1
            self._stop.wait(backoff_delay(self._outages, self._lease_ttl, self._backoff_rng))
        else:
            self._outages = 0
        return done

    def _send(
        self,
        f: str,
        value: dict[str, Any],
        request: dict[str, Any],
        timeout: float | None,
    ) -> Completion:
        record = self._recorder.record
        record(self._process, "invoke", f, value, node=self._node)
        try:
            answer = self._link.call(request, timeout or self._timeout)
        except AgentUnreachable as err:
            record(self._process, "fail", f, value, node=self._node, error="unreachable")
            return Completion("fail", value, f"unreachable: {err}")
        if answer is None or answer.get("info"):
            error = "timeout" if answer is None else str(answer.get("error", "unknown"))
            record(self._process, "info", f, value, node=self._node, error=error)
            self._process += self._stride
            return Completion("info", value, error)
        if answer.get("ok"):
            result = {**value, **{k: v for k, v in answer.items() if k not in ("ok", "info")}}
            record(self._process, "ok", f, result, node=self._node)
            return Completion("ok", result)
        error = str(answer.get("error", "failed"))
        record(self._process, "fail", f, value, node=self._node, error=error)
        return Completion("fail", value, error)
