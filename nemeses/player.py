"""Plays a fault schedule against a cluster in a background thread, and guarantees healing.

Usage by the runner::

    player = NemesisPlayer(nodes, standard_nemesis(spec.nemeses), schedule.windows,
                           clock=recorder.now, record=recorder.record_nemesis,
                           resolve_holder=holder_board.current, holder_work=holder_board)
    with player:            # start(): nemesis setup, then the thread
        ...run the workload...
    # leaving the block, also by Ctrl-C, SIGTERM (if turned into an exception) or any exception:
    # stop, join, heal every fault in force, tear the nemesis down

Each window gives two calls of ``record(f, value)``, from the player's thread (the callback must be
thread-safe): ``start-<kind>`` once the fault is confirmed, ``stop-<kind>`` once it is confirmed
undone. ``value`` holds ``id`` (the window index), ``targets`` (node names), ``verb`` (the kind's
verb for sentences; ``part_verbs`` for a compound's parts), the fault's parameters
(``process``, ``cpu``, ``topology``, ``peers``, ``drops``…) and facts observed (``pids``…),
``scheduled`` and ``confirmed`` (run clock, ns), ``ttl_multiple``, ``applied``, and ``error`` when
``applied`` is false; ``holder`` is ``"lease"`` or ``"fallback"`` for a window aimed at the holder
(or its member), with ``mid_write`` when the player can see the holder's writes (``holder_work``):
true when the window began inside one of them (between its lease check and its send: a pause there
outlives the lease with the write still to come; elsewhere the holder checks its lease again and
a correct and a buggy sink look alike), false when none came within a quarter TTL; ``leader``
``"elected"`` or ``"fallback"`` for one aimed at the leader or a follower, ``member``
``"client"`` or ``"fallback"`` for one aimed at the holder's member, ``waiter`` ``"waiting"`` or
``"fallback"`` for one aimed at a worker waiting for a lock (``resolve_waiter``).
A window cut short by :meth:`NemesisPlayer.stop` or :meth:`NemesisPlayer.heal` gets
``"interrupted": true`` on its stop event.

A compound window places its second fault by two parameters (see :mod:`nemeses.schedule`): with
``step_at_ns`` the player performs ``step-<kind>`` that long after the window started and adds
``step_scheduled`` and ``step_confirmed`` (or ``step_error``, which makes the window not applied)
and the step's facts to the stop event; with ``end_after_writes`` it ends the window once another
node took the lease over from the window's targets and had that many writes accepted since its
grant, adding ``takeover`` (run clock, ns) and ``new_holder``; that stop's ``scheduled`` is when
it was due.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Protocol

from harness.node import Node
from nemeses.protocol import Fault, HealReport, Nemesis, NemesisError, start_f, step_f, stop_f
from nemeses.registry import fault_words
from nemeses.schedule import END_AFTER_WRITES, LOCK_FOLLOWER, STEP_AT_NS, Window, resolve

__all__ = [
    "Clock",
    "HolderWork",
    "NemesisPlayer",
    "Recorder",
    "ResolveHolder",
    "ResolveMember",
    "ResolveWaiter",
]

Clock = Callable[[], int]
"""The run clock: nanoseconds since the run began."""
Recorder = Callable[[str, dict[str, Any]], None]
"""Records one nemesis event: ``record(f, value)``."""
ResolveHolder = Callable[[], str | None]
"""Names the node holding the lease now, or ``None`` when nobody does."""
ResolveMember = Callable[[str], str | None]
"""Names the lock-service member a worker's client talks to, or ``None`` when unknown."""
ResolveWaiter = Callable[[], str | None]
"""Names a worker waiting for a lock now (its acquire open, holding none), or ``None``."""


class HolderWork(Protocol):
    """What the player can see of the holders' writes (the runner's holder board)."""

    def in_critical_section(self, node: str) -> bool:
        """True while ``node`` is inside a write, past its lease check, with its send still
        well ahead."""
        ...

    def accepted_since_grant(self, node: str) -> int:
        """How many of ``node``'s writes were accepted since it was last granted a lock."""
        ...


_JOIN_TIMEOUT_S: Final = 30.0
_HOLDER_POLL_S: Final = 0.005
_WRITE_POLL_S: Final = 0.001
_MID_WRITE_WAIT_TTL: Final = 0.25
"""How long a holder-aimed window waits for the holder to be inside a write, in lease TTLs."""


class NemesisPlayer:
    """Runs ``windows`` with ``nemesis`` on ``nodes`` (by name), timed by ``clock``.

    :meth:`start` sets the nemesis up and starts the thread; :meth:`stop` asks it to end the
    fault in force and play no more; :meth:`join` waits for it; :meth:`heal` stops, joins and
    undoes everything still in force (idempotent, never raises for a fault it cannot undo: the
    report says). As a context manager it starts on entry and heals and tears down on exit.
    """

    def __init__(
        self,
        nodes: Mapping[str, Node],
        nemesis: Nemesis,
        windows: Sequence[Window],
        clock: Clock,
        record: Recorder,
        resolve_holder: ResolveHolder | None = None,
        resolve_leader: ResolveHolder | None = None,
        resolve_member: ResolveMember | None = None,
        holder_work: HolderWork | None = None,
        resolve_waiter: ResolveWaiter | None = None,
    ) -> None:
        self._nodes = dict(nodes)
        self._nemesis = nemesis
        self._windows = sorted(windows, key=lambda window: window.start_ns)
        self._clock = clock
        self._record = record
        self._resolve_holder = resolve_holder
        self._resolve_leader = resolve_leader
        self._resolve_member = resolve_member
        self._holder_work = holder_work
        self._resolve_waiter = resolve_waiter
        self._stopping = threading.Event()
        # Held around every nemesis call, so heal never races a fault being applied.
        self._lock = threading.Lock()
        self._healed = False
        self._in_force: tuple[Window, Fault, dict[str, Any]] | None = None
        self._thread: threading.Thread | None = None
        self._crash: BaseException | None = None
        self.report = HealReport()
        """What the last :meth:`heal` did and could not do."""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Set the nemesis up on the nodes, then play the windows in a background thread.

        Raises :class:`NemesisError` before anything runs if a window's kind is not one the
        nemesis performs.
        """
        if self._thread is not None:
            raise NemesisError("this player has already been started")
        missing = sorted({w.kind for w in self._windows if not set(_fs_of(w)) <= self._nemesis.fs})
        if missing:
            raise NemesisError(
                f"the schedule has {', '.join(missing)} faults, which this nemesis does not "
                f"perform; build it with standard_nemesis({missing!r}) or drop those windows"
            )
        self._nemesis.setup(self._nodes)
        self._thread = threading.Thread(target=self._play, name="nemesis-player", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the fault in force (recording its stop) and play no further windows."""
        self._stopping.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to finish; raise :class:`NemesisError` if it crashed."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self._crash is not None:
            raise NemesisError(f"the nemesis player crashed: {self._crash}") from self._crash

    @property
    def running(self) -> bool:
        """True while the thread plays."""
        return self._thread is not None and self._thread.is_alive()

    def heal(self) -> HealReport:
        """Stop, wait for the thread (30 s at most), and undo every fault still in force.

        Safe to call more than once and from any thread; a window still open gets its stop
        event (``interrupted``). The report is also kept in :attr:`report`.
        """
        self.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(_JOIN_TIMEOUT_S)
        with self._lock:
            self._healed = True
            report = self._nemesis.heal()
            open_window = self._in_force
            self._in_force = None
            if open_window is not None:
                window, _, value = open_window
                errors = [*_step_errors(value), *report.errors]
                self._record_safely(
                    stop_f(window.kind),
                    self._outcome(value, window.end_ns, errors, interrupted=True),
                    report,
                )
        self.report = report
        return report

    def close(self) -> HealReport:
        """Heal, then tear the nemesis down; returns the heal report (teardown errors added)."""
        report = self.heal()
        try:
            self._nemesis.teardown()
        except Exception as problem:  # the report carries it; healing already did what it could
            report.errors.append(f"teardown: {problem}")
        return report

    def __enter__(self) -> NemesisPlayer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        report = self.close()
        if report.ok:
            self.join(0)
            return
        problem = "faults may still be in force: " + "; ".join(report.errors)
        if exc is not None:
            exc.add_note(problem)
            return
        raise NemesisError(problem)

    # -- the thread -------------------------------------------------------------------------

    def _play(self) -> None:
        try:
            for window in self._windows:
                if not self._sleep_until(window.start_ns):
                    return
                if not self._start(window):
                    return
                self._end(window, self._middle(window))
        except BaseException as crash:  # kept for join(); the thread must not die silently
            self._crash = crash

    def _middle(self, window: Window) -> int:
        """Play what happens inside ``window`` (its step) and wait for its end; returns when the
        end was due: the scheduled end, or a while after a takeover (see the module docs)."""
        step = window.params.get(STEP_AT_NS)
        if isinstance(step, int) and 0 <= step < window.duration_ns:
            if not self._sleep_until(window.start_ns + step):
                return window.end_ns
            self._step(window, window.start_ns + step)
        writes = window.params.get(END_AFTER_WRITES)
        if isinstance(writes, int):
            due = self._await_takeover(window, writes)
            if due is not None:
                return due
        self._sleep_until(window.end_ns)
        return window.end_ns

    def _step(self, window: Window, scheduled: int) -> None:
        """Perform ``window``'s middle step; its facts (or error) go on the stop event."""
        with self._lock:
            if self._in_force is None or self._in_force[0] is not window:
                return
            _, fault, value = self._in_force
            value["step_scheduled"] = scheduled
            try:
                value.update(self._nemesis.invoke(step_f(window.kind), fault))
            except Exception as problem:  # recorded on the stop: the window was not applied
                value["step_error"] = str(problem)
                return
            value["step_confirmed"] = self._clock()

    def _await_takeover(self, window: Window, writes: int) -> int | None:
        """When a node other than the window's targets, holding the lease, had ``writes`` writes
        accepted since its grant (run clock), or ``None`` when that did not happen before the
        window's scheduled end. Without :class:`HolderWork` the takeover itself ends it."""
        if self._resolve_holder is None or self._in_force is None:
            return None
        _, fault, value = self._in_force
        while (holder := self._resolve_holder()) is None or holder in fault.targets:
            if self._clock() >= window.end_ns or self._stopping.wait(_HOLDER_POLL_S):
                return None
        taken = self._clock()
        value.update(takeover=taken, new_holder=holder)
        work = self._holder_work
        if work is None:
            return taken
        while work.accepted_since_grant(holder) < writes:
            if self._clock() >= window.end_ns or self._stopping.wait(_WRITE_POLL_S):
                return None
        return self._clock()

    def _sleep_until(self, when_ns: int) -> bool:
        """Wait until the run clock reaches ``when_ns``; False if asked to stop first."""
        while not self._stopping.is_set():
            left = when_ns - self._clock()
            if left <= 0:
                return True
            self._stopping.wait(left / 1e9)
        return False

    def _start(self, window: Window) -> bool:
        """Apply and record one window's fault; False once the player has been healed."""
        f = start_f(window.kind)
        with self._lock:
            if self._healed:
                return False
            value: dict[str, Any] = {
                "id": window.index,
                "targets": list(window.targets),
                **window.params,
                "ttl_multiple": window.ttl_multiple,
                # Histories explain themselves: a checker renders "w2 was paused" from these.
                **fault_words(window.kind),
            }
            try:
                holder = self._holder(window, value)
                leader = self._leader(window, value)
                fault = resolve(
                    window,
                    list(self._nodes),
                    holder,
                    leader,
                    follower=self._follower(window, leader),
                    member=self._member(window, holder, value),
                    waiter=self._waiter(window, value),
                )
                value.update(fault.params, targets=list(fault.targets))
                self._in_force = (window, fault, value)
                facts = self._nemesis.invoke(f, fault)
            except Exception as problem:  # recorded: an unapplied fault makes the run unknown
                self._record(f, self._outcome(value, window.start_ns, [str(problem)]))
                return True
            self._record(f, self._outcome({**value, **facts}, window.start_ns, []))
        return True

    def _end(self, window: Window, scheduled: int) -> None:
        f = stop_f(window.kind)
        with self._lock:
            if self._in_force is None or self._in_force[0] is not window:
                return
            _, fault, value = self._in_force
            errors = _step_errors(value)
            try:
                value.update(self._nemesis.invoke(f, fault))
            except Exception as problem:  # recorded; heal() retries what is still in force
                errors.append(str(problem))
            self._in_force = None
            interrupted = self._stopping.is_set() and self._clock() < scheduled
            self._record(f, self._outcome(value, scheduled, errors, interrupted=interrupted))

    def _holder(self, window: Window, value: dict[str, Any]) -> str | None:
        if not (window.wants_holder or window.wants_member):
            return None
        holder = self._await_holder(window)
        if holder is not None and holder not in self._nodes:
            raise NemesisError(f"the lease holder {holder!r} is not a node of this cluster")
        value["holder"] = "lease" if holder is not None else "fallback"
        if holder is not None and self._holder_work is not None:
            value["mid_write"] = self._await_mid_write(window, holder, self._holder_work)
        return holder

    def _await_mid_write(self, window: Window, holder: str, work: HolderWork) -> bool:
        """Wait until ``holder`` is inside a write's critical section: True then, False when it
        was not within a quarter TTL (or the player was stopped)."""
        deadline = self._clock() + _MID_WRITE_WAIT_TTL * _ttl_ns(window)
        while self._clock() < deadline:
            if work.in_critical_section(holder):
                return True
            if self._stopping.wait(_WRITE_POLL_S):
                return False
        return False

    def _leader(self, window: Window, value: dict[str, Any]) -> str | None:
        if not window.wants_leader:
            return None
        leader = self._resolve_leader() if self._resolve_leader is not None else None
        if leader is not None and leader not in self._nodes:
            raise NemesisError(f"the lock leader {leader!r} is not a node of this cluster")
        value["leader"] = "elected" if leader is not None else "fallback"
        return leader

    def _follower(self, window: Window, leader: str | None) -> str | None:
        """A lock node other than ``leader``: the window's drawn one if it follows, else the
        next by name (so the same seed and leader give the same follower); ``None`` when the
        leader is unknown (the drawn node stands in)."""
        if LOCK_FOLLOWER not in window.targets or leader is None:
            return None
        members = sorted(name for name, node in self._nodes.items() if node.role == "lock")
        followers = [name for name in members if name != leader]
        if window.fallback in followers:
            return window.fallback
        later = [name for name in followers if window.fallback is None or name > window.fallback]
        choices = later or followers
        return choices[0] if choices else None

    def _member(self, window: Window, holder: str | None, value: dict[str, Any]) -> str | None:
        """The lock-service member ``holder``'s client talks to, as the system says."""
        if not window.wants_member:
            return None
        member = None
        if holder is not None and self._resolve_member is not None:
            member = self._resolve_member(holder)
        if member is not None and member not in self._nodes:
            raise NemesisError(f"the holder's member {member!r} is not a node of this cluster")
        value["member"] = "client" if member is not None else "fallback"
        return member

    def _waiter(self, window: Window, value: dict[str, Any]) -> str | None:
        """A worker waiting for a lock now, or within one lease TTL (a window that opens while
        every worker holds or works waits for one to queue); ``None`` when none did."""
        if not window.wants_waiter or self._resolve_waiter is None:
            return None
        deadline = self._clock() + _ttl_ns(window)
        while (waiter := self._resolve_waiter()) is None and self._clock() < deadline:
            if self._stopping.wait(_HOLDER_POLL_S):
                break
        if waiter is not None and waiter not in self._nodes:
            raise NemesisError(f"the waiting worker {waiter!r} is not a node of this cluster")
        value["waiter"] = "waiting" if waiter is not None else "fallback"
        return waiter

    def _await_holder(self, window: Window) -> str | None:
        """The holder now, or within one lease TTL: a window that opens during a handover
        (one holder released, the next not yet granted) waits for the next holder rather than
        pausing a worker that holds nothing, which would expose nothing."""
        if self._resolve_holder is None:
            return None
        deadline = self._clock() + _ttl_ns(window)
        while (holder := self._resolve_holder()) is None and self._clock() < deadline:
            if self._stopping.wait(_HOLDER_POLL_S):
                return None
        return holder

    def _outcome(
        self,
        value: dict[str, Any],
        scheduled: int,
        errors: list[str],
        *,
        interrupted: bool = False,
    ) -> dict[str, Any]:
        outcome = {**value, "scheduled": scheduled}
        if errors:
            outcome.update(applied=False, error="; ".join(errors))
        else:
            outcome.update(confirmed=self._clock(), applied=True)
        if interrupted:
            outcome["interrupted"] = True
        return outcome

    def _record_safely(self, f: str, value: dict[str, Any], report: HealReport) -> None:
        try:
            self._record(f, value)
        except Exception as problem:  # the history may be closed already; healing still counts
            report.errors.append(f"could not record {f}: {problem}")


def _ttl_ns(window: Window) -> float:
    """The lease TTL ``window`` was drawn for (0 when it cannot say)."""
    return window.duration_ns / window.ttl_multiple if window.ttl_multiple > 0 else 0.0


def _fs_of(window: Window) -> tuple[str, ...]:
    """The operations playing ``window`` takes: start and stop, and its step if it has one."""
    steps = (step_f(window.kind),) if STEP_AT_NS in window.params else ()
    return (start_f(window.kind), stop_f(window.kind), *steps)


def _step_errors(value: dict[str, Any]) -> list[str]:
    """Why the window's step failed, as the first of its stop's errors (or none)."""
    return [f"step: {value['step_error']}"] if "step_error" in value else []
