"""The reference lock service: leases with a TTL, renewal, release, and a fencing epoch per lock.

Runs on the lock node as ``python3 lock_server.py --port 7001 --data-dir DIR``; stdlib-only (it
imports only :mod:`harness.nodeside.wire`, copied next to it). Guarantees, in the correct
configuration:

- each lock's epoch strictly increases for ever: the new epoch is written durably (write, fsync,
  rename, fsync of the directory) *before* the grant is answered, and read back on start;
- at most one live lease per lock; a lease that expires without release keeps the lock
  ungrantable for ``--lock-delay`` seconds (Chubby's lock-delay);
- after a restart no lock is granted until any lease handed out before the crash must have ended
  (its TTL plus the lock-delay): leases live in memory only, their epochs do not.

Each lock also counts its grants, durably beside its epoch: the count is the grant's
``grant_seq``, the service's own order of the grants of that lock.

The switch ``--bug epoch-in-memory`` keeps the counters in memory only, so a restart starts every
lock at epoch 1 again. The switch ``--bug token-before-lease`` draws a request's epoch when the
request arrives, before the lease is won: two holders waiting at once may win the lock in the
other order than their tokens, so the later lease carries the lower epoch. Only the service's own
order (``grant_seq``) or the lease's start (``waited``) shows it; a history with neither cannot
tell it from a late reply. The switch ``--bug timestamp-token`` makes each epoch the server's wall
clock in milliseconds at the grant: it goes up while the clock does, and a clock that steps back
gives a later grant a lower epoch (only a clock fault shows it). Leases, lock-delay and sessions
are measured on the monotonic clock, which a wall-clock step (an NTP step, or a clock fault on
this server, which runs wall only) leaves alone; the switch ``--bug wall-clock-expiry`` measures
them on the wall clock instead (the time Redis expires keys by), so a step forward ends every
live lease at once and a fast wall clock ends them early.

A waiter may wait under a **session**: opened for one lock with a TTL, kept alive by keepalives
while the acquire waits, and ended by the service when they stop for a TTL (the waiting acquire
is then refused ``expired``); once granted, the session is the lease, and it ends with it. A
keepalive on an ended session answers ``expired`` with the lock's count of grants when the
service ended it (its ``grant_seq`` then), so the holder can prove a grant came after. The switch
``--bug grant-to-expired-waiter`` grants a waiter whose session has ended anyway, at once, as
if the end of its wait were its turn, over any live lease (etcd-io/etcd#11456: the waiter's key,
deleted with its expired lease, left no key before it, and the lock was returned to it).

Protocol (one JSON object per line, see :mod:`harness.nodeside.wire`):
``{"op":"session","lock":L,"ttl":S}`` -> ``{"ok":true,"session":ID}``;
``{"op":"keepalive","session":ID}`` -> ``{"ok":true}``, ``{"ok":false,"error":"expired",
"grant_seq":G}`` or ``{"ok":false,"error":"lost"}`` (a session this server does not know);
``{"op":"acquire","lock":L,"ttl":S,"wait":S,"owner":NAME,"session":ID?}`` -> ``{"ok":true,"epoch":N,
"waited":S,"grant_seq":G}`` (seconds between the request's arrival and the lease's start; the
lock's count of grants so far, this one included) or
``{"ok":false,"error":"timeout"}`` or ``{"ok":false,"error":"expired"}`` (its session ended);
``{"op":"renew","lock":L,"epoch":N}`` and
``{"op":"release","lock":L,"epoch":N}`` -> ``{"ok":true}`` or ``{"ok":false,"error":"not-held"}``;
``{"op":"status","lock":L}``; ``{"op":"ping"}``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.nodeside import wire

__all__ = [
    "EPOCH_IN_MEMORY",
    "GRANT_TO_EXPIRED_WAITER",
    "TIMESTAMP_TOKEN",
    "TOKEN_BEFORE_LEASE",
    "WALL_CLOCK_EXPIRY",
    "LockService",
    "main",
]

EPOCH_IN_MEMORY = "epoch-in-memory"
TOKEN_BEFORE_LEASE = "token-before-lease"
TIMESTAMP_TOKEN = "timestamp-token"
GRANT_TO_EXPIRED_WAITER = "grant-to-expired-waiter"
WALL_CLOCK_EXPIRY = "wall-clock-expiry"
_WALL_LOOK_S = 0.1
_SESSIONS_KEPT = 10.0  # TTLs an ended or granted session is remembered, for late keepalives


@dataclass(slots=True)
class _Lease:
    epoch: int
    owner: str
    ttl: float
    expires: float  # seconds on the service's lease clock


@dataclass(slots=True)
class _Session:
    """A waiter's session: kept alive by keepalives while it waits, it becomes the lease."""

    lock: str
    ttl: float
    expires: float  # seconds on the service's lease clock
    epoch: int | None = None  # the epoch granted to it, once granted
    ended_seq: int | None = None  # the lock's count of grants when the service ended it


@dataclass(slots=True)
class _LockState:
    epoch: int = 0  # the last epoch granted (or drawn); 0 before the first grant
    grants: int = 0  # how many grants so far: the last grant's grant_seq
    ttl: float = 0.0  # the longest TTL granted: how long a lease from before a restart may live
    lease: _Lease | None = None
    grantable_at: float = 0.0  # lease clock; lock-delay or the grace period after a restart


class LockService:
    """The lock table and its durable epoch counters; :meth:`handle` answers one request."""

    def __init__(
        self,
        data_dir: Path,
        lock_delay: float,
        durable: bool,
        early_tokens: bool = False,
        timestamp_token: bool = False,
        grant_expired: bool = False,
        wall_clock_expiry: bool = False,
    ) -> None:
        self._cond = threading.Condition()
        # The clock leases are measured by; the wall clock is the wall-clock-expiry mistake.
        self._now = time.time if wall_clock_expiry else time.monotonic
        # A wall clock may jump while a waiter sleeps: look at it again as often as Redis's
        # expiry cycle does (10 times a second); the monotonic clock never jumps.
        self._slice = _WALL_LOOK_S if wall_clock_expiry else float("inf")
        self._timestamp_token = timestamp_token
        self._locks: dict[str, _LockState] = {}
        self._sessions: dict[str, _Session] = {}
        self._grant_expired = grant_expired
        self._lock_delay = lock_delay
        self._durable = durable
        self._early_tokens = early_tokens
        self._path = data_dir / "epochs.json"
        if durable:
            data_dir.mkdir(parents=True, exist_ok=True)
            self._recover()

    def _recover(self) -> None:
        try:
            saved = json.loads(self._path.read_text())
            counters = {
                name: (int(e["epoch"]), float(e["ttl"]), int(e.get("grants", e["epoch"])))
                for name, e in saved.items()
            }
        except FileNotFoundError:
            return
        except (ValueError, KeyError, TypeError, AttributeError) as problem:
            # Starting from zero here would hand out old epochs again: refuse to start instead.
            raise SystemExit(
                f"lock server: {self._path} is corrupt ({problem!r}); it holds the epoch "
                "counters, so restore it or remove the whole data dir to start a new cluster"
            ) from None
        now = self._now()
        for name, (epoch, ttl, grants) in counters.items():
            grace = ttl + self._lock_delay
            self._locks[name] = _LockState(
                epoch=epoch, grants=grants, ttl=ttl, grantable_at=now + grace
            )
            wire.log(f"recovered lock {name} at epoch {epoch}; grantable in {grace:.3f}s")

    def _save(self, changed: str, state: _LockState) -> None:
        snapshot = {
            name: {"epoch": s.epoch, "ttl": s.ttl, "grants": s.grants}
            for name, s in self._locks.items()
        }
        snapshot[changed] = {"epoch": state.epoch, "ttl": state.ttl, "grants": state.grants}
        temporary = self._path.with_suffix(".tmp")
        with temporary.open("w") as out:
            json.dump(snapshot, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self._path)
        directory = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one protocol request (see the module docstring)."""
        op = request.get("op")
        if op == "session":
            return self._open_session(request)
        if op == "keepalive":
            return self._keepalive(wire.text(request, "session"))
        if op == "acquire":
            return self._acquire(request)
        if op == "renew":
            return self._renew(request)
        if op == "release":
            return self._release(request)
        if op == "status":
            return self._status(wire.text(request, "lock"))
        if op == "ping":
            return {"ok": True}
        raise wire.BadRequest(
            f"unknown op {op!r}; expected session, keepalive, acquire, renew, release, status, ping"
        )

    def _open_session(self, request: dict[str, Any]) -> dict[str, Any]:
        lock = wire.text(request, "lock")
        ttl = _ttl(request)
        now = self._now()
        with self._cond:
            for name, old in list(self._sessions.items()):
                # Forget sessions long over; a keepalive this late hears "lost" instead.
                if old.expires + _SESSIONS_KEPT * old.ttl < now:
                    del self._sessions[name]
            session = os.urandom(8).hex()  # random: ids must not repeat across restarts
            self._sessions[session] = _Session(lock, ttl, now + ttl)
        return {"ok": True, "session": session}

    def _session_ended(self, session: _Session, now: float) -> bool:
        """Whether ``session`` has ended; the first time, note the lock's count of grants then.

        A waiting session ends when its keepalives stop for a TTL; a granted one when its lease
        is no longer the lock's live lease."""
        if session.ended_seq is not None:
            return True
        state = self._locks.setdefault(session.lock, _LockState())
        if session.epoch is None:
            ended = now >= session.expires
        else:
            self._expire(session.lock, state, now)
            ended = state.lease is None or state.lease.epoch != session.epoch
        if ended:
            session.ended_seq = state.grants
        return ended

    def _keepalive(self, name: str) -> dict[str, Any]:
        now = self._now()
        with self._cond:
            session = self._sessions.get(name)
            if session is None:
                return {"ok": False, "error": "lost"}  # never opened here, or forgotten
            if self._session_ended(session, now):
                return {"ok": False, "error": "expired", "grant_seq": session.ended_seq}
            session.expires = now + session.ttl
            state = self._locks[session.lock]
            if session.epoch is not None and state.lease is not None:
                state.lease.expires = now + state.lease.ttl  # the granted session is the lease
            return {"ok": True}

    def _expire(self, name: str, state: _LockState, now: float) -> None:
        lease = state.lease
        if lease is not None and now >= lease.expires:
            state.lease = None
            state.grantable_at = lease.expires + self._lock_delay
            wire.log(
                f"lease {name} epoch {lease.epoch} of {lease.owner} expired without release; "
                f"grantable again after lock-delay {self._lock_delay:.3f}s"
            )

    def _acquire(self, request: dict[str, Any]) -> dict[str, Any]:
        name = wire.text(request, "lock")
        ttl = _ttl(request)
        wait = wire.number(request, "wait", 0.0)
        owner = str(request.get("owner", "?"))
        received = self._now()
        deadline = received + wait
        with self._cond:
            session = self._waiting_session(request, name)
            state = self._locks.setdefault(name, _LockState())
            token = self._draw(name, state) if self._early_tokens else None
            while True:
                now = self._now()
                self._expire(name, state, now)
                ended = session is not None and self._session_ended(session, now)
                if ended and not self._grant_expired:
                    # The waiter stopped keeping its session alive: it is not granted.
                    return {"ok": False, "error": "expired"}
                if ended or (state.lease is None and now >= state.grantable_at):
                    if ended:
                        # The mistake: the waiter's end taken for its turn, over any live lease.
                        wire.log(f"granting {name} to {owner}, whose session had expired")
                    reply = self._grant(name, state, ttl, owner, received, token)
                    if session is not None:
                        session.epoch = reply["epoch"]
                    return reply
                if now >= deadline:
                    return {"ok": False, "error": "timeout"}
                wake = state.lease.expires if state.lease is not None else state.grantable_at
                if session is not None and session.ended_seq is None:
                    wake = min(wake, session.expires)  # notice the end of the session at once
                self._cond.wait(min(min(wake, deadline) - now, self._slice))

    def _waiting_session(self, request: dict[str, Any], lock: str) -> _Session | None:
        """The session an acquire waits under (``None`` for an acquire without one)."""
        if "session" not in request:
            return None
        session = self._sessions.get(wire.text(request, "session"))
        if session is None or session.lock != lock or session.epoch is not None:
            raise wire.BadRequest("field 'session' must name an open session of this lock")
        return session

    def _draw(self, name: str, state: _LockState) -> int:
        """The token-before-lease mistake: take the next epoch now, before the lease is won."""
        drawn = _LockState(epoch=state.epoch + 1, grants=state.grants, ttl=state.ttl)
        if self._durable:
            self._save(name, drawn)
        state.epoch = drawn.epoch
        return drawn.epoch

    def _grant(
        self,
        name: str,
        state: _LockState,
        ttl: float,
        owner: str,
        received: float,
        token: int | None,
    ) -> dict[str, Any]:
        if token is not None:
            epoch = token
        elif self._timestamp_token:
            epoch = int(time.time() * 1000)
        else:
            epoch = state.epoch + 1
        # A timestamp token is whatever the clock says, below the last one too: the mistake.
        granted = _LockState(
            epoch=epoch if self._timestamp_token else max(state.epoch, epoch),
            grants=state.grants + 1,
            ttl=max(state.ttl, ttl),
        )
        if self._durable:
            self._save(name, granted)  # durable before anyone hears of it
        state.epoch, state.grants, state.ttl = granted.epoch, granted.grants, granted.ttl
        # The lease starts after the fsync; the holder hears how long after its request arrived,
        # so by the holder's clock the lease ends no earlier than (request sent + waited + TTL).
        start = self._now()
        state.lease = _Lease(epoch, owner, ttl, start + ttl)
        return {
            "ok": True,
            "epoch": epoch,
            "waited": start - received,
            "grant_seq": state.grants,
        }

    def _held(self, request: dict[str, Any]) -> tuple[str, _LockState, str | None]:
        """The lock named by ``request`` and why its lease is not the caller's (None if it is)."""
        name = wire.text(request, "lock")
        epoch = wire.integer(request, "epoch")
        state = self._locks.setdefault(name, _LockState())
        self._expire(name, state, self._now())
        if state.lease is None:
            return name, state, "no live lease"
        if state.lease.epoch != epoch:
            return name, state, f"the live lease has epoch {state.lease.epoch}"
        return name, state, None

    def _renew(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            _, state, refusal = self._held(request)
            if refusal is not None or state.lease is None:
                return {"ok": False, "error": "not-held", "message": refusal}
            state.lease.expires = self._now() + state.lease.ttl
            return {"ok": True}

    def _release(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            _, state, refusal = self._held(request)
            if refusal is not None:
                return {"ok": False, "error": "not-held", "message": refusal}
            state.lease = None  # a clean release: no lock-delay
            self._cond.notify_all()
            return {"ok": True}

    def _status(self, name: str) -> dict[str, Any]:
        with self._cond:
            state = self._locks.setdefault(name, _LockState())
            now = self._now()
            self._expire(name, state, now)
            lease = state.lease
            return {
                "ok": True,
                "epoch": state.epoch,
                "holder": None
                if lease is None
                else {
                    "epoch": lease.epoch,
                    "owner": lease.owner,
                    "expires_in": lease.expires - now,
                },
                "grantable_in": max(0.0, state.grantable_at - now),
            }


def _ttl(request: dict[str, Any]) -> float:
    """The request's ``ttl``: positive seconds."""
    ttl = wire.number(request, "ttl")
    if ttl <= 0:
        raise wire.BadRequest("field 'ttl' must be positive (seconds)")
    return ttl


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until killed."""
    parser = wire.with_listen_options("fencecheck reference lock service")
    parser.add_argument("--data-dir", type=Path, required=True, help="where epochs are kept")
    parser.add_argument(
        "--lock-delay",
        type=float,
        default=0.0,
        help="seconds a lock stays ungrantable after a lease expires without release",
    )
    parser.add_argument(
        "--bug",
        action="append",
        default=[],
        choices=[
            EPOCH_IN_MEMORY,
            TOKEN_BEFORE_LEASE,
            TIMESTAMP_TOKEN,
            GRANT_TO_EXPIRED_WAITER,
            WALL_CLOCK_EXPIRY,
        ],
    )
    args = parser.parse_args(argv)
    if args.lock_delay < 0:
        parser.error("--lock-delay must be >= 0 seconds")
    service = LockService(
        args.data_dir,
        args.lock_delay,
        durable=EPOCH_IN_MEMORY not in args.bug,
        early_tokens=TOKEN_BEFORE_LEASE in args.bug,
        timestamp_token=TIMESTAMP_TOKEN in args.bug,
        grant_expired=GRANT_TO_EXPIRED_WAITER in args.bug,
        wall_clock_expiry=WALL_CLOCK_EXPIRY in args.bug,
    )
    banner = (
        f"lock server, data {args.data_dir}, lock-delay {args.lock_delay:.3f}s, "
        f"bugs {sorted(args.bug) or 'none'}"
    )
    wire.serve(args.host, args.port, service.handle, banner, args.secret_file)


if __name__ == "__main__":
    main()
