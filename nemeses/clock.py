"""Clock faults: a process's clock jumps (``clock-step``) or runs fast or slow (``clock-rate``).

A lease is a promise about time; these faults break the clock it is measured by, in one process at
a time, never the host's: the target daemon runs under libfaketime with a control file of its own
(:func:`systems.deploy.start_clocked`), and the fault rewrites that file on the node
(:func:`harness.nodeside.clock.apply`, which does the arithmetic at the node's real time). Both the
wall and the monotonic clock move (:mod:`harness.nodeside.clock` says what that costs). Confirmed
from inside the faulted process: right after the write the node-side writer reads the process's
own clock (a wire server's ``clock`` answer, Redis ``TIME``), and the nemesis checks each reading
against the schedule.
Each start and stop records, per daemon, the scheduled and the confirmed clock, and which clocks
moved (``clocks``: a daemon started wall only keeps its monotonic clock, as an NTP step does).

- ``clock-step``: the clock jumps ``by_s`` seconds (signed; a schedule draws 0.5, 1.1 or 3 lease
  TTLs, forward or backward) at the start; at the end it jumps back (``back``) or stays.
- ``clock-rate``: the clock runs at ``rate`` (0.25, 0.5, 2 or 4) for the window, without a jump at
  either edge; what it gained or lost stays. A schedule draws the unsafe way for the role: slow
  for a holder's agent (its lease outlives the service's), fast for the lock service.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Final

from harness.node import Daemon, Node, NodeError
from harness.nodeside import clock
from harness.nodeside.clock import ClockState, Preload
from harness.record import SAID
from nemeses._base import ProcessNemesis
from nemeses.kinds import Draw, FaultKind, Leftovers, ManualCommand, ManualOption
from nemeses.pause import process_params
from nemeses.processes import run_script
from nemeses.protocol import Fault, HealReport, NemesisError, fault_fs

__all__ = [
    "BOTH",
    "CLOCK_RATE",
    "CLOCK_STEP",
    "RATES",
    "RATE_KIND",
    "STEP_KIND",
    "STEP_TTL_MULTIPLES",
    "WALL",
    "ClockNemesis",
    "ClockRateNemesis",
    "ClockStepNemesis",
]

CLOCK_STEP: Final = "clock-step"
CLOCK_RATE: Final = "clock-rate"
STEP_TTL_MULTIPLES: Final = (0.5, 1.1, 3.0)
"""The sizes of a drawn step, in lease TTLs: within the lease, just past it, far past it."""
RATES: Final = (0.25, 0.5, 2.0, 4.0)
"""The rates a schedule draws: a lease measured by them lasts 4x, 2x, 0.5x or 0.25x as long."""
_STRETCHING: Final = {"worker": (0.25, 0.5), "lock": (2.0, 4.0)}
"""The rates drawn for a window aimed at a role, the way that moves a lease across its expiry
unsafely: a holder's slow clock stretches its lease past the service's end of it, a lock
service's fast clock shrinks the lease under its holder. The other way costs only liveness."""

WALL: Final = "wall"
"""A change's ``clocks`` fact when only the wall clock moved (a daemon started wall only)."""
BOTH: Final = "wall+monotonic"
"""A change's ``clocks`` fact when the wall and the monotonic clock moved."""
_SOURCE: Final = Path(clock.__file__).read_text()
_WRITE_TIMEOUT_S: Final = 20.0
# A reading may miss the schedule by its own round trip (it is taken somewhere inside it) and a
# few ms. An "@" rewrite (a rate other than 1; see clock) also holds the clock at its value from
# the write until the process next reads it, no later than the first reading: the clock may then
# run behind the schedule by the rate times that wait. On a loaded machine a 4x window read
# 117 ms behind and a 0.25x one 67 ms (measured), which 20 ms alone called failed faults.
_SLACK_S: Final = 0.02


class ClockNemesis(ProcessNemesis[tuple[Node, Daemon, Preload]]):
    """Base of the two clock kinds: ``change`` says what a start or a stop does to the clock."""

    kind: ClassVar[str]

    @property
    def fs(self) -> frozenset[str]:
        """``start-<kind>`` and ``stop-<kind>``."""
        return fault_fs(self.kind)

    def change(self, fault: Fault, starting: bool) -> tuple[str, float] | None:
        """``(change, amount)`` for :func:`harness.nodeside.clock.apply`; ``None``: leave it."""
        raise NotImplementedError

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Change the targets' clocks, each confirmed by reading it from inside its process."""
        starting = self.starts(f)
        clocks: dict[str, Any] = {}
        for facts in self.on_targets(fault, lambda node: self._on_node(node, fault, starting)):
            clocks.update(facts)
        said = "; ".join(dict.fromkeys(_sentence(where, facts) for where, facts in clocks.items()))
        return {"clocks": clocks, SAID: said}

    def _on_node(self, node: Node, fault: Fault, starting: bool) -> dict[str, Any]:
        if starting:
            aimed = [(node, d, preload_of(node, d)) for d in self.daemons_of(node, fault)]
            with self.lock:
                self.held.setdefault(fault.key, []).extend(aimed)
        else:
            with self.lock:
                held = self.held.pop(fault.key, [])
            aimed = [entry for entry in held if entry[0].name == node.name] or [
                (node, d, preload_of(node, d)) for d in self.daemons_of(node, fault)
            ]
        wanted = self.change(fault, starting)
        facts: dict[str, Any] = {}
        changed: set[str] = set()
        for _, daemon, preload in aimed:
            where = f"{node.name}:{daemon.name}"
            if preload.control in changed:
                continue  # a clock probe shares its daemon's file: one change moves both
            changed.add(preload.control)
            if wanted is None:
                facts[where] = {"stays": True}
                continue
            done = confirmed(where, write_clock(node, preload, *wanted))
            facts[where] = {**done, "clocks": WALL if preload.wall_only else BOTH}
        return facts

    def heal(self) -> HealReport:
        """Put every clock this nemesis moved back on the real clock."""
        with self.lock:
            held = [entry for entries in self.held.values() for entry in entries]
            self.held.clear()
        report = HealReport()
        for node, daemon, preload in held:
            try:
                write_clock(node, Preload(preload.control, ""), "reset", 0.0)
            except NemesisError as problem:
                report.errors.append(str(problem))
                continue
            report.healed.append(f"{node.name}:{daemon.name} back on the real clock")
        return report


class ClockStepNemesis(ClockNemesis):
    """Steps the targets' clocks by ``params["by_s"]``; back at the stop when ``params["back"]``."""

    kind = CLOCK_STEP

    def change(self, fault: Fault, starting: bool) -> tuple[str, float] | None:
        """A step of ``by_s`` at the start; at the stop, the step back or nothing."""
        by = float(fault.params.get("by_s", 0.0))
        if starting:
            return ("step", by)
        return ("step", -by) if fault.params.get("back", True) else None


class ClockRateNemesis(ClockNemesis):
    """Runs the targets' clocks at ``params["rate"]`` until the stop, then at 1 again."""

    kind = CLOCK_RATE

    def change(self, fault: Fault, starting: bool) -> tuple[str, float] | None:
        """The rate at the start, 1 at the stop; never a jump."""
        return ("rate", float(fault.params.get("rate", 2.0)) if starting else 1.0)


def _sentence(where: str, facts: dict[str, Any]) -> str:
    """What one change did, in words: ``"l1's clock jumped 3 s forward"`` (``"l1's wall clock"``
    when only its wall clock moves)."""
    wall = "wall " if facts.get("clocks") == WALL else ""
    whose = f"{where.partition(':')[0]}'s {wall}clock"
    scheduled = facts.get("scheduled")
    if scheduled is None:
        return f"{whose} stayed where it was"
    jump, rate, offset = scheduled["jump_s"], scheduled["rate"], scheduled["offset_s"]
    if jump:
        return f"{whose} jumped {abs(jump):g} s {'forward' if jump > 0 else 'back'}"
    if rate != 1.0:
        return f"{whose} began to run at {rate:g}x"
    ahead = f"{abs(offset):.3g} s {'ahead' if offset > 0 else 'behind'}" if offset else "on time"
    return f"{whose} ran at 1x again, {ahead}"


def preload_of(node: Node, daemon: Daemon) -> Preload:
    """How ``daemon`` runs under libfaketime: from its recorded command line, or (a daemon this
    controller did not start) its environment; :class:`NemesisError` if it does not."""
    found = clock.preload_of(daemon.argv)
    if found is None:
        try:
            environ = node.run(["cat", f"/proc/{daemon.pid}/environ"], timeout=_WRITE_TIMEOUT_S)
        except NodeError as problem:
            raise NemesisError(
                f"{node.name}: cannot read {daemon.name}'s settings: {problem}"
            ) from None
        found = clock.preload_in(environ.stdout.split("\0")) if environ.ok else None
    if found is None:
        raise NemesisError(
            f"{node.name}: {daemon.name} (pid {daemon.pid}) cannot take clock faults: it was not "
            "started under libfaketime (systems.deploy.start_clocked); the holders' agents can "
            "(--target holder)"
        )
    return found


def write_clock(node: Node, preload: Preload, change: str, amount: float) -> dict[str, Any]:
    """Run :func:`harness.nodeside.clock.apply` on ``node``; its result (or NemesisError)."""
    args = [preload.control, change, repr(amount), preload.ask]
    done: dict[str, Any] = run_script(
        node, _SOURCE, args, f"change the clock of {preload.control}", _WRITE_TIMEOUT_S
    )
    return done


def confirmed(where: str, done: dict[str, Any]) -> dict[str, Any]:
    """The scheduled and the confirmed clock of one change; :class:`NemesisError` when a reading
    from inside the process misses the schedule."""
    before = ClockState.from_json(done["before"])
    after = ClockState.from_json(done["after"])
    written = float(done["written_at"])
    facts: dict[str, Any] = {
        "scheduled": {
            "jump_s": round(after.fake_at(written) - before.fake_at(written), 6),
            "offset_s": round(after.offset_at(written), 6),
            "rate": after.rate,
        },
        "control": done["text"],
    }
    readings = done["readings"]
    for midpoint, seen, round_trip in readings:
        expected = after.fake_at(midpoint)
        # The process read its clock somewhere inside the round trip, and a clock at rate R moves
        # R times as far as the real one meanwhile: the reading is uncertain by R round trips.
        slack = (round_trip + _SLACK_S) * max(1.0, after.rate)
        held = 0.0 if after.rate == 1.0 else after.rate * (midpoint + round_trip / 2 - written)
        if not expected - slack - held <= seen <= expected + slack:
            raise NemesisError(
                f"{where}: its clock reads {seen - midpoint:+.3f} s off the real one, not the "
                f"scheduled {expected - midpoint:+.3f} s (is it under libfaketime?)"
            )
    if readings:
        first_mid, first_seen, first_trip = readings[0]
        seen_facts: dict[str, Any] = {
            "offset_s": round(first_seen - first_mid, 6),
            "latency_ms": round((first_mid + first_trip / 2 - written) * 1000, 3),
        }
        if len(readings) > 1:
            last_mid, last_seen, _ = readings[-1]
            seen_facts["rate"] = round((last_seen - first_seen) / (last_mid - first_mid), 4)
        facts["confirmed"] = seen_facts
    return facts


def _draw_step(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    multiple = draw.rng.choice(STEP_TTL_MULTIPLES) * draw.rng.choice((1, -1))
    params = {
        **process_params(draw.processes.get(draw.role)),
        "by_ttl": multiple,
        "by_s": round(multiple * draw.ttl_ns / 1e9, 6),
        "back": draw.rng.random() < 0.5,
    }
    return (draw.target,), params


def _draw_rate(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    return (draw.target,), {
        **process_params(draw.processes.get(draw.role)),
        "rate": draw.rng.choice(_STRETCHING.get(draw.role, RATES)),
    }


def _recover(node: Node, leftovers: Leftovers) -> list[str]:
    """Put every control file on ``node`` back on the real clock (what a crashed run left)."""
    listed = node.run(["ls", clock.CONTROL_DIR])
    names = [name for name in listed.stdout.split() if "." not in name] if listed.ok else []
    for name in names:
        write_clock(node, Preload(clock.control_file(name), ""), "reset", 0.0)
    return names


def _number(text: Any, option: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        raise NemesisError(f"--{option} must be a number, not {text!r}") from None


_PROCESS_OPTION = ManualOption(
    "process", "Daemon name (default: every daemon); it must run under libfaketime."
)

STEP_KIND = FaultKind(
    name=CLOCK_STEP,
    summary="a process's wall and monotonic clocks jump by a signed TTL multiple "
    "(libfaketime), back at the end or not; confirmed by the process's own clock",
    verb="clock-stepped",
    colour="#c9a227",
    heal_rank=6,
    holds="clock",
    moves_clock=True,
    build=lambda locate, restarter: ClockStepNemesis(locate),
    draw=_draw_step,
    recover=_recover,
    manual=ManualCommand(
        help="Step the clocks of the daemons on NODES by --by seconds; step back after --for "
        "unless --stay.",
        fault=lambda nodes, values, roles: Fault(
            CLOCK_STEP,
            nodes,
            {
                **process_params(values.get("process")),
                "by_s": _number(values.get("by"), "by"),
                "back": not values.get("stay"),
            },
        ),
        options=(
            _PROCESS_OPTION,
            ManualOption("by", "Seconds to jump (negative: backward).", "text", "3"),
            ManualOption("stay", "Leave the clock stepped at the end.", "flag"),
        ),
    ),
)
"""The clock-step fault kind's registry entry."""

RATE_KIND = FaultKind(
    name=CLOCK_RATE,
    summary="a process's clocks run at a rate (0.25x to 4x, libfaketime) for the window, "
    "without a jump at either edge; confirmed by the process's own clock",
    verb="run on a skewed clock",
    colour="#8f6f3a",
    heal_rank=6,
    holds="clock",
    moves_clock=True,
    build=lambda locate, restarter: ClockRateNemesis(locate),
    draw=_draw_rate,
    recover=_recover,
    outlives_lease=True,
    manual=ManualCommand(
        help="Run the clocks of the daemons on NODES at --rate for --for, then at 1 again.",
        fault=lambda nodes, values, roles: Fault(
            CLOCK_RATE,
            nodes,
            {**process_params(values.get("process")), "rate": _number(values.get("rate"), "rate")},
        ),
        options=(
            _PROCESS_OPTION,
            ManualOption("rate", "Fake seconds per real second (e.g. 0.25 or 4).", "text", "2"),
        ),
    ),
)
"""The clock-rate fault kind's registry entry."""
