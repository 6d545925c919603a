"""The no-op system's holder client, loaded by the harness's agent on each worker.

Stdlib-only (it imports only :mod:`harness.nodeside`, shipped beside it). Its config: ``server``
(``host:port`` of the in-memory lock and sink), ``node`` and ``timeout`` (seconds to wait for an
answer; default 10). Definite answers are typed results; a request sent and not answered raises,
which the agent reports as unknown. Each thread keeps its connection open between calls
(:class:`harness.nodeside.wire.Pool`).
"""

from __future__ import annotations

from typing import Any

from harness.nodeside import wire
from harness.nodeside.client import UNAVAILABLE, Accepted, Entry, Grant, Read, Refused

__all__ = ["Client"]


class Client:
    """Talks to the no-op server for one holder."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._timeout = float(config.get("timeout", 10.0))
        self._server = wire.Pool(wire.parse_address(str(config["server"])), self._timeout)

    def _call(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any] | None:
        """The reply, or ``None`` when no connection could be made (nothing was sent)."""
        try:
            return self._server.call(request, timeout)
        except wire.NotDelivered:
            return None

    def acquire(self, lock: str, ttl: float, wait: float) -> Grant | Refused:
        """A lease with a new, higher epoch, or why not."""
        reply = self._call(
            {"op": "acquire", "lock": lock, "ttl": ttl, "wait": wait}, wait + self._timeout
        )
        if reply is None:
            return Refused(UNAVAILABLE)
        if reply.get("ok"):
            return Grant(int(reply["epoch"]), float(reply.get("waited", 0.0)))
        return Refused(str(reply.get("error", "refused")))

    def renew(self, lock: str, epoch: int) -> bool:
        """Extend the lease; False when the server says it is gone (raises when unreachable)."""
        return bool(self._server.call({"op": "renew", "lock": lock, "epoch": epoch}).get("ok"))

    def release(self, lock: str, epoch: int) -> bool:
        """Give the lease back."""
        return bool(self._server.call({"op": "release", "lock": lock, "epoch": epoch}).get("ok"))

    def write(
        self, lock: str, sink: str, key: str, id: str, epoch: int, prev: Any
    ) -> Accepted | Refused:
        """Append ``id`` to ``key`` under ``epoch``; the sink refuses an epoch below its mark."""
        reply = self._call({"op": "write", "lock": lock, "epoch": epoch, "key": key, "id": id})
        if reply is None:
            return Refused(UNAVAILABLE)
        if reply.get("ok"):
            return Accepted(reply.get("seq"))
        return Refused(str(reply.get("error", "refused")))

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> Read | Refused:
        """The entries of ``key``; with ``lock`` and ``epoch`` a fenced read."""
        request: dict[str, Any] = {"op": "read", "key": key}
        if lock is not None or epoch is not None:
            # Both go out even if one is missing: the server answers bad-request, never unfenced.
            request.update(lock=lock, epoch=epoch)
        reply = self._call(request)
        if reply is None:
            return Refused(UNAVAILABLE)
        entries = reply.get("entries")
        if not reply.get("ok") or not isinstance(entries, list):
            return Refused(str(reply.get("error", "refused")))
        return Read(tuple(Entry(str(e["id"]), int(e["epoch"]), e.get("seq")) for e in entries))
