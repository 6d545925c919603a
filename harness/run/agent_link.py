"""The controller's end of the agent protocol: one JSON request line, one JSON response line.

A request that got no answer in time is *unknown*, not failed: the agent may still carry it out
(it may be paused mid-write). The link then drops its connection so the next request starts
clean, while the agent finishes the old one on its own. The wire format and its client are
:mod:`harness.nodeside.wire`'s, the same the node programs speak.
"""

from __future__ import annotations

from typing import Any

from harness.history.io import json_bytes
from harness.nodeside.wire import Connection, NotDelivered

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

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send ``request`` and wait up to ``timeout`` s; ``None`` when the outcome is unknown.

        Raises :class:`AgentUnreachable` when no connection could be made (nothing was sent).
        """
        if self._connection is None:
            try:
                # orjson's encoding: the standard library's was a fifth of a holder's Python.
                self._connection = Connection(
                    (self.host, self.port), self._connect_timeout, self._token, json_bytes
                )
            except NotDelivered as problem:
                raise AgentUnreachable(str(problem)) from None
        try:
            return self._connection.request(request, timeout)
        except OSError:
            # A late answer could still arrive on this connection: never read from it again.
            self.close()
            return None

    def close(self) -> None:
        """Drop the connection; the next call reconnects."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
