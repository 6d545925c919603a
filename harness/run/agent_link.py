"""The controller's end of the agent protocol: one JSON request line, one JSON response line.

A request that got no answer in time is *unknown*, not failed: the agent may still carry it out
(it may be paused mid-write). The link then drops its connection so the next request starts
clean, while the agent finishes the old one on its own. The wire format and its client are
:mod:`harness.nodeside.wire`'s, the same the node programs speak.
"""

from __future__ import annotations

import threading
from typing import Any

from harness.nodeside.wire import Connection, NotDelivered
from harness.record.io import json_bytes

__all__ = ["AgentLink", "AgentUnreachable"]


class AgentUnreachable(NotDelivered):
    """The agent could not be reached at all, so the request was never sent."""


class AgentLink:
    """A reconnecting request/response connection to one agent; ``token`` is the run secret
    every request carries (see :mod:`harness.nodeside.wire`)."""

    def __init__(
        self, host: str, port: int, connect_timeout: float = 2.0, token: str | None = None
    ) -> None:
        self.host = host
        self.port = port
        self._token = token
        self._connect_timeout = connect_timeout
        self._connection: Connection | None = None
        # The teardown closes a link from the main thread while a holder's thread may be in
        # the middle of a call on it (a second signal, or a join that timed out, left it there).
        self._lock = threading.Lock()

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send ``request`` and wait up to ``timeout`` s; ``None`` when the outcome is unknown.

        Raises :class:`AgentUnreachable` when no connection could be made (nothing was sent).
        """
        connection = self._connection
        if connection is None:
            try:
                # orjson's encoding: the standard library's was a fifth of a holder's Python.
                connection = Connection(
                    (self.host, self.port), self._connect_timeout, self._token, json_bytes
                )
            except NotDelivered as problem:
                raise AgentUnreachable(str(problem)) from None
            with self._lock:
                self._connection = connection
        try:
            return connection.request(request, timeout)
        except OSError:
            # A late answer could still arrive on this connection: never read from it again.
            self._drop(connection)
            return None

    def close(self) -> None:
        """Drop the connection; the next call reconnects. Safe from another thread while a
        call is under way (that call then ends as an unknown outcome)."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _drop(self, connection: Connection) -> None:
        """Close ``connection`` and forget it, unless the link moved on to another already."""
        with self._lock:
            if self._connection is connection:
                self._connection = None
        connection.close()
