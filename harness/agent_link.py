"""The controller's end of the agent protocol: one JSON request line, one JSON response line.

A request that got no answer in time is *unknown*, not failed: the agent may still carry it out
(it may be paused mid-write). The link then drops its connection so the next request starts
clean, while the agent finishes the old one on its own.
"""

from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

__all__ = ["AgentLink", "AgentUnreachable"]


class AgentUnreachable(ConnectionError):
    """The agent could not be reached at all, so the request was never sent."""


class AgentLink:
    """A reconnecting request/response connection to one agent."""

    def __init__(self, host: str, port: int, connect_timeout: float = 2.0) -> None:
        self.host = host
        self.port = port
        self._connect_timeout = connect_timeout
        self._sock: socket.socket | None = None
        self._reader: Any = None

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), self._connect_timeout)
        except OSError as err:
            raise AgentUnreachable(f"agent at {self.host}:{self.port}: {err}") from err
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self._reader = sock.makefile("rb")
        return sock

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send ``request`` and wait up to ``timeout`` s; ``None`` when the outcome is unknown.

        Raises :class:`AgentUnreachable` when no connection could be made (nothing was sent).
        """
        sock = self._sock or self._connect()
        try:
            sock.settimeout(timeout)
            sock.sendall(json.dumps(request).encode() + b"\n")
            line = self._reader.readline()
        except OSError:
            self.close()
            return None
        if not line:
            self.close()
            return None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Drop the connection; the next call reconnects."""
        if self._reader is not None:
            with contextlib.suppress(OSError):
                self._reader.close()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = None
        self._reader = None
