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
gives a later grant a lower epoch (only a clock fault shows it).

Protocol (one JSON object per line, see :mod:`harness.nodeside.wire`):
``{"op":"acquire","lock":L,"ttl":S,"wait":S,"owner":NAME}`` -> ``{"ok":true,"epoch":N,
"waited":S,"grant_seq":G}`` (seconds between the request's arrival and the lease's start; the
lock's count of grants so far, this one included) or
``{"ok":false,"error":"timeout"}``; ``{"op":"renew","lock":L,"epoch":N}`` and
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

__all__ = ["EPOCH_IN_MEMORY", "TIMESTAMP_TOKEN", "TOKEN_BEFORE_LEASE", "LockService", "main"]

EPOCH_IN_MEMORY = "epoch-in-memory"
TOKEN_BEFORE_LEASE = "token-before-lease"
TIMESTAMP_TOKEN = "timestamp-token"


@dataclass(slots=True)
class _Lease:
    epoch: int
    owner: str
    ttl: float
    expires: float  # monotonic seconds


@dataclass(slots=True)
class _LockState:
    epoch: int = 0  # the last epoch granted (or drawn); 0 before the first grant
    grants: int = 0  # how many grants so far: the last grant's grant_seq
    ttl: float = 0.0  # the longest TTL granted: how long a lease from before a restart may live
    lease: _Lease | None = None
    grantable_at: float = 0.0  # monotonic seconds; lock-delay or the grace period after a restart


class LockService:
    """The lock table and its durable epoch counters; :meth:`handle` answers one request."""

    def __init__(
        self,
        data_dir: Path,
        lock_delay: float,
        durable: bool,
        early_tokens: bool = False,
        timestamp_token: bool = False,
    ) -> None:
        self._cond = threading.Condition()
        self._timestamp_token = timestamp_token
        self._locks: dict[str, _LockState] = {}
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
        now = time.monotonic()
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
        raise wire.BadRequest(f"unknown op {op!r}; expected acquire, renew, release, status, ping")

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
        ttl = wire.number(request, "ttl")
        if ttl <= 0:
            raise wire.BadRequest("field 'ttl' must be positive (seconds)")
        wait = wire.number(request, "wait", 0.0)
        owner = str(request.get("owner", "?"))
        received = time.monotonic()
        deadline = received + wait
        with self._cond:
            state = self._locks.setdefault(name, _LockState())
            token = self._draw(name, state) if self._early_tokens else None
            while True:
                now = time.monotonic()
                self._expire(name, state, now)
                if state.lease is None and now >= state.grantable_at:
                    return self._grant(name, state, ttl, owner, received, token)
                if now >= deadline:
                    return {"ok": False, "error": "timeout"}
                wake = state.lease.expires if state.lease is not None else state.grantable_at
                self._cond.wait(min(wake, deadline) - now)

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
        start = time.monotonic()
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
        self._expire(name, state, time.monotonic())
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
            state.lease.expires = time.monotonic() + state.lease.ttl
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
            now = time.monotonic()
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
        choices=[EPOCH_IN_MEMORY, TOKEN_BEFORE_LEASE, TIMESTAMP_TOKEN],
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
    )
    banner = (
        f"lock server, data {args.data_dir}, lock-delay {args.lock_delay:.3f}s, "
        f"bugs {sorted(args.bug) or 'none'}"
    )
    wire.serve(args.host, args.port, service.handle, banner, args.secret_file)


if __name__ == "__main__":
    main()
