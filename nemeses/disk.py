"""Power loss and disk faults, on the lazy file system under a daemon's data directory.

SIGKILL keeps the page cache: what a daemon wrote and never fsynced survives every kill. These
kinds act on the lazy file system (:mod:`harness.nodeside.lazyfs`) that a run mounts under each
data directory a system declares (:class:`systems.base.TakesDiskFaults`) when its nemeses include
one of them; each is confirmed from that file system's own report and recorded.

- ``power-loss``: SIGKILL every daemon of the node, drop every unsynced byte and directory entry,
  and at the window's end start the daemons again on what was synced. Aimed at a store or lock
  node it is one window; aimed at the holder it is the lease-aware shape, played as a pair of
  the general overlap mechanism (:mod:`nemeses.schedule`): the holder is paused past its lease
  and the power loss lands right after the takeover (the store's once the new holder had its
  first write accepted, the lock service's right after the grant), then the holder is continued
  once the node serves again: what the takeover taught the server, if unsynced, is gone when the
  old holder writes again. Aimed at the holder on a system that names the node keeping a
  role's data of record (:class:`systems.KeepsRecord`: Redis's primary), the power loss lands
  there. Aimed at a group (``lock-majority``, ``lock-all``) it takes that many of the role's
  nodes in one window, each dropped, confirmed and recorded on its own, all restarted at once: a
  correlated outage, what a replicated service that acknowledges before it fsyncs loses.
- ``disk-full``: every write, create and growing truncate fails with ENOSPC for the window.
- ``fsync-error``: every fsync fails with EIO for the window (the data stays unsynced).
- ``slow-disk``: every fsync waits a multiple of the lease TTL first.

Aimed at the holder, these three land on a store or lock node drawn among them, or, on a system
that names the node keeping that role's data of record, on that node when the fault starts (the
drawn one standing in), as a power loss does: a replica's failing disk spares what the holders
depend on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from harness.node import Node
from harness.nodeside import lazyfs
from harness.record import SAID
from harness.record.schedule import GROUPS, Window, group_of, group_size
from nemeses._base import NodeNemesis
from nemeses.kill import KillNemesis
from nemeses.kinds import (
    END_AFTER_WRITES,
    STAND_IN,
    Composition,
    Draw,
    FaultKind,
    Leftovers,
    ManualCommand,
)
from nemeses.kinds import ManualOption as Option
from nemeses.processes import run_script
from nemeses.protocol import Fault, HealReport, NemesisError, fault_fs
from nemeses.restart_while_paused import RESTART_TARGET, play_as_pair

__all__ = [
    "DISK_FAULTS",
    "DISK_FULL",
    "DISK_FULL_KIND",
    "FSYNC_ERROR",
    "FSYNC_ERROR_KIND",
    "GROUP",
    "POWER_LOSS",
    "POWER_LOSS_KIND",
    "SLOW_DISK",
    "SLOW_DISK_KIND",
    "SLOW_TTL_MULTIPLES",
    "DiskFault",
    "DiskFaultNemesis",
    "PowerLossNemesis",
    "ask_node",
    "dropped_sentence",
]

POWER_LOSS: Final = "power-loss"
DISK_FULL: Final = "disk-full"
FSYNC_ERROR: Final = "fsync-error"
SLOW_DISK: Final = "slow-disk"
SLOW_TTL_MULTIPLES: Final = (0.25, 0.5, 1.1)
"""How long a slow disk's fsync takes, in lease TTLs: well within it, half, just past it."""

GROUP: Final = "group"
"""Window parameter of a power loss aimed at a group target: ``majority`` or ``all`` (its
targets are the nodes drawn)."""
_SOURCE: Final = Path(lazyfs.__file__).read_text()
_ASK_TIMEOUT_S: Final = 60.0  # a drop rebuilds the live tree: a database's data dir takes a while
_DISK_ROLES: Final = ("store", "lock")
# The lease-aware shape lands right after the takeover: the store's after the new holder's first
# accepted write (before it, the store has learnt nothing to lose), the lock service's right
# after the grant (the counter it just wrote).
_AFTER_TAKEOVER_WRITES: Final = {"store": 1, "lock": 0}


def ask_node(node: Node, request: dict[str, Any]) -> dict[str, Any]:
    """Send ``request`` to every lazy file system of ``node``: the answers by mountpoint;
    :class:`NemesisError` when it has none or one fails."""
    answers: dict[str, Any] = run_script(
        node, _SOURCE, ["ask", json.dumps(request)], "reach its lazy file systems", _ASK_TIMEOUT_S
    )
    if not answers:
        raise NemesisError(
            f"{node.name}: no lazy file system is mounted there; a run mounts one under each "
            "data directory its system declares (systems.base.TakesDiskFaults) when its "
            f"nemeses include {', '.join((POWER_LOSS, DISK_FULL, FSYNC_ERROR, SLOW_DISK))}"
        )
    failed = {where: answer for where, answer in answers.items() if not answer.get("ok")}
    if failed:
        raise NemesisError(
            f"{node.name}: its lazy file system at "
            + "; ".join(f"{where}: {answer.get('error')}" for where, answer in failed.items())
        )
    return answers


def dropped_sentence(node: str, dropped: Mapping[str, Mapping[str, int]]) -> str:
    """``"s1 lost power: 3 unsynced writes (412 bytes) dropped"``, from the drops by mountpoint
    (or ``"... nothing unsynced to drop"``)."""
    writes = sum(d.get("writes", 0) for d in dropped.values())
    size = sum(d.get("bytes", 0) for d in dropped.values())
    entries = sum(d.get("entry_changes", 0) for d in dropped.values())
    lost = []
    if writes:
        lost.append(f"{writes} unsynced write{'s' if writes != 1 else ''} ({size} bytes)")
    if entries:
        lost.append(f"{entries} unsynced directory change{'s' if entries != 1 else ''}")
    what = f"{' and '.join(lost)} dropped" if lost else "nothing unsynced to drop"
    return f"{node} lost power: {what}"


def _totals(dropped: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    keys = ("writes", "bytes", "files", "entry_changes")
    return {key: sum(d.get(key, 0) for d in dropped.values()) for key in keys}


def _power_off(node: Node) -> dict[str, Any]:
    """Drop what ``node``'s lazy file systems never synced (its daemons are dead)."""
    answers = ask_node(node, {"op": "drop"})
    dropped = {where: answer["dropped"] for where, answer in answers.items()}
    said = dropped_sentence(node.name, dropped)
    return {"dropped": dropped, "lost": _totals(dropped), SAID: said}


class PowerLossNemesis(KillNemesis):
    """``power-loss`` at a store or lock node: kill every daemon and drop what was unsynced;
    restart them at the stop. (Aimed at a holder it is played as a pause and a power-loss
    overlay on a store or lock node: :data:`POWER_LOSS_KIND`'s ``composed``.)"""

    @property
    def fs(self) -> frozenset[str]:
        """``start-power-loss`` and ``stop-power-loss``."""
        return fault_fs(POWER_LOSS)

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Start: the power goes. Stop: the daemons start again on what was synced."""
        whole = Fault(fault.kind, fault.targets, {})  # a power loss kills every daemon
        facts = super().invoke(f, whole)
        if not self.starts(f):
            return {**facts, SAID: f"{', '.join(fault.targets)}'s power came back"}
        offs = dict(self.on_targets(whole, lambda node: (node.name, _power_off(node))))
        if len(offs) == 1:
            return {**facts, **next(iter(offs.values()))}
        return {
            **facts,
            "dropped": {name: off["dropped"] for name, off in offs.items()},
            "lost": _totals({name: off["lost"] for name, off in offs.items()}),
            SAID: "; ".join(off[SAID] for off in offs.values()),
        }


def _disk_roles(draw: Draw) -> dict[str, list[str]]:
    roles = {role: draw.of_role(role) for role in _DISK_ROLES}
    return {role: names for role, names in roles.items() if names}


def _disk_target(draw: Draw) -> tuple[str, str]:
    """A store or lock node: the drawn one, or (for a holder or worker) one drawn among them."""
    if draw.role in _DISK_ROLES:
        return draw.target, draw.role
    roles = _disk_roles(draw)
    if not roles:
        raise NemesisError("disk faults need a store or lock node (their daemons keep the data)")
    role = draw.rng.choice(sorted(roles))
    return draw.rng.choice(roles[role]), role


def _draw_power_loss(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """At a store or lock node: that node. At a group (``lock-all``, ``lock-majority``): that
    many of the role's nodes, drawn now, all at once. At the holder: the lease-aware shape
    (played as a pair, :func:`_play_power_loss`), on the node that keeps the chosen role's data
    of record where the system names one (``restart_target``, resolved when the power loss
    starts; the drawn node stands in), else on a node drawn among the role's."""
    grouped = group_of(draw.target)
    if grouped is not None:
        role, group = grouped
        members = draw.of_role(role)
        hit = draw.rng.sample(members, group_size(group, len(members)))
        return tuple(sorted(hit)), {GROUP: group}
    if draw.role in _DISK_ROLES:
        return (draw.target,), {}
    node, role = _disk_target(draw)
    params: dict[str, Any] = {
        "restart": node,
        "restart_at": "takeover",
        END_AFTER_WRITES: _AFTER_TAKEOVER_WRITES[role],
    }
    if role in draw.records:
        params[RESTART_TARGET] = draw.records[role]
    if draw.processes.get(draw.role) is not None:
        params["process"] = draw.processes[draw.role]
    return (draw.target,), params


def _play_power_loss(window: Window, index: int, ttl_ns: int) -> tuple[Window, ...] | None:
    """A power loss aimed at the holder as its pause and a power-loss overlay at the takeover."""
    if "restart" not in window.params:
        return None
    return play_as_pair(window, index, ttl_ns, POWER_LOSS)


@dataclass(frozen=True, slots=True)
class DiskFault:
    """What one disk kind sets on the lazy file system and how its sentences read.

    ``setting`` is the file system's fault setting; ``on`` its value for a fault, ``off`` its
    value without; ``count`` the report's counter of what the window returned; ``started`` what
    the disk began to do (``{delay}`` is the fault's ``delay_s``); ``returned`` what the count
    counts, in the plural.
    """

    setting: str
    on: Callable[[Fault], Any]
    off: Any
    count: str
    started: str
    returned: str


DISK_FAULTS: Final[Mapping[str, DiskFault]] = {
    DISK_FULL: DiskFault(
        "disk_full", lambda fault: True, False, "enospc", "filled up (ENOSPC)", "ENOSPC errors"
    ),
    FSYNC_ERROR: DiskFault(
        "fsync_error",
        lambda fault: True,
        False,
        "eio",
        "began to fail every fsync (EIO)",
        "failed fsyncs",
    ),
    SLOW_DISK: DiskFault(
        "fsync_delay_s",
        lambda fault: float(fault.params.get("delay_s", 1.0)),
        0.0,
        "slowed_fsyncs",
        "began to take {delay:g} s for each fsync",
        "slowed fsyncs",
    ),
}
"""The toggled disk kinds (not ``power-loss``), by name."""


class DiskFaultNemesis(NodeNemesis):
    """A disk fault (:data:`DISK_FAULTS`) on every lazy file system of the targets for the
    window: on at the start, off at the stop; each edge confirmed by the file system's report,
    the stop with how many errors (or slowed fsyncs) the window returned."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self._fault = DISK_FAULTS[kind]
        self._in_force: dict[str, dict[str, int]] = {}  # node -> its count when the window began

    @property
    def fs(self) -> frozenset[str]:
        """``start-<kind>`` and ``stop-<kind>``."""
        return fault_fs(self.kind)

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Put the fault on (start) or off (stop) on every target, confirmed by each report."""
        on = self.starts(f)
        facts = dict(self.on_targets(fault, lambda node: (node.name, self._set(node, fault, on))))
        said = "; ".join(fact["said"] for fact in facts.values())
        return {"disks": facts, SAID: said}

    def _set(self, node: Node, fault: Fault, on: bool) -> dict[str, Any]:
        kind = self._fault
        wanted = {kind.setting: kind.on(fault) if on else kind.off}
        answers = ask_node(node, {"op": "faults", **wanted})
        counts = {where: int(answer["report"][kind.count]) for where, answer in answers.items()}
        for where, answer in answers.items():
            in_force = {key: answer["report"]["faults"][key] for key in wanted}
            if in_force != wanted:
                raise NemesisError(f"{node.name}: {where} reports {in_force}, not {wanted}")
        if on:
            self._in_force[node.name] = counts
            started = kind.started.format(delay=fault.params.get("delay_s", 1.0))
            return {"faults": wanted, "said": f"{node.name}'s disk {started}"}
        began = self._in_force.pop(node.name, {})
        returned = sum(n - began.get(where, 0) for where, n in counts.items())
        return {
            "faults": wanted,
            kind.count: returned,
            "said": f"{node.name}'s disk recovered after {returned} {kind.returned}",
        }

    def heal(self) -> HealReport:
        """Take the fault off every node where it may be in force."""
        report = HealReport()
        for name in list(self._in_force):
            try:
                self._set(self.node(name), Fault(self.kind, (name,), {}), on=False)
            except NemesisError as problem:
                report.errors.append(str(problem))
                continue
            report.healed.append(f"{self.kind} off on {name}")
        return report


def _draw_node(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A store or lock node; aimed at the holder, the node that keeps the chosen role's data of
    record where the system names one (resolved when the fault starts; the drawn node stands
    in), as a disk that fails under a replica spares the data the holders depend on."""
    node, role = _disk_target(draw)
    if draw.role in _DISK_ROLES or role not in draw.records:
        return (node,), {}
    return (draw.records[role],), {STAND_IN: node}


def _draw_slow(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """As :func:`_draw_node`, with the delay a multiple of the lease TTL."""
    multiple = draw.rng.choice(SLOW_TTL_MULTIPLES)
    targets, params = _draw_node(draw)
    return targets, {
        **params,
        "delay_ttl": multiple,
        "delay_s": round(multiple * draw.ttl_ns / 1e9, 6),
    }


def _recover_faults(node: Node, leftovers: Leftovers) -> list[str]:
    """Take every disk fault off ``node``'s lazy file systems (what a crashed run left)."""
    try:
        off = {fault.setting: fault.off for fault in DISK_FAULTS.values()}
        answers = ask_node(node, {"op": "faults", **off})
    except NemesisError:
        return []  # no lazy file system there: nothing to undo
    return sorted(answers)


def _no_params(kind: str) -> ManualCommand:
    return ManualCommand(
        help=f"Put {kind} on the lazy file systems of NODES for --for (or until heal).",
        fault=lambda nodes, values, roles: Fault(kind, nodes, {}),
    )


POWER_LOSS_KIND = FaultKind(
    name=POWER_LOSS,
    summary="SIGKILL every daemon of a store or lock node, drop every byte it never fsynced "
    "(lazy FS), start them again on what was synced; at lock-majority or lock-all: that many "
    "lock nodes at once; at the holder: right after the takeover",
    verb="powered off",
    colour="#1f1f1f",
    heal_rank=5,
    # It kills and restarts the node's daemons, as kill does: a pause there would be undone.
    restarts=True,
    kills="targets",
    needs_disk=True,  # what it drops is what the lazy FS holds unsynced
    build=lambda locate, restarter: PowerLossNemesis(locate, restarter=restarter),
    draw=_draw_power_loss,
    # A rack or a whole cluster losing power at once: what a replicated service that does not
    # fsync (ZooKeeper's forceSync=no) loses, which one member's power loss never shows.
    groups=tuple(GROUPS),
    composed=Composition(("pause", POWER_LOSS), _play_power_loss),
    recover=None,  # the kill kind's recovery restarts what a crashed run left dead
    manual=ManualCommand(
        help="SIGKILL every daemon on NODES and drop what they never fsynced; start them again "
        "after --for (or at heal).",
        fault=lambda nodes, values, roles: Fault(POWER_LOSS, nodes, {}),
    ),
)
"""The power-loss fault kind's registry entry."""

DISK_FULL_KIND = FaultKind(
    name=DISK_FULL,
    summary="the lazy FS under a store or lock daemon's data fails every write, create and "
    "growing truncate with ENOSPC for the window",
    verb="had a full disk",
    colour="#8a5a44",
    heal_rank=6,
    # The lazy FS sets each of its faults apart (a request changes only the ones it names):
    # a full disk composes with failing or slow fsyncs.
    holds="disk space",
    build=lambda locate, restarter: DiskFaultNemesis(DISK_FULL),
    needs_disk=True,
    draw=_draw_node,
    recover=_recover_faults,
    manual=_no_params(DISK_FULL),
)
"""The disk-full fault kind's registry entry."""

FSYNC_ERROR_KIND = FaultKind(
    name=FSYNC_ERROR,
    summary="the lazy FS under a store or lock daemon's data fails every fsync with EIO for "
    "the window (the data stays unsynced)",
    verb="had failing fsyncs",
    colour="#b03a2e",
    heal_rank=6,
    holds="fsync",
    build=lambda locate, restarter: DiskFaultNemesis(FSYNC_ERROR),
    needs_disk=True,
    draw=_draw_node,
    recover=_recover_faults,
    manual=_no_params(FSYNC_ERROR),
)
"""The fsync-error fault kind's registry entry."""

SLOW_DISK_KIND = FaultKind(
    name=SLOW_DISK,
    summary="each fsync on the lazy FS under a store or lock daemon's data takes a lease TTL "
    "multiple (0.25, 0.5 or 1.1) for the window",
    verb="had a slow disk",
    colour="#6b8e23",
    heal_rank=6,
    holds="fsync",
    build=lambda locate, restarter: DiskFaultNemesis(SLOW_DISK),
    needs_disk=True,
    draw=_draw_slow,
    recover=_recover_faults,
    manual=ManualCommand(
        help="Make every fsync on the lazy file systems of NODES take --delay seconds, for --for.",
        fault=lambda nodes, values, roles: Fault(
            SLOW_DISK, nodes, {"delay_s": float(values.get("delay") or 1.0)}
        ),
        options=(Option("delay", "Seconds each fsync waits.", "text", "1"),),
    ),
)
"""The slow-disk fault kind's registry entry."""
