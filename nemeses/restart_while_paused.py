"""Restart while paused: the shape that exposes a sink or lock service that forgets on restart.

A holder is paused past its lease; while it sleeps, another holder takes over and writes with a
higher epoch; and the store (or the lock service) is killed and started again while the first
holder is still paused. A compound of the general overlap mechanism (:mod:`nemeses.schedule`): a
drawn window of this kind is played as a ``pause`` window on the holder and a ``kill`` overlay on
the daemon that holds the state, aimed where restart bugs need it (``restart_at``, drawn per
window):

- ``resume``: at the pause's end; the holder is continued the moment the restarted process serves
  again (:data:`nemeses.kinds.RESUMES_BASE`). A store that kept its highest-seen epoch refuses the
  old holder's write; one that forgot it (``store-forgets``) accepts it after the newer write: a
  stale write. Two plain faults in sequence cannot make this shape, because the new holder's next
  write would re-teach a forgetful store the mark before the old holder wakes.
- ``takeover``: right after another holder took the lease, once it had 1-3 writes accepted, then
  the holder is continued as the process serves again: a store that saved its mark only every few
  writes (``lazy-mark``) has lost the new one. A run's first window of this kind is always one.
- ``inside``: at a random moment inside the pause (10-90 % of it); the holder is continued at the
  pause's scheduled end. A lock service restarting then, with its counter in memory, grants the
  next holder an old epoch.

The drawn moments stay window parameters, so a replay plays them again; a history recorded
before the pair existed (one window of this kind) is played as the same pair
(:func:`play_as_pair`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from harness.record.schedule import Window
from nemeses.kinds import (
    ANCHOR,
    COMPOUND,
    END_AFTER_WRITES,
    OVERLAPS,
    RESUMES_BASE,
    START_AFTER_WRITES,
    Composition,
    Draw,
    FaultKind,
)
from nemeses.protocol import NemesisError

__all__ = ["KIND", "RESTART_AT", "RESTART_TARGET", "RESTART_WHILE_PAUSED", "play_as_pair"]

RESTART_WHILE_PAUSED: Final = "restart-while-paused"
"""The fault kind: ``params`` has ``process`` (paused), ``restart`` (a node name),
``restart_process`` (the daemon killed and restarted there) and ``restart_at``."""

RESTART_TARGET: Final = "restart_target"
"""Pair parameter: the symbolic target the restart aims at (``lock-leader``: the node that keeps
the data of record, resolved when the restart starts), with ``restart`` the drawn node that
stands in for it; absent, the restart aims at ``restart`` itself."""

RESTART_AT: Final[tuple[str, ...]] = ("resume", "takeover", "inside")
"""Where a window's restart lands (see the module documentation)."""
_RESTART_AT_WEIGHTS: Final = (1, 3, 1)
_FIRST_RESTART_AT: Final = "takeover"
# "takeover" is drawn most, and always for a run's first window of the kind: it is the only shape
# that finds a mark saved every few writes, and a lazily saved mark is the restart bug real stores
# have.
_INSIDE: Final = (0.1, 0.9)
"""An inside restart lands within this share of the pause."""
_RESTART_AFTER_NS: Final = "step_at_ns"
"""Parameter of an inside restart: when it lands after the pause began (the name histories
recorded before the pair existed use too)."""
_AFTER_TAKEOVER_WRITES: Final = (1, 3)
"""A takeover restart lands once the new holder had this many writes accepted since its grant:
never before the first (it has written nothing a restart could lose), before many more (a store
that saves its mark every N writes has saved it with a chance of only writes/N)."""
_RESTARTED_ROLES: Final = ("store", "lock")
_INSTANT_TTL: Final = 0.01
"""The kill's length, in TTLs: killed and started again at once (an outage the other holders
notice would have them retry and re-teach a forgetful store its mark before the holder resumes)."""
_PAIR_KEYS: Final = (
    "restart",
    RESTART_TARGET,
    "restart_process",
    "restart_at",
    _RESTART_AFTER_NS,
    END_AFTER_WRITES,
)


def play_as_pair(
    window: Window, index: int, ttl_ns: int, restart_kind: str
) -> tuple[Window, Window]:
    """``window`` (a holder paused, ``params["restart"]`` restarted as ``params["restart_at"]``
    says) as a ``pause`` window and an overlay of ``restart_kind`` (``kill``, ``power-loss``)
    on the restarted node (or on :data:`RESTART_TARGET`, ``restart`` its fallback), numbered
    ``index``."""
    params = window.params
    compound = {COMPOUND: window.kind}
    paused = {k: v for k, v in params.items() if k not in _PAIR_KEYS}
    base = replace(window, kind="pause", params={**paused, **compound})
    overlay: dict[str, Any] = {
        **compound,
        OVERLAPS: window.index,
        "restart_at": params["restart_at"],
    }
    if params.get("restart_process") is not None:
        overlay["process"] = params["restart_process"]
    start = window.end_ns
    if params["restart_at"] == "inside":
        start = window.start_ns + int(params.get(_RESTART_AFTER_NS, window.duration_ns // 2))
        overlay[ANCHOR] = "inside"
    elif params["restart_at"] == "takeover":
        overlay.update({ANCHOR: "takeover", RESUMES_BASE: True})
        overlay[START_AFTER_WRITES] = int(params.get(END_AFTER_WRITES, 1))
    else:
        overlay.update({ANCHOR: "inside", RESUMES_BASE: True})
    aimed = params.get(RESTART_TARGET)
    restart = Window(
        index,
        start,
        max(round(_INSTANT_TTL * ttl_ns), 1),
        restart_kind,
        (str(aimed or params["restart"]),),
        _INSTANT_TTL,
        None if aimed is None else str(params["restart"]),
        overlay,
    )
    return base, restart


def _play(window: Window, index: int, ttl_ns: int) -> tuple[Window, ...]:
    return play_as_pair(window, index, ttl_ns, "kill")


def _draw(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The holder (or target) paused; where the restart lands (``restart_at``); the node
    restarted: for an inside restart a store or a lock node, else a store by preference."""
    rng = draw.rng
    restart_at = (
        _FIRST_RESTART_AT
        if draw.earlier == 0
        else rng.choices(RESTART_AT, weights=_RESTART_AT_WEIGHTS)[0]
    )
    roles = {
        role: others
        for role in _RESTARTED_ROLES
        if (others := [name for name in draw.of_role(role) if name != draw.target])
    }
    if not roles:
        raise NemesisError(
            f"{RESTART_WHILE_PAUSED} needs a store or lock node besides {draw.target!r}"
        )
    restart_role = rng.choice(sorted(roles)) if restart_at == "inside" else next(iter(roles))
    compound: dict[str, Any] = {
        "restart": rng.choice(roles[restart_role]),
        "restart_at": restart_at,
    }
    if restart_at == "inside":
        compound[_RESTART_AFTER_NS] = round(draw.duration_ns * rng.uniform(*_INSIDE))
    elif restart_at == "takeover":
        compound[END_AFTER_WRITES] = rng.randint(*_AFTER_TAKEOVER_WRITES)
    for key, of_role in (("process", draw.role), ("restart_process", restart_role)):
        if draw.processes.get(of_role) is not None:
            compound[key] = draw.processes[of_role]
    return (draw.target,), compound


KIND = FaultKind(
    name=RESTART_WHILE_PAUSED,
    summary="pause the holder past its lease and kill and restart the store or lock service "
    "meanwhile: inside the pause, right after the takeover, or as the holder resumes",
    verb="paused while a store was restarted",
    colour="#7a4fd6",
    heal_rank=0,
    build=None,
    draw=_draw,
    composed=Composition(("pause", "kill"), _play),
    outlives_lease=True,
    parts=("pause", "kill"),
    restarts=True,
    touched=lambda params: (str(params["restart"]),) if "restart" in params else (),
    stops_holder=True,
    kills="service",
    restarted=lambda targets, params: (str(params["restart"]),) if "restart" in params else (),
)
"""The restart-while-paused fault kind's registry entry (a compound played as a pause and a kill
overlay: no nemesis and no manual command of its own; its parts are the pause and kill
commands)."""
