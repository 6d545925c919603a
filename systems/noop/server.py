"""The no-op system's node-side service: a lock and a fenced sink, in memory, in one process.

Runs on the system's one node as ``python3 noop_server.py --port 7201``. Stdlib-only (it imports
only :mod:`harness.nodeside.wire`, shipped beside it). It exists to measure the harness: it does
what a fenced system must do per request (grant leases with strictly increasing epochs, compare a
write's epoch with the lock's highest seen and refuse a lower one) and nothing more: no disk, no
fsync, so a run's speed is the harness's own.

**Nothing is durable.** Epoch counters, marks and entries live in this process's memory; a kill
forgets them all, so a killed and restarted server grants epoch 1 again. The adapter declares its
role volatile and the runner refuses faults that kill it.

Protocol (one JSON object per line, see :mod:`harness.nodeside.wire`):
``{"op":"acquire","lock":L,"ttl":T,"wait":S}`` -> ``{"ok":true,"epoch":N,"waited":W}`` or
``{"ok":false,"error":"timeout"}``; ``{"op":"renew"|"release","lock":L,"epoch":N}`` ->
``{"ok":true}`` or ``{"ok":false,"error":"not-held"}``;
``{"op":"write","lock":L,"epoch":N,"key":K,"id":I}`` -> ``{"ok":true,"seq":Q}`` or
``{"ok":false,"error":"stale-epoch","mark":M}``; ``{"op":"read","key":K}`` (with ``lock`` and
``epoch``: fenced, refused below the mark, else it raises the mark) ->
``{"ok":true,"entries":[{"id":I,"epoch":N,"seq":Q},...]}``; ``{"op":"ping"}``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.nodeside import wire

__all__ = ["Locks", "Service", "Sink", "main"]


@dataclass(slots=True)
class _Lease:
    epoch: int
    expires: float  # monotonic
    ttl: float


class Locks:
    """Leases with strictly increasing epochs per lock, counted in memory."""

    def __init__(self) -> None:
        self._epochs: dict[str, int] = {}
        self._held: dict[str, _Lease] = {}
        self._changed = threading.Condition()

    def acquire(self, lock: str, ttl: float, wait: float) -> dict[str, Any]:
        """A new epoch for ``lock`` once it is free (an unrenewed lease frees it after ``ttl``),
        waiting up to ``wait`` seconds."""
        asked = time.monotonic()
        deadline = asked + wait
        with self._changed:
            while (held := self._held.get(lock)) is not None and held.expires > time.monotonic():
                now = time.monotonic()
                if now >= deadline:
                    return {"ok": False, "error": "timeout"}
                self._changed.wait(min(held.expires, deadline) - now)
            epoch = self._epochs.get(lock, 0) + 1
            self._epochs[lock] = epoch
            now = time.monotonic()
            self._held[lock] = _Lease(epoch, now + ttl, ttl)
            return {"ok": True, "epoch": epoch, "waited": now - asked}

    def renew(self, lock: str, epoch: int) -> dict[str, Any]:
        """Extend the lease of ``epoch`` by its TTL, if it is still the live one."""
        with self._changed:
            held = self._live(lock, epoch)
            if held is None:
                return {"ok": False, "error": "not-held"}
            held.expires = time.monotonic() + held.ttl
            return {"ok": True}

    def release(self, lock: str, epoch: int) -> dict[str, Any]:
        """Free ``lock`` if ``epoch`` still holds it."""
        with self._changed:
            if self._live(lock, epoch) is None:
                return {"ok": False, "error": "not-held"}
            del self._held[lock]
            self._changed.notify_all()
            return {"ok": True}

    def _live(self, lock: str, epoch: int) -> _Lease | None:
        held = self._held.get(lock)
        if held is None or held.epoch != epoch or held.expires <= time.monotonic():
            return None
        return held


class Sink:
    """One fenced sink: per key the accepted ``{id, epoch, seq}`` in order, per lock its mark."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._marks: dict[str, int] = {}
        self._entries: dict[str, list[dict[str, Any]]] = {}
        self._seq = 0

    def write(self, lock: str, epoch: int, key: str, id: str) -> dict[str, Any]:
        """Accept ``id`` under ``epoch`` unless the lock's mark is higher."""
        with self._mutex:
            mark = self._marks.get(lock, 0)
            if epoch < mark:
                return {"ok": False, "error": "stale-epoch", "mark": mark}
            self._marks[lock] = epoch
            self._seq += 1
            self._entries.setdefault(key, []).append({"id": id, "epoch": epoch, "seq": self._seq})
            return {"ok": True, "seq": self._seq}

    def read(self, key: str, fence: tuple[str, int] | None) -> dict[str, Any]:
        """The entries of ``key``; with ``fence`` (lock, epoch) refused below the lock's mark,
        else the mark is raised to that epoch first."""
        with self._mutex:
            if fence is not None:
                lock, epoch = fence
                mark = self._marks.get(lock, 0)
                if epoch < mark:
                    return {"ok": False, "error": "stale-epoch", "mark": mark}
                self._marks[lock] = epoch
            return {"ok": True, "entries": [dict(e) for e in self._entries.get(key, ())]}


class Service:
    """Both halves behind one wire handler."""

    def __init__(self) -> None:
        self.locks = Locks()
        self.sink = Sink()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one protocol request (see the module docstring)."""
        op = request.get("op")
        if op == "ping":
            return {"ok": True}
        if op == "read":
            key = wire.text(request, "key")
            fenced = "lock" in request or "epoch" in request
            fence = (wire.text(request, "lock"), wire.integer(request, "epoch")) if fenced else None
            return self.sink.read(key, fence)
        lock = wire.text(request, "lock")
        if op == "acquire":
            ttl, wait = wire.number(request, "ttl"), wire.number(request, "wait", 0.0)
            return self.locks.acquire(lock, ttl, wait)
        epoch = wire.integer(request, "epoch")
        if op == "renew":
            return self.locks.renew(lock, epoch)
        if op == "release":
            return self.locks.release(lock, epoch)
        if op == "write":
            return self.sink.write(lock, epoch, wire.text(request, "key"), wire.text(request, "id"))
        raise wire.BadRequest(f"unknown op {op!r}; expected acquire, renew, release, write, read")


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until killed."""
    parser = wire.with_listen_options("fencecheck no-op system: in-memory lock and fenced sink")
    args = parser.parse_args(argv)
    banner = "noop lock and sink, in memory (not durable)"
    wire.serve(args.host, args.port, Service().handle, banner, args.secret_file)


if __name__ == "__main__":
    main()
