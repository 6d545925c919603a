"""The reference system's holder client, loaded by the agent on each worker node.

Stdlib-only (it imports only :mod:`harness.nodeside`, copied next to it by the harness). It
implements :class:`harness.nodeside.client.HolderClient`: definite answers are typed results, an
unknown outcome is an exception (a request sent and not answered). Each thread keeps its
connections open between calls (:class:`harness.nodeside.wire.Pool`); a call abandoned on a
timeout drops its connection, so it never confuses the next one.

Each acquire waits under a session of the lock server's, kept alive every TTL/3 by a thread of
its own while it waits: a holder that stops (a pause, a starved CPU) lets it end, and the service
then refuses the waiting acquire ``expired``. What the session heard is the holder's own evidence
of its lease (:class:`~harness.nodeside.client.LeaseEnd` on the grant): a grant answered when the
session was last heard alive more than a TTL ago is confirmed by one more keepalive first, since a
holder that was stopped cannot know whether its lease outlived the wait.

Its configuration (the ``client`` object of the agent's ``--config``): ``lock`` and ``store``
addresses as ``host:port``, ``node`` (the holder's name, shown in the lock server's log) and
``timeout`` (seconds to wait for a reply beyond any requested wait; default 10).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from harness.nodeside import wire
from harness.nodeside.client import (
    UNAVAILABLE,
    Accepted,
    Entry,
    Grant,
    LeaseEnd,
    Read,
    Refused,
)

__all__ = ["Client"]

_BATCH = "store-batch"


class Client:
    """Talks to the reference lock server and store for one holder."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._owner = str(config.get("node", "?"))
        self._timeout = float(config.get("timeout", 10.0))
        # On a node the run secret is the process's (wire.use_secret); elsewhere it is passed.
        token = config.get("token")
        token = str(token) if token is not None else None
        self._lock = wire.Pool(wire.parse_address(str(config["lock"])), self._timeout, token)
        self._store = wire.Pool(wire.parse_address(str(config["store"])), self._timeout, token)

    def acquire(self, lock: str, ttl: float, wait: float) -> Grant | Refused:
        """A new epoch for ``lock`` with a ``ttl``-second lease, waiting up to ``wait`` seconds
        under a session of its own."""
        try:
            opened = self._lock.call({"op": "session", "lock": lock, "ttl": ttl})
        except (wire.NotDelivered, OSError):
            return Refused(UNAVAILABLE)  # opening a session grants nothing: not granted
        if not opened.get("ok"):
            return Refused(str(opened.get("error", "refused")))
        session = _Session(self._lock, str(opened["session"]), ttl)
        request = {
            "op": "acquire",
            "lock": lock,
            "ttl": ttl,
            "wait": wait,
            "owner": self._owner,
            "session": session.name,
        }
        keeper = threading.Thread(target=session.keep_alive, daemon=True)
        keeper.start()
        try:
            reply = self._lock.call(request, wait + self._timeout)
        except wire.NotDelivered:
            return Refused(UNAVAILABLE)
        finally:
            session.stop.set()
        if not reply.get("ok"):
            return Refused(str(reply.get("error", "refused")))
        keeper.join()
        seq = reply.get("grant_seq")
        return Grant(
            int(reply["epoch"]),
            float(reply["waited"]),
            int(seq) if seq is not None else None,
            session.confirmed(),
        )

    def renew(self, lock: str, epoch: int) -> bool:
        """Extend the lease of ``epoch``; False when the service says it is no longer held."""
        request = {"op": "renew", "lock": lock, "epoch": epoch}
        return bool(self._lock.call(request).get("ok"))

    def release(self, lock: str, epoch: int) -> bool:
        """Give the lease of ``epoch`` back; False when it was no longer held."""
        request = {"op": "release", "lock": lock, "epoch": epoch}
        return bool(self._lock.call(request).get("ok"))

    def write(
        self, lock: str, sink: str, key: str, id: str, epoch: int, prev: Any
    ) -> Accepted | Refused:
        """Send a write carrying ``epoch``; the store answers with its acceptance ``seq``."""
        if sink == _BATCH:
            items = [{"key": key, "id": id, "prev": prev}]
            request = {"op": "write-batch", "lock": lock, "epoch": epoch, "items": items}
            request["holder"] = self._owner
        else:
            request = {
                "op": "write",
                "sink": sink,
                "lock": lock,
                "epoch": epoch,
                "key": key,
                "id": id,
                "prev": prev,
                "holder": self._owner,
            }
        return self._send(request)

    def write_keys(
        self, lock: str, sink: str, items: Sequence[tuple[str, str]], epoch: int
    ) -> Accepted | Refused:
        """One write spanning several keys of ``sink``, accepted or refused as a whole."""
        listed = [{"key": key, "id": write_id} for key, write_id in items]
        request: dict[str, Any] = {
            "lock": lock,
            "epoch": epoch,
            "items": listed,
            "holder": self._owner,
        }
        if sink == _BATCH:
            request["op"] = "write-batch"
        else:
            request.update(op="write", sink=sink)
        return self._send(request)

    def _send(self, request: dict[str, Any]) -> Accepted | Refused:
        """Send a write request; the store answers with one acceptance ``seq`` per item."""
        try:
            reply = self._store.call(request)
        except wire.NotDelivered:
            return Refused(UNAVAILABLE)
        if not reply.get("ok"):
            return Refused(str(reply.get("error", "refused")))
        seqs = reply.get("seqs")
        if not isinstance(seqs, list) or not seqs:
            return Accepted()
        return Accepted(int(seqs[0]), tuple(int(seq) for seq in seqs[1:]))

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> Read | Refused:
        """The entries of ``key`` in ``sink`` in the sink's order, or why the read was refused
        (:data:`STALE` when fenced by ``lock`` and ``epoch`` and the store has seen higher)."""
        request: dict[str, Any] = {"op": "read", "sink": sink, "key": key}
        if lock is not None or epoch is not None:
            # Both go out even if one is missing: the store answers bad-request, never unfenced.
            request.update(lock=lock, epoch=epoch, holder=self._owner)
        try:
            reply = self._store.call(request)
        except wire.NotDelivered:
            return Refused(UNAVAILABLE)
        entries = reply.get("entries")
        if not reply.get("ok") or not isinstance(entries, list):
            return Refused(str(reply.get("error", "refused")))
        return Read(tuple(Entry(str(e["id"]), int(e["epoch"]), e.get("seq")) for e in entries))


class _Session:
    """One acquire's session: the keepalives while it waits and what they heard."""

    def __init__(self, pool: wire.Pool, name: str, ttl: float) -> None:
        self.name = name
        self.stop = threading.Event()
        self._pool = pool
        self._ttl = ttl
        self._opened = time.monotonic()
        self._alive = self._opened  # when the last keepalive that was answered alive was sent
        self._ended: LeaseEnd | None = None

    def keep_alive(self) -> None:
        """Until stopped: a keepalive every TTL/3, until one says the session ended."""
        while not self.stop.wait(self._ttl / 3) and self._ended is None:
            self._ask()

    def confirmed(self) -> LeaseEnd | None:
        """After a grant: the end the session heard of, if any; one last keepalive first when
        it was last heard alive more than a TTL ago (the holder may have been stopped)."""
        if self._ended is None and time.monotonic() - self._alive > self._ttl:
            self._ask()
        return self._ended

    def _ask(self) -> None:
        sent = time.monotonic()
        try:
            reply = self._pool.call({"op": "keepalive", "session": self.name})
        except (wire.NotDelivered, OSError):
            return  # no answer: no evidence either way
        if reply.get("ok"):
            self._alive = sent
            return
        error = str(reply.get("error"))
        if error in ("expired", "lost"):
            seq = reply.get("grant_seq")
            self._ended = LeaseEnd(
                time.monotonic() - self._opened, error, int(seq) if seq is not None else None
            )
