"""Newline-delimited JSON over TCP, the one wire format between the controller and node programs.

Every node-side program (the agent, the reference lock server and store) speaks it: one JSON
object per line, one response line per request line, any number of connections at once, a thread
per connection so that a request blocked on a lock never holds up another connection.

This module is **stdlib-only**: it is copied to nodes as ``/opt/fencecheck/harness/wire.py`` next
to the programs that import it, where there is no fencecheck installation.

Authentication: the node programs' ports are reachable from the host (the cluster network is a
host bridge), so any local user could otherwise forge a grant or a write into a run. Each run has
a secret that the controller writes into every node as a mode-0600 file (``--secret-file``; never
on a command line, where ``ps`` shows it to every user). A program started with it sends the
secret as ``auth`` in every request it makes and refuses every request without it, except the
side-effect-free ``ping`` that readiness probes send and ``clock``. Requests are logged without
``auth``.

Every server also answers ``{"op":"clock"}`` itself with ``{"ok":true,"wall":W,"mono":M}``: the
process's own clocks, which the clock faults confirm from inside the faulted process (a process
under libfaketime reads the faked ones; see :mod:`harness.nodeside.clock`).
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import math
import select
import socket
import socketserver
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "AUTH",
    "CLOCK",
    "MAX_REQUEST_BYTES",
    "UNAUTHORIZED",
    "BadRequest",
    "Connection",
    "Handler",
    "LineServer",
    "NotDelivered",
    "Pool",
    "bad_request",
    "call",
    "integer",
    "log",
    "number",
    "parse_address",
    "read_secret",
    "serve",
    "text",
    "use_secret",
    "with_listen_options",
]

AUTH = "auth"
"""The request field that carries the run's secret."""
UNAUTHORIZED = "unauthorized"
"""The error of a request whose ``auth`` is missing or wrong."""
CLOCK = "clock"
"""The request every server answers with its own clocks."""
_OPEN_OPS = frozenset(("ping", CLOCK))
# What a client reads from its socket at once: below malloc's mmap threshold, since a 256 KiB read
# mapped and unmapped its buffer on every call (measured: the agent's CPU per write rose).
_READ_BYTES = 64 * 1024
MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The longest request line a server reads (a batch write of many keys is well under it): a
line without end must not be buffered until memory runs out."""
# One encoder and one decoder for every line: ``json.dumps`` with ``separators`` builds a new
# encoder per call, and ``json.loads`` of bytes sniffs their encoding first; both were a tenth of
# a node program's Python per request. The lines are UTF-8 JSON, as the standard library writes.
_dumps = json.JSONEncoder(separators=(",", ":")).encode
_loads = json.JSONDecoder().decode


def _encode(value: dict[str, Any]) -> bytes:
    return _dumps(value).encode()


class _Credential:
    """This process's secret, set by :func:`use_secret` (a node program serves one run)."""

    token: str | None = None


def use_secret(path: str | None) -> str | None:
    """Read the run's secret from ``path`` and make it this process's default credential:
    every :class:`Connection` sends it, every :class:`LineServer` requires it. ``None`` (no
    ``--secret-file``) leaves authentication off, for programs run by hand or in tests."""
    if path is None:
        return None
    token = read_secret(path)
    _Credential.token = token
    return token


def read_secret(path: str) -> str:
    """The run's secret in the file ``path`` (a node's copy); ``ValueError`` when it is empty.

    Holder clients of systems with their own authentication (a password, a digest) read it here
    from the ``secret_file`` of their config: the secret itself is never in a config, which
    shows on the agent's command line."""
    with open(path, encoding="ascii") as file:
        token = file.read().strip()
    if not token:
        raise ValueError(f"secret file {path} is empty")
    return token


Handler = Callable[[dict[str, Any]], dict[str, Any]]
"""Turns one decoded request into its response; runs on the connection's thread."""

_log_lock = threading.Lock()
_second: list[Any] = [-1, ""]  # the whole second last formatted, and its text (under _log_lock)


def log(text: str) -> None:
    """Write one timestamped line to stdout (the daemon's log), whole, even from many threads.

    Each line starts with the wall-clock time and the monotonic clock in nanoseconds: containers
    share the host's monotonic clock, so the second number lines up with the controller's. The
    line is flushed at once: a daemon killed a moment later has still logged it.
    """
    now = time.time()
    whole = int(now)
    with _log_lock:
        if whole != _second[0]:
            # strftime per line was a tenth of an agent's CPU per request: once a second will do.
            _second[:] = [whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))]
        line = f"{_second[1]}.{int((now - whole) * 1e6):06d}Z {time.monotonic_ns()} {text}\n"
        out = sys.stdout
        # Through the binary stream beneath stdout: its write and flush cost a quarter of the
        # text layer's for the same one system call (nothing else of a node program writes
        # stdout while it serves, so no text is waiting in the layer above to be overtaken).
        binary = getattr(out, "buffer", None)
        if binary is None:
            out.write(line)
            out.flush()
        else:
            binary.write(line.encode("utf-8", "replace"))
            binary.flush()


class NotDelivered(ConnectionError):
    """The connection could not be opened, so the request certainly never reached the server."""


def parse_address(address: str) -> tuple[str, int]:
    """Split ``host:port`` into its parts, or raise ``ValueError`` saying what is wrong."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address {address!r} is not host:port (e.g. 10.0.0.2:7001)")
    return host, int(port)


class Connection:
    """A client connection: send a request line, read its response line.

    Opening raises :class:`NotDelivered` when the server cannot be reached. After a failed or
    timed-out :meth:`request` the connection is unusable (a late response could still arrive on
    it); close it and open another. ``encode`` turns a request into compact JSON bytes (the
    controller passes a faster one than the standard library's; node programs keep the default).
    """

    def __init__(
        self,
        address: tuple[str, int],
        timeout: float,
        token: str | None = None,
        encode: Callable[[dict[str, Any]], bytes] = _encode,
    ) -> None:
        self._token = token if token is not None else _Credential.token
        self._encode = encode
        # The secret's field, spliced into each request's encoding instead of a copied message.
        self._auth = (
            None if self._token is None else f',"{AUTH}":{_dumps(self._token)}}}\n'.encode()
        )
        try:
            self._sock = socket.create_connection(address, timeout=timeout)
        except OSError as problem:
            raise NotDelivered(f"cannot connect to {address[0]}:{address[1]}: {problem}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Blocking, with the kernel's own send and receive timeouts: a socket with a Python
        # timeout polls before every send and every receive, two system calls of an agent's
        # nine per request for nothing.
        self._sock.settimeout(None)
        self.address = address
        self._closed = False
        self._timeout = -1.0
        self._set_timeout(timeout)

    def request(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send ``message`` and return the decoded response.

        Raises ``TimeoutError`` or another ``OSError`` when the outcome is unknown: the server may
        have acted on the request.
        """
        if timeout is not None:
            self._set_timeout(timeout)
        try:
            self._sock.sendall(self._line(message))
        except BlockingIOError:
            raise self._timed_out() from None
        line = self._read_line()
        try:
            response = _loads(line.decode())
        except ValueError:  # UnicodeDecodeError is a ValueError too
            response = None
        if not isinstance(response, dict):
            raise ConnectionError(
                f"{self.address[0]}:{self.address[1]} sent a reply that is not a JSON object"
            )
        return response

    def _line(self, message: dict[str, Any]) -> bytes:
        """``message`` as one request line, with the secret when this connection has one."""
        if self._auth is None:
            return self._encode(message) + b"\n"
        if not message or AUTH in message:
            return self._encode({**message, AUTH: self._token}) + b"\n"
        return self._encode(message)[:-1] + self._auth

    def _set_timeout(self, timeout: float) -> None:
        if timeout == self._timeout:
            return  # two system calls even when nothing changes
        # A zero timeval is no timeout at all to the kernel: the shortest wait is a microsecond.
        seconds, micros = divmod(max(round(timeout * 1e6), 1), 1_000_000)
        timeval = struct.pack("ll", seconds, micros)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
        self._timeout = timeout

    def _timed_out(self) -> TimeoutError:
        return TimeoutError(
            f"{self.address[0]}:{self.address[1]} did not answer within {self._timeout:g} s"
        )

    def _read_line(self) -> bytes:
        """The answer's line, read straight from the socket: one answer per request and nothing
        unasked, so its newline is the last byte received."""
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._sock.recv(_READ_BYTES)
            except BlockingIOError:
                raise self._timed_out() from None
            except OSError:
                if not self._closed:
                    raise
                chunk = b""
            if not chunk:
                if self._closed:
                    # Closed here while waiting (another thread's teardown): the outcome is
                    # unknown, as for any other failed request, and the server did nothing.
                    raise ConnectionAbortedError(
                        f"{self.address[0]}:{self.address[1]}: the connection was closed while "
                        "waiting for the answer"
                    )
                raise ConnectionResetError(
                    f"{self.address[0]}:{self.address[1]} closed the connection before answering"
                )
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def reusable(self) -> bool:
        """True while the server has neither closed the connection nor sent anything unasked:
        between requests an idle connection has nothing to read, so anything readable means EOF
        (the server restarted or gave up on us) and the connection must not carry a request."""
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        """Close the connection (idempotent), at once even while another thread waits on it for
        an answer: that wait ends as an unknown outcome (``OSError``)."""
        # Shut down first: closing alone does not wake a thread blocked reading the socket, so
        # a teardown closing a hung holder's link would leave it to wait out its whole timeout.
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(
    address: tuple[str, int], message: dict[str, Any], timeout: float, token: str | None = None
) -> dict[str, Any]:
    """One request on a fresh connection; see :class:`Connection` for the errors."""
    with Connection(address, timeout, token) as connection:
        return connection.request(message)


class Pool:
    """Requests to one server over one kept-open connection per thread.

    Saves a TCP handshake and a server thread per request, which dominate a small request's cost.
    Errors are those of :class:`Connection`; after any error the thread's connection is dropped,
    so a request abandoned on a timeout never shares a connection with the next one.
    """

    def __init__(self, address: tuple[str, int], timeout: float, token: str | None = None) -> None:
        self.address = address
        self._timeout = timeout
        self._token = token
        self._local = threading.local()

    def call(self, message: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send ``message`` on this thread's connection (opened or reopened as needed)."""
        connection: Connection | None = getattr(self._local, "connection", None)
        if connection is not None and not connection.reusable():
            connection.close()
            connection = None
        if connection is None:
            connection = Connection(self.address, self._timeout, self._token)
            self._local.connection = connection
        try:
            return connection.request(message, self._timeout if timeout is None else timeout)
        except BaseException:
            connection.close()
            self._local.connection = None
            raise


class _LineHandler(socketserver.StreamRequestHandler):
    server: LineServer

    def setup(self) -> None:
        super().setup()
        # Each response is one small send; never hold it back waiting for an ACK (Nagle).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        peer = f"{self.client_address[0]}:{self.client_address[1]}"
        while line := self.rfile.readline(MAX_REQUEST_BYTES + 1):
            too_long = len(line) > MAX_REQUEST_BYTES
            if too_long:
                shown, response = (
                    f"{line[:80]!r}...",
                    bad_request(
                        f"a request line is at most {MAX_REQUEST_BYTES} bytes; the connection is "
                        "closed, since the rest of the line cannot be told from the next request"
                    ),
                )
            elif not line.strip():
                continue
            else:
                shown, response = self.server.answer(line)
            encoded = _dumps(response)
            log(f"{peer} {shown} -> {encoded}")
            try:
                # One send per answer (the handler's writer is unbuffered: write is a sendall).
                self.connection.sendall((encoded + "\n").encode())
            except OSError:
                # The caller gave up (timed out and closed); what it asked for is done regardless.
                return
            if too_long:
                return


class LineServer(socketserver.ThreadingTCPServer):
    """A TCP server that answers each request line with ``handler(request)``.

    A request that is not a JSON object (or nests too deeply to decode, or names its ``op`` with
    anything but a string) gets ``{"ok": false, "error": "bad-request"}``; a handler that raises
    gets ``{"ok": false, "error": "internal"}`` with the exception text, and the connection stays
    open. A line longer than :data:`MAX_REQUEST_BYTES` gets ``bad-request`` and the connection is
    closed (where the next request begins is lost). A request's ``req`` field, if any, is echoed
    in its response. Every request is logged with its response, so a daemon's log explains each
    decision.
    """

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], handler: Handler, token: str | None = None
    ) -> None:
        self.handler = handler
        self.token = token if token is not None else _Credential.token
        self._secret = b"" if self.token is None else self.token.encode()
        super().__init__(address, _LineHandler)

    def answer(self, line: bytes) -> tuple[str, dict[str, Any]]:
        """The request as it may be logged (without its secret) and the response to it."""
        try:
            request = _loads(line.decode())
        # UnicodeDecodeError is a ValueError too; RecursionError: nested too deeply to decode.
        except (ValueError, RecursionError):
            return line.decode("utf-8", "replace").strip()[:200], bad_request(
                "not valid JSON (or nested too deeply); send one JSON object per line"
            )
        if not isinstance(request, dict):
            return _dumps(request)[:200], bad_request(
                "a request must be a JSON object with an 'op' field"
            )
        offered = request.pop(AUTH, None)
        if not isinstance(request.get("op", ""), str):
            return _dumps(request)[:200], bad_request("field 'op' must be a string")
        return _dumps(request), self._respond(request, offered)

    def _authentic(self, request: dict[str, Any], offered: Any) -> bool:
        if self.token is None or request.get("op") in _OPEN_OPS:
            return True
        # Constant-time: a timing side channel must not leak the secret byte by byte.
        return isinstance(offered, str) and hmac.compare_digest(offered.encode(), self._secret)

    def _respond(self, request: dict[str, Any], offered: Any) -> dict[str, Any]:
        if not self._authentic(request, offered):
            return {
                "ok": False,
                "error": UNAUTHORIZED,
                "message": "missing or wrong run secret: this node belongs to another run",
            }
        response: dict[str, Any]
        try:
            if request.get("op") == CLOCK:
                response = {"ok": True, "wall": time.time(), "mono": time.monotonic()}
            else:
                response = self.handler(request)
        except BadRequest as problem:
            response = bad_request(str(problem))
        except Exception as problem:
            response = {"ok": False, "error": "internal", "message": repr(problem)}
        if "req" in request:
            response = {**response, "req": request["req"]}
        return response


class BadRequest(ValueError):
    """Raised by a handler for a request with a missing or mistyped field."""


def text(request: dict[str, Any], name: str) -> str:
    """The non-empty string field ``name`` of ``request``, or :class:`BadRequest`."""
    value = request.get(name)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"field {name!r} must be a non-empty string")
    return value


def integer(request: dict[str, Any], name: str) -> int:
    """The integer field ``name`` of ``request``, or :class:`BadRequest`."""
    value = request.get(name)
    if type(value) is not int:
        raise BadRequest(f"field {name!r} must be an integer")
    return value


def number(request: dict[str, Any], name: str, default: float | None = None) -> float:
    """The finite non-negative number field ``name`` (``default`` when absent), or
    :class:`BadRequest` (JSON decoding here takes ``NaN`` and ``1e400``, which is infinity)."""
    value = request.get(name, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise BadRequest(f"field {name!r} must be a finite non-negative number")
    return float(value)


def bad_request(message: str) -> dict[str, Any]:
    """The response to a malformed request, naming what is wrong."""
    return {"ok": False, "error": "bad-request", "message": message}


def with_listen_options(description: str) -> argparse.ArgumentParser:
    """A command-line parser with the ``--host`` and ``--port`` every node program takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--port", type=int, required=True, help="TCP port to listen on")
    parser.add_argument(
        "--secret-file",
        help="file (mode 0600) holding the run's secret: required of every request, sent with ours",
    )
    return parser


def serve(
    host: str, port: int, handler: Handler, banner: str, secret_file: str | None = None
) -> None:
    """Listen on ``host:port``, log ``banner`` once listening, and answer requests until killed.

    With ``secret_file`` every request but ``ping`` must carry the run's secret, and every request
    this process sends carries it (see the module docstring).
    """
    try:
        use_secret(secret_file)
    except (OSError, ValueError) as problem:
        raise SystemExit(f"--secret-file {secret_file}: {problem}") from None
    server = LineServer((host, port), handler)
    auth = "run secret required" if secret_file else "no authentication"
    log(f"{banner}, listening on {host}:{port}, {auth}")
    server.serve_forever()
