"""A malformed request to the reference system's servers is answered ``bad-request`` on the same
connection, which stays usable: never closed silently, never a traceback in the server's log, and
never taken as a request with an infinite or NaN duration (issue 22)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.nodeside import wire
from systems.reference.lock_server import LockService
from systems.reference.store_server import Store

SECRET = "s3cret"
_MALFORMED = [
    b"garbage",
    b"\xff\xfe",
    b"[1, 2]",
    b'"a string"',
    b"1" * 5000,
    b"[" * 100_000,
    b'{"op": []}',
    b'{"op": {"nested": 1}}',
    b'{"op": 7}',
    b'{"op": "nonsense", "auth": "s3cret"}',
    b'{"op": "session", "auth": "s3cret", "lock": "L", "ttl": 1e400}',
    b'{"op": "session", "auth": "s3cret", "lock": "L", "ttl": NaN}',
    b'{"op": "acquire", "auth": "s3cret", "lock": "L", "session": "s", "ttl": 1, "wait": 1e999}',
    b'{"op": "write", "auth": "s3cret", "sink": "store", "lock": "L", "epoch": "1"}',
    b'{"op": "write-batch", "auth": "s3cret", "lock": "L", "epoch": 1, "items": [1]}',
]

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def _lock(data: Path) -> Handler:
    return LockService(data, 0.0, durable=True).handle


def _store(data: Path) -> Handler:
    return Store(data).handle


@pytest.fixture(params=[_lock, _store], ids=["lock server", "store"])
def address(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, int]]:
    server = wire.LineServer(("127.0.0.1", 0), request.param(tmp_path), token=SECRET)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _answer(sock: socket.socket) -> bytes:
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection without answering"
        reply += chunk
    return reply


@pytest.mark.parametrize("line", _MALFORMED, ids=lambda line: repr(line[:30]))
def test_a_malformed_request_is_answered_bad_request_and_the_connection_stays_open(
    address: tuple[str, int], line: bytes, capfd: pytest.CaptureFixture[str]
) -> None:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(line + b"\n")
        assert b'"error":"bad-request"' in _answer(sock)
        sock.sendall(b'{"op": "ping"}\n')  # the same connection still serves
        assert _answer(sock).startswith(b'{"ok":true')
    assert "Traceback" not in capfd.readouterr().err


def test_a_line_beyond_the_limit_is_answered_then_closed(
    address: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "MAX_REQUEST_BYTES", 1000)
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(b"x" * 5000)
        assert b"a request line is at most 1000 bytes" in _answer(sock)
        assert sock.recv(1) == b""
