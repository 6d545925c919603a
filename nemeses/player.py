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
``"interrupted": true`` on its stop event. Every event carries its kind's ``facts`` (from the
registry entry: ``stops_holder``, ``moves_clock``, ``restarts``, ``parts``), and the stop of a
kind that restarts a daemon names the nodes it restarted (``restarted``), so that readers below
the nemeses never test a kind's name. The player is the one writer of this value: each event is
built as a :class:`harness.record.NemesisEvent` (its schema) and recorded as its JSON.

A window with ``end_after_writes`` ends once another node took the lease over from the window's
targets and had that many writes accepted since its grant, adding ``takeover`` (run clock, ns) and
``new_holder``; that stop's ``scheduled`` is when it was due. A window that waited for its targets
(a holder, a write call, a waiter) lasts its whole length from when it found them, and its
overlays' moments move with it: a drawn multiple of the TTL is what the fault lasts. A compound
kind is played as overlapping windows of its parts (:attr:`nemeses.kinds.FaultKind.composed`), by
the mechanism below: the player never sees one.

Overlapping windows (issue 26; the parameters are :mod:`nemeses.schedule`'s): each window plays in
a thread of its own, a base window once every earlier one ended, an overlay (``overlaps``) beside
its base, from its ``anchor``: its start (``inside``; not before its base has begun, which a
base aimed at the holder may do late), the takeover or grant
(``start_after_writes``; it begins then, its ``scheduled`` is that moment, and it lasts its length
from there), or its base's restart (it begins before the base's stop restarts the daemon). A
symbolic target steers clear of the nodes that windows in force hold with a fault its kind does
not compose with (``steered_clear_of``). ``aim: call`` starts a holder window inside a write call
(``in_call``), ``resume: in-flight`` ends one on another holder's write in flight
(``resumed_in_flight``), ``release_with`` ends an overlay with its base, ``resumes_base`` ends the
base once the overlay's restart is done (``resumed_on_restart``). Nemesis calls of one kind are
serialized, of different kinds not: a slow restart holds up no other window.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Protocol

from harness.node import Node
from harness.record import SAID, NemesisEvent, PowerLoss
from nemeses.kinds import conflict
from nemeses.protocol import Fault, HealReport, Nemesis, NemesisError, start_f, stop_f
from nemeses.registry import fault_kind, fault_words
from nemeses.schedule import (
    AIM,
    ANCHOR,
    CALL_SHARE,
    END_AFTER_WRITES,
    HOLDER,
    HOLDER_MEMBER,
    LOCK_FOLLOWER,
    LOCK_LEADER,
    OVERLAPS,
    RELEASE_WITH,
    RESUME,
    RESUMES_BASE,
    START_AFTER_WRITES,
    WAITER,
    Window,
    resolve,
)

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

    def in_write_call(self, node: str) -> float | None:
        """Seconds since ``node`` called the adapter's client to write, or ``None`` when it is
        not inside such a call."""
        ...

    def typical_call_s(self) -> float | None:
        """How long a write call typically lasts (seconds), or ``None`` before the first."""
        ...

    def in_flight(self, node: str) -> bool:
        """True while ``node`` has a write in flight."""
        ...


_JOIN_TIMEOUT_S: Final = 30.0
_HOLDER_POLL_S: Final = 0.005
_WRITE_POLL_S: Final = 0.001
_MID_WRITE_WAIT_TTL: Final = 0.25
"""How long a holder-aimed window waits for the holder to be inside a write, in lease TTLs."""
_IN_CALL_WAIT_TTL: Final = 0.5
"""How long a window aimed inside a write call waits for one at its drawn point, in TTLs."""
_RESUME_WAIT_TTL: Final = 0.25
"""How long past its end a window resuming on another's write waits for one, in TTLs."""
_RELEASE_TAIL_TTL: Final = 0.5
"""How long past its base's scheduled end an overlay released with it waits for that end."""


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
        # One per kind, held around its nemesis calls: windows of other kinds (an overlay and
        # its base) start and stop meanwhile, a kind's own calls never race, and heal (which
        # takes them all) never races a fault being applied.
        self._kind_locks = {kind: threading.Lock() for kind in sorted({w.kind for w in windows})}
        # Held around the player's own state (what is in force, whether it was healed).
        self._lock = threading.Lock()
        self._healed = False
        # By window index: the windows in force now (an overlay is in force with its base).
        self._in_force: dict[int, tuple[Window, Fault, dict[str, Any]]] = {}
        self._resolved: dict[int, Fault] = {}
        # By window index: how long it waited for its targets (a holder, a write call, a waiter)
        # before it began, ns; set once it found them. Its length and its overlays' moments count
        # from then: a 1.1 TTL pause that waited half a TTL for a write call and still ended on
        # time never outlived the lease. (_waited: the waits of a window still looking.)
        self._late: dict[int, int] = {}
        self._waited: dict[int, int] = {}
        self._ending = {window.index: threading.Event() for window in self._windows}
        self._begun = {window.index: threading.Event() for window in self._windows}
        # Set once a window's moment came and its fault is being applied (before it is confirmed:
        # a kill confirmed late on a busy node has still begun the restart its base waits for).
        self._starting = {window.index: threading.Event() for window in self._windows}
        self._stopped = {window.index: threading.Event() for window in self._windows}
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
        with contextlib.ExitStack() as held:
            for lock in self._kind_locks.values():
                held.enter_context(lock)
            held.enter_context(self._lock)
            self._healed = True
            report = self._nemesis.heal()
            open_windows = list(self._in_force.values())
            self._in_force.clear()
            for window, _, value in open_windows:
                errors = list(report.errors)
                self._record_safely(
                    stop_f(window.kind),
                    self._outcome(
                        stop_f(window.kind), value, window.end_ns, errors, interrupted=True
                    ),
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
            playing: list[threading.Thread] = []
            for window in self._windows:
                if OVERLAPS not in window.params:
                    # A base window waits for the earlier ones: base windows never overlap,
                    # and one that ended late must not make them.
                    for thread in playing:
                        thread.join()
                    playing = []
                if self._crash is not None or not self._sleep_until(self._launch_ns(window)):
                    return
                thread = threading.Thread(
                    target=self._play_window, args=(window,), name=f"window-{window.index}"
                )
                thread.daemon = True
                thread.start()
                playing.append(thread)
            for thread in playing:
                thread.join()
        except BaseException as crash:  # kept for join(); the thread must not die silently
            self._crash = crash

    def _launch_ns(self, window: Window) -> int:
        """When ``window``'s thread begins: its start, or its base's for an overlay aimed at a
        moment of the base that is not a fixed time."""
        base = window.params.get(OVERLAPS)
        if window.params.get(ANCHOR) in (None, "inside") or not isinstance(base, int):
            return window.start_ns
        return min(window.start_ns, *(w.start_ns for w in self._windows if w.index == base))

    def _play_window(self, window: Window) -> None:
        try:
            started = self._await_anchor(window)
            if started is None:
                return
            self._starting[window.index].set()
            if not self._start(window, started):
                return
            self._begun[window.index].set()
            self._end(window, self._middle(window, started + self._late.get(window.index, 0)))
        except BaseException as crash:  # kept for join(); the thread must not die silently
            self._crash = crash
            self._stopping.set()

    def _await_anchor(self, window: Window) -> int | None:
        """Wait for the moment ``window`` starts at (module docs of :mod:`nemeses.schedule`);
        returns it (run clock), or ``None`` when asked to stop first."""
        anchor, base = window.params.get(ANCHOR), window.params.get(OVERLAPS)
        if anchor in (None, "inside") or not isinstance(base, int):
            if not self._sleep_until(window.start_ns):
                return None
            if anchor != "inside" or not isinstance(base, int):
                return window.start_ns
            waited = self._await_base(window, base)
            # Its share into the base counts from when the base found its targets.
            due = window.start_ns + self._late.get(base, 0)
            if self._stopping.is_set() or not self._sleep_until(due):
                return None
            return self._clock() if waited else due
        if anchor == "restart":
            ending = self._ending.get(base)
            while ending is not None and not ending.is_set():
                if self._due(window, base) or self._stopping.wait(_WRITE_POLL_S):
                    break
        else:
            writes = int(window.params.get(START_AFTER_WRITES, 0))
            while not self._taken_over(base, writes):
                if self._due(window, base) or self._stopping.wait(_WRITE_POLL_S):
                    break
        return None if self._stopping.is_set() else self._clock()

    def _due(self, window: Window, base: int) -> bool:
        """True once the latest start of ``window``, an overlay waiting for a moment of window
        ``base``, has come: counted from when the base found its targets, so never while it is
        still looking for them (a bounded wait)."""
        late = self._late.get(base)
        return late is not None and self._clock() >= window.start_ns + late

    def _await_base(self, window: Window, base: int) -> bool:
        """Wait until window ``base`` has begun (its fault in force, or its failure recorded)
        or ended, half a TTL past its scheduled end at the latest; True when that meant waiting.
        A base aimed at the holder may begin well after its scheduled start (it waits for a
        holder, a write or a call); an overlay aimed inside it that began first could not steer
        clear of the base's nodes, and a pause landed on the agent its base was killing."""
        begun, stopped = self._begun.get(base), self._stopped.get(base)
        if begun is None or stopped is None:
            return False
        ends = [w.end_ns for w in self._windows if w.index == base]
        latest = (ends[0] if ends else window.end_ns) + round(_RELEASE_TAIL_TTL * _ttl_ns(window))
        waited = False
        while not (begun.is_set() or stopped.is_set()) and self._clock() < latest:
            waited = True
            if self._stopping.wait(_WRITE_POLL_S / 4):
                break
        return waited

    def _taken_over(self, base: int, writes: int) -> bool:
        """True once a node other than window ``base``'s targets holds the lease and had
        ``writes`` writes accepted since its grant (the takeover itself without a view of them)."""
        fault = self._resolved.get(base)
        holder = self._resolve_holder() if self._resolve_holder is not None else None
        if fault is None or holder is None or holder in fault.targets:
            return False
        work = self._holder_work
        return work is None or work.accepted_since_grant(holder) >= writes

    def _middle(self, window: Window, started: int) -> int:
        """Wait for ``window``'s end; returns when the end was due: its length after it
        ``started``, or a while after a takeover, a release or a restart (module docs)."""
        end = started + window.duration_ns
        writes = window.params.get(END_AFTER_WRITES)
        if isinstance(writes, int):
            due = self._await_takeover(window, writes, end)
            if due is not None:
                return due
        base = window.params.get(RELEASE_WITH)
        if isinstance(base, int):
            return self._await_release(window, base)
        resumers = [
            o.index
            for o in self._windows
            if o.params.get(OVERLAPS) == window.index and o.params.get(RESUMES_BASE)
        ]
        if resumers:
            return self._await_resumer(window, resumers, end)
        self._sleep_until(end)
        return end

    def _await_resumer(self, window: Window, resumers: list[int], end: int) -> int:
        """When the first of the overlays ``resumers`` that began has stopped (its daemon
        restarted and serving), or half a TTL past ``window``'s ``end`` when none began by then.
        One that began is waited for however long its restart takes (the nemesis bounds that):
        the stale holder continued before the restarted daemon serves would meet it down."""
        latest = end + round(_RELEASE_TAIL_TTL * _ttl_ns(window))
        while not self._stopping.is_set():
            begun = [i for i in resumers if self._starting[i].is_set()]
            done = [i for i in begun if self._stopped[i].is_set()]
            if done:
                with self._lock:
                    if window.index in self._in_force:
                        self._in_force[window.index][2]["resumed_on_restart"] = done[0]
                break
            if not begun and self._clock() >= latest:
                break
            self._stopping.wait(_WRITE_POLL_S / 4)
        return self._clock()

    def _await_restart_overlays(self, window: Window) -> None:
        """Let the overlays aimed at ``window``'s restart begin before its stop restarts the
        daemon (a quarter TTL at most), so the restart happens inside them."""
        deadline = self._clock() + _RESUME_WAIT_TTL * _ttl_ns(window)
        for overlay in self._windows:
            if overlay.params.get(OVERLAPS) != window.index:
                continue
            if overlay.params.get(ANCHOR) != "restart":
                continue
            begun = self._begun[overlay.index]
            while not begun.is_set() and self._clock() < deadline:
                if self._stopping.wait(_WRITE_POLL_S / 4):
                    return

    def _await_release(self, window: Window, base: int) -> int:
        """When window ``base`` ends (its stop begins), so that both release their holders at
        once; half a TTL after its scheduled end at the latest."""
        ends = [w.end_ns + self._late.get(base, 0) for w in self._windows if w.index == base]
        latest = (ends[0] if ends else window.end_ns) + round(_RELEASE_TAIL_TTL * _ttl_ns(window))
        ending = self._ending.get(base)
        while ending is not None and not ending.is_set():
            if self._clock() >= latest or self._stopping.wait(_WRITE_POLL_S / 4):
                break
        return self._clock()

    def _await_takeover(self, window: Window, writes: int, end: int) -> int | None:
        """When a node other than the window's targets, holding the lease, had ``writes`` writes
        accepted since its grant (run clock), or ``None`` when that did not happen before the
        window's ``end``. Without :class:`HolderWork` the takeover itself ends it."""
        if self._resolve_holder is None or window.index not in self._in_force:
            return None
        _, fault, value = self._in_force[window.index]
        while (holder := self._resolve_holder()) is None or holder in fault.targets:
            if self._clock() >= end or self._stopping.wait(_HOLDER_POLL_S):
                return None
        taken = self._clock()
        value.update(takeover=taken, new_holder=holder)
        work = self._holder_work
        if work is None:
            return taken
        while work.accepted_since_grant(holder) < writes:
            if self._clock() >= end or self._stopping.wait(_WRITE_POLL_S):
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

    def _start(self, window: Window, started: int) -> bool:
        """Apply and record one window's fault (due at ``started``); False once the player has
        been healed. Its symbols are worked out before the nemesis is called, without the lock:
        a window waiting for the holder must not hold up another's end."""
        f = start_f(window.kind)
        value: dict[str, Any] = {
            "id": window.index,
            "targets": list(window.targets),
            **window.params,
            "ttl_multiple": window.ttl_multiple,
            # Histories explain themselves: a checker renders "w2 was paused" from these.
            **fault_words(window.kind),
        }
        try:
            fault = self._resolve(window, value)
        except Exception as problem:  # recorded: an unapplied fault makes the run unknown
            with self._kind_locks[window.kind]:
                if self._healed:
                    return False
                self._record(f, self._outcome(f, value, started, [str(problem)]))
            return True
        finally:
            # Found or given up: the overlays waiting on this window may count from here.
            self._late[window.index] = self._waited.pop(window.index, 0)
        with self._kind_locks[window.kind]:
            with self._lock:
                if self._healed:
                    return False
                value.update(fault.params, targets=list(fault.targets))
                self._in_force[window.index] = (window, fault, value)
                self._resolved[window.index] = fault
            try:
                facts = self._nemesis.invoke(f, fault)
            except Exception as problem:  # recorded: an unapplied fault makes the run unknown
                self._record(f, self._outcome(f, value, started, [str(problem)]))
                return True
            self._record(f, self._outcome(f, {**value, **facts}, started, []))
        return True

    def _resolve(self, window: Window, value: dict[str, Any]) -> Fault:
        """``window``'s concrete fault: its symbols resolved, steered clear of the nodes that
        windows in force hold with a fault its kind does not compose with."""
        apart = self._held_apart(window)
        holder = self._holder(window, value, apart)
        leader = self._leader(window, value)
        actuals = {
            HOLDER: holder,
            LOCK_LEADER: leader,
            LOCK_FOLLOWER: self._follower(window, leader),
            HOLDER_MEMBER: self._member(window, holder, value),
            WAITER: self._waiter(window, value),
        }
        if apart:
            steered = {
                symbol: self._clear(window, actual, symbol, apart)
                for symbol, actual in actuals.items()
            }
            value["steered_clear_of"] = sorted(apart)
            actuals = steered
        return resolve(
            window,
            list(self._nodes),
            actuals[HOLDER],
            actuals[LOCK_LEADER],
            follower=actuals[LOCK_FOLLOWER],
            member=actuals[HOLDER_MEMBER],
            waiter=actuals[WAITER],
        )

    def _held_apart(self, window: Window) -> set[str]:
        """The nodes that windows in force hold with a fault ``window``'s does not compose
        with (:func:`nemeses.kinds.conflict`)."""
        kind = fault_kind(window.kind)
        with self._lock:
            in_force = list(self._in_force.values())
        apart: set[str] = set()
        for other, fault, _ in in_force:
            other_kind = fault_kind(other.kind)
            if conflict(kind, other_kind) is None:
                continue
            if other_kind.cluster_wide:
                apart |= set(self._nodes)
            apart |= {*fault.targets, *other_kind.touched(other.params)}
        return apart

    def _clear(
        self, window: Window, actual: str | None, symbol: str, apart: set[str]
    ) -> str | None:
        """``actual``, or the first node of the symbol's role outside ``apart`` (the window's
        fallback first, then by name); ``None`` for a symbol the window does not have."""
        if symbol not in window.targets:
            return actual
        role = "worker" if symbol == HOLDER else "lock"
        members = sorted(name for name, node in self._nodes.items() if node.role == role)
        for name in (actual, window.fallback, *members):
            if name is not None and name not in apart:
                return name
        raise NemesisError(
            f"window {window.index} targets the {symbol}, and every {role} node is held by a "
            "fault in force that it does not compose with"
        )

    def _end(self, window: Window, scheduled: int) -> None:
        f = stop_f(window.kind)
        with self._lock:
            in_force = self._in_force.get(window.index)
        resumed = in_force is not None and "resumed_on_restart" in in_force[2]
        if in_force is not None and window.params.get(RESUME) == "in-flight" and not resumed:
            in_force[2]["resumed_in_flight"] = self._await_in_flight(window, in_force[1])
        self._ending[window.index].set()
        self._await_restart_overlays(window)
        with self._kind_locks[window.kind]:
            if window.index not in self._in_force:
                return
            _, fault, value = self._in_force[window.index]
            errors: list[str] = []
            try:
                value.update(self._nemesis.invoke(f, fault))
            except Exception as problem:  # recorded; heal() retries what is still in force
                errors.append(str(problem))
            with self._lock:
                del self._in_force[window.index]
            interrupted = self._stopping.is_set() and self._clock() < scheduled
            self._record(f, self._outcome(f, value, scheduled, errors, interrupted=interrupted))
        self._stopped[window.index].set()

    def _holder(self, window: Window, value: dict[str, Any], apart: set[str]) -> str | None:
        if not (window.wants_holder or window.wants_member):
            return None
        holder = self._await_holder(window, apart)
        if holder is not None and holder not in self._nodes:
            raise NemesisError(f"the lease holder {holder!r} is not a node of this cluster")
        value["holder"] = "lease" if holder is not None else "fallback"
        work = self._holder_work
        if holder is not None and work is not None:
            if window.params.get(AIM) == "call":
                share = float(window.params.get(CALL_SHARE, 0.0))
                value["in_call"] = self._await_in_call(window, holder, work, share)
            else:
                value["mid_write"] = self._await_mid_write(window, holder, work)
        return holder

    def _poll(
        self, ready: Callable[[], bool], within_ns: float, poll_s: float, late: Window | None
    ) -> bool:
        """Ask ``ready`` every ``poll_s`` until it says yes (True), ``within_ns`` passed or the
        player was stopped (False). A wait to start window ``late`` makes it that much late."""
        if ready():
            return True
        began = self._clock()
        try:
            while self._clock() < began + within_ns:
                if self._stopping.wait(poll_s):
                    return False
                if ready():
                    return True
            return False
        finally:
            if late is not None:
                waited = self._clock() - began
                self._waited[late.index] = self._waited.get(late.index, 0) + waited

    def _await_in_call(self, window: Window, holder: str, work: HolderWork, share: float) -> bool:
        """Wait until ``holder`` is ``share`` of a typical write call into one: True then, False
        when no call reached that point within half a TTL (or the player was stopped)."""

        def in_call() -> bool:
            into = work.in_write_call(holder)
            return into is not None and into >= share * (work.typical_call_s() or 0.0)

        within = _IN_CALL_WAIT_TTL * _ttl_ns(window)
        return self._poll(in_call, within, _WRITE_POLL_S / 4, window)

    def _await_in_flight(self, window: Window, fault: Fault) -> bool:
        """Wait until a holder other than ``fault``'s targets has a write in flight: True then,
        False after a quarter TTL (or when the player cannot see writes or was stopped)."""
        work, current = self._holder_work, self._resolve_holder
        if work is None or current is None:
            return False

        def in_flight() -> bool:
            holder = current()
            return holder is not None and holder not in fault.targets and work.in_flight(holder)

        within = _RESUME_WAIT_TTL * _ttl_ns(window)
        return self._poll(in_flight, within, _WRITE_POLL_S / 4, None)

    def _await_mid_write(self, window: Window, holder: str, work: HolderWork) -> bool:
        """Wait until ``holder`` is inside a write's critical section: True then, False when it
        was not within a quarter TTL (or the player was stopped)."""
        within = _MID_WRITE_WAIT_TTL * _ttl_ns(window)
        return self._poll(lambda: work.in_critical_section(holder), within, _WRITE_POLL_S, window)

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
        current = self._resolve_waiter
        if not window.wants_waiter or current is None:
            return None
        seen: list[str | None] = [None]

        def queued() -> bool:
            seen[0] = current()
            return seen[0] is not None

        self._poll(queued, _ttl_ns(window), _HOLDER_POLL_S, window)
        waiter = seen[0]
        if waiter is not None and waiter not in self._nodes:
            raise NemesisError(f"the waiting worker {waiter!r} is not a node of this cluster")
        value["waiter"] = "waiting" if waiter is not None else "fallback"
        return waiter

    def _await_holder(self, window: Window, apart: set[str]) -> str | None:
        """The holder now, or within one lease TTL: a window that opens during a handover
        (one holder released, the next not yet granted) waits for the next holder rather than
        pausing a worker that holds nothing, which would expose nothing; a holder in ``apart``
        counts as none (another fault holds it)."""
        current = self._resolve_holder
        if current is None:
            return None
        seen: list[str | None] = [None]

        def free() -> bool:
            seen[0] = current()
            return seen[0] is not None and seen[0] not in apart

        found = self._poll(free, _ttl_ns(window), _HOLDER_POLL_S, window)
        return seen[0] if found or not self._stopping.is_set() else None

    def _outcome(
        self,
        f: str,
        value: dict[str, Any],
        scheduled: int,
        errors: list[str],
        *,
        interrupted: bool = False,
    ) -> dict[str, Any]:
        """The typed event (:class:`harness.record.NemesisEvent`) of what ``value`` gathered
        about one window, with the kind's facts, as the history's JSON."""
        kind = fault_kind(f.partition("-")[2])
        rest = dict(value)
        for derived in ("applied", "error", "confirmed", "scheduled", "interrupted"):
            rest.pop(derived, None)
        targets = tuple(str(target) for target in rest.pop("targets", ()))
        lost = rest.pop("lost", None)
        restarted: tuple[str, ...] = ()
        if kind.restarts and f == stop_f(kind.name) and not errors:
            restarted = kind.restarted(targets, value)
        event = NemesisEvent(
            f=f,
            window=rest.pop("id", None),
            targets=targets,
            applied=not errors,
            error="; ".join(errors) or None,
            facts=kind.facts(),
            verb=rest.pop("verb", None),
            part_verbs=tuple(rest.pop("part_verbs", ())),
            scheduled=scheduled,
            confirmed=None if errors else self._clock(),
            interrupted=interrupted,
            ttl_multiple=rest.pop("ttl_multiple", None),
            holder=rest.pop("holder", None),
            mid_write=rest.pop("mid_write", None),
            said=rest.pop(SAID, None),
            restarted=restarted,
            by_s=rest.pop("by_s", None),
            rate=rest.pop("rate", None),
            lost=PowerLoss.from_json(lost, 0) if isinstance(lost, dict) else None,
            params=rest,
        )
        return event.to_json()

    def _record_safely(self, f: str, value: dict[str, Any], report: HealReport) -> None:
        try:
            self._record(f, value)
        except Exception as problem:  # the history may be closed already; healing still counts
            report.errors.append(f"could not record {f}: {problem}")


def _ttl_ns(window: Window) -> float:
    """The lease TTL ``window`` was drawn for (0 when it cannot say)."""
    return window.duration_ns / window.ttl_multiple if window.ttl_multiple > 0 else 0.0


def _fs_of(window: Window) -> tuple[str, ...]:
    """The operations playing ``window`` takes: its start and its stop."""
    return (start_f(window.kind), stop_f(window.kind))
