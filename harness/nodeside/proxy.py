"""The write-path proxy: a TCP relay on a worker node that holds, delays, drops, resets and replays.

The kernel on the machines fencecheck runs on has no netem (``tc qdisc add ... netem`` answers
"Specified qdisc kind is unknown"), so faults of timing are made here, in user space, as toxiproxy
makes them. The harness starts one proxy on each worker of a run that asks for a proxy fault kind
(:mod:`harness.run.proxies`)::

    python3 /opt/fencecheck/proxy.py --port 7100 --peers '{"10.0.0.3": ["l1", "lock"]}'

and inserts it with iptables in the worker's own namespace, so that the holder client needs no
change: a ``nat`` chain of ours, ``FENCECHECK-PROXY``, jumped to from ``OUTPUT``, REDIRECTs every
TCP connection to a lock-service or store node (the ``--peers``) to the proxy's port; the proxy
reads where the connection was going (``SO_ORIGINAL_DST``) and opens its own connection there,
marked (``SO_MARK`` :data:`MARK`) so that the chain lets it pass. ``--route PORT=HOST:PORT``
instead listens on ``PORT`` for one fixed destination (tests and the bench, without iptables).

It is stdlib-only (nodes have no fencecheck installation). Each connection gets two relay threads,
one per direction: ``request`` (what the holder sent) and ``reply``. A chunk read from one side
passes the faults in force, in the order they were added, before it is written to the other side:

- ``hold`` (``request``): the chunk waits until the fault is removed (at most ``max_s``), then goes
  on; everything sent after it waits behind it in the kernel, so delivery keeps the order.
- ``delay`` (per direction): the chunk waits ``latency_s`` plus a uniform draw up to ``jitter_s``.
- ``loss``: ``mode: connections`` drops a fraction ``p`` of new connections (accepted, never
  forwarded: the client hears nothing, as after a lost SYN-ACK that is never retransmitted);
  ``mode: segments`` drops a chunk with probability ``p``, and since a byte stream cannot skip
  bytes, the rest of that connection is dropped with it.
- ``reset``: with probability ``p`` (at most ``count`` times) half the chunk goes on, then both
  sockets are closed with an RST (``SO_LINGER`` 0): a request or reply cut in the middle.
- ``replay`` (``request``, needs ``framing``: ``lines`` or ``resp``): a complete request that
  contains ``match`` is sent again ``after_s`` after it was delivered, on a connection of the
  proxy's own (for RESP preceded by the connection's ``AUTH``/``HELLO``/``SELECT``), at most
  ``count`` times; the reply is recorded.

Every fault is confirmed by the proxy's own report: adding one answers once it is in force, and
each thing it did is an event (what it held, from when, delivered when; what it dropped, reset or
replayed). The control port (:data:`CONTROL_PORT` on the worker's address, a
:mod:`harness.nodeside.wire` server: every request but ``ping`` must carry the run's secret, from
``--secret-file``) is reached by the controller directly, so a fault is in force within a round
trip (a hold must be in force before the write it is aimed at leaves, a few ms after its lease
check); it takes ``{"op":"add","key":K,"kind":KIND,"to":"lock"|"store"|"any",
"direction":D,"params":{...},"seed":N}``, ``{"op":"remove","key":K}`` (its events; a hold's are
returned once everything it held was delivered), ``{"op":"clear"}``, ``{"op":"report"}`` (counters
of connections and bytes per destination role and direction: what ``adapter check`` reads).
Requests in events never carry the run's secret: a line's JSON is cut down to its ``op``, ``id``,
``epoch``, ``lock``, ``sink`` and ``key``; a RESP frame to its command name.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Final

from harness.nodeside import wire

__all__ = [
    "CONTROL_PORT",
    "DIRECTIONS",
    "KINDS",
    "MARK",
    "PORT",
    "Framer",
    "Proxy",
    "main",
    "summarize",
]

PORT: Final = 7100
"""The proxy's port on a worker (loopback only: the REDIRECT lands there)."""
CONTROL_PORT: Final = 7101
"""The proxy's control port on a worker's address."""
MARK: Final = 0x29
"""The firewall mark of the proxy's own connections: the redirect chain lets them pass."""
KINDS: Final = ("hold", "delay", "loss", "reset", "replay")
DIRECTIONS: Final = ("request", "reply")
_SO_ORIGINAL_DST: Final = 80
_SO_MARK: Final = 36
_CHUNK: Final = 65536
_MAX_EVENTS: Final = 2000  # per fault: a long delay window would otherwise grow without bound
_HEAD: Final = ("op", "id", "epoch", "lock", "sink", "key")
_SESSION_COMMANDS: Final = (b"AUTH", b"HELLO", b"SELECT")
_REPLAY_WAIT_S: Final = 2.0


def _now() -> float:
    return time.time()


class Framer:
    """Splits one direction of a connection into requests: ``lines`` (newline-delimited, the
    wire protocol of :mod:`harness.nodeside.wire`) or ``resp`` (Redis's arrays of bulk strings).
    """

    def __init__(self, framing: str) -> None:
        if framing not in ("lines", "resp"):
            raise ValueError(f"unknown framing {framing!r}; 'lines' or 'resp'")
        self.framing = framing
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The requests ``data`` completes, in order (a partial one is kept for the next feed)."""
        self._buffer += data
        frames: list[bytes] = []
        while True:
            end = self._end()
            if end is None:
                return frames
            frames.append(self._buffer[:end])
            self._buffer = self._buffer[end:]

    def _end(self) -> int | None:
        if self.framing == "lines":
            newline = self._buffer.find(b"\n")
            return None if newline < 0 else newline + 1
        return resp_end(self._buffer)


def resp_end(data: bytes) -> int | None:
    """Where the first RESP array of bulk strings in ``data`` ends; ``None`` while incomplete.
    An inline command (no leading ``*``) ends at its line's end."""
    line_end = data.find(b"\r\n")
    if line_end < 0:
        return None
    if not data.startswith(b"*"):
        return line_end + 2
    count = int(data[1:line_end])
    at = line_end + 2
    for _ in range(max(count, 0)):
        header_end = data.find(b"\r\n", at)
        if header_end < 0:
            return None
        if data[at : at + 1] != b"$":
            raise ValueError("a RESP request must be an array of bulk strings")
        length = int(data[at + 1 : header_end])
        at = header_end + 2 + length + 2
        if at > len(data):
            return None
    return at


def resp_command(frame: bytes) -> bytes:
    """The command name of a RESP request, upper-case (``b""`` if there is none)."""
    if frame.startswith(b"*"):
        parts = frame.split(b"\r\n")
        return parts[2].upper() if len(parts) > 2 else b""
    return frame.split(b" ", 1)[0].strip().upper()


def summarize(frame: bytes, framing: str | None) -> dict[str, Any]:
    """What an event may say about a request: never its secret (see the module docstring)."""
    if framing == "resp":
        return {"command": resp_command(frame).decode(errors="replace"), "bytes": len(frame)}
    return _picked(frame, _HEAD)


def _picked(line: bytes, keys: tuple[str, ...]) -> dict[str, Any]:
    """The fields ``keys`` of a JSON object line; its length when it is not one."""
    try:
        message = json.loads(line)
    except ValueError:
        return {"bytes": len(line)}
    if not isinstance(message, dict):
        return {"bytes": len(line)}
    return {key: message[key] for key in keys if key in message}


class _Fault:
    """One fault in force: its kind, what it aims at, its parameters and what it did."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.key = str(message["key"])
        self.kind = str(message["kind"])
        if self.kind not in KINDS:
            raise ValueError(f"unknown proxy fault {self.kind!r}; one of {', '.join(KINDS)}")
        self.to = str(message.get("to", "any"))
        default = "both" if self.kind in ("delay", "loss") else "request"
        self.direction = str(message.get("direction", default))
        self.params: dict[str, Any] = dict(message.get("params", {}))
        self.rng = random.Random(message.get("seed", 0))
        self.added = _now()
        self.released = threading.Event()
        self.events: list[dict[str, Any]] = []
        self.pending = 0  # hold: chunks waiting; replay: replays not yet sent
        self.done = threading.Condition()
        self.count = int(self.params.get("count", 1 << 30))
        self.chunks = 0
        self.delayed_s = 0.0

    def aims_at(self, role: str, direction: str) -> bool:
        """Whether this fault acts on a chunk to ``role`` travelling in ``direction``."""
        return self.to in ("any", role) and self.direction in ("both", direction)

    def chance(self) -> bool:
        """A draw against ``p`` that also spends one of ``count`` (relay threads draw at once)."""
        with self.done:
            if self.count <= 0 or self.rng.random() >= float(self.params.get("p", 1.0)):
                return False
            self.count -= 1
            return True

    def record(self, event: dict[str, Any]) -> None:
        """Keep one event (the first :data:`_MAX_EVENTS` of them)."""
        if len(self.events) < _MAX_EVENTS:
            self.events.append(event)

    def report(self) -> dict[str, Any]:
        """What this fault did, as the control socket answers it."""
        facts: dict[str, Any] = {
            "key": self.key,
            "kind": self.kind,
            "to": self.to,
            "direction": self.direction,
            "added": self.added,
            "events": list(self.events),
        }
        if self.kind == "delay":
            facts["chunks"] = self.chunks
            facts["delayed_s"] = round(self.delayed_s, 6)
        return facts


class _Link:
    """One relayed connection: the client's socket, the upstream one, where it goes."""

    def __init__(self, number: int, client: socket.socket, dest: tuple[str, int], role: str):
        self.number = number
        self.client = client
        self.upstream: socket.socket | None = None
        self.dest = dest
        self.role = role
        self.dead = False  # reset: both sockets closed
        self.dropped = False  # lost: read on, forward nothing
        self._open_ways = len(DIRECTIONS)
        self.framer: Framer | None = None
        self.session: list[bytes] = []  # RESP frames a replay must send first
        self.opening: Framer | None = Framer("resp")  # until the session's opening is read
        self.held: dict[str, list[tuple[_Fault, dict[str, Any]]]] = {way: [] for way in DIRECTIONS}
        self.lock = threading.Lock()

    @property
    def where(self) -> str:
        """The destination as ``host:port``."""
        return f"{self.dest[0]}:{self.dest[1]}"

    def finish(self) -> None:
        """One direction reached its end; close both sockets after the second."""
        with self.lock:
            self._open_ways -= 1
            if self._open_ways > 0 or self.dead:
                return
            self.dead = True
        for sock in (self.client, self.upstream):
            if sock is not None:
                sock.close()

    def reset(self) -> None:
        """Close both sockets with an RST (the other relay thread wakes up on its read)."""
        with self.lock:
            self.dead = True
            for sock in (self.client, self.upstream):
                if sock is None:
                    continue
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    sock.shutdown(socket.SHUT_RD)
                except OSError:
                    pass
                sock.close()


class Proxy:
    """The relay and its faults. ``peers`` maps a destination address to ``(name, role)``;
    ``routes`` maps a listening port to a fixed destination (no iptables); ``framings`` maps a
    destination role to how its requests are framed (``framing``) and which are writes
    (``match``), the system's :class:`systems.base.FramesRequests` answer, for ``replay``."""

    def __init__(
        self,
        peers: dict[str, tuple[str, str]],
        port: int = PORT,
        routes: dict[int, tuple[str, int]] | None = None,
        host: str = "127.0.0.1",
        framings: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.peers = peers
        self.framings = framings or {}
        self._stores = any(role == "store" for _, role in peers.values())
        self._mutex = threading.Lock()
        self._faults: dict[str, _Fault] = {}
        self._links = 0
        self.counters: dict[str, dict[str, int]] = {}
        self._listeners: list[tuple[socket.socket, tuple[str, int] | None]] = []
        listens: dict[int, tuple[str, int] | None] = {port: None} if routes is None else {**routes}
        for listen_port, dest in listens.items():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, listen_port))
            sock.listen(128)
            self._listeners.append((sock, dest))

    @property
    def ports(self) -> list[int]:
        """The ports the proxy listens on."""
        return [int(sock.getsockname()[1]) for sock, _ in self._listeners]

    def start(self) -> None:
        """Accept connections on every listener, in daemon threads."""
        for sock, dest in self._listeners:
            threading.Thread(target=self._accept, args=(sock, dest), daemon=True).start()

    # -- faults --------------------------------------------------------------------------------

    def add(self, message: dict[str, Any]) -> dict[str, Any]:
        """Put a fault in force (replacing one of the same key)."""
        fault = _Fault(message)
        if fault.kind == "replay":
            for role in self.framings if fault.to == "any" else (self._write_path(fault.to),):
                Framer(self._framing(fault, role)[0])  # refuse an unknown framing now
        with self._mutex:
            old = self._faults.pop(fault.key, None)
            self._faults[fault.key] = fault
        if old is not None:
            old.released.set()
        return {"ok": True, "key": fault.key, "at": fault.added}

    def remove(self, key: str, wait_s: float = 10.0) -> dict[str, Any]:
        """Take a fault out of force; its report once what it held was delivered (at most
        ``wait_s``: ``undelivered`` counts what was not by then)."""
        with self._mutex:
            fault = self._faults.pop(key, None)
        if fault is None:
            return {"ok": True, "key": key, "absent": True}
        fault.released.set()
        deadline = time.monotonic() + wait_s
        with fault.done:
            while fault.pending and time.monotonic() < deadline:
                fault.done.wait(deadline - time.monotonic())
            undelivered = fault.pending
        return {"ok": True, "at": _now(), "undelivered": undelivered, **fault.report()}

    def clear(self) -> dict[str, Any]:
        """Take every fault out of force."""
        with self._mutex:
            keys = list(self._faults)
        return {"ok": True, "removed": [self.remove(key, 2.0)["key"] for key in keys]}

    def report(self) -> dict[str, Any]:
        """Counters and the faults in force."""
        with self._mutex:
            faults = [fault.report() for fault in self._faults.values()]
            counters = {role: dict(values) for role, values in self.counters.items()}
        return {"ok": True, "at": _now(), "connections": self._links, "bytes": counters,
                "faults": faults}  # fmt: skip

    def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """One control message's answer."""
        op = message.get("op")
        try:
            if op == "add":
                return self.add(message)
            if op == "remove":
                return self.remove(str(message.get("key")), float(message.get("wait", 10.0)))
            if op == "clear":
                return self.clear()
            if op == "report":
                return self.report()
            if op == "ping":  # readiness
                return {"ok": True}
        except (KeyError, TypeError, ValueError) as problem:
            return {"ok": False, "error": "bad-request", "message": str(problem)}
        return {"ok": False, "error": "bad-request", "message": f"unknown op {op!r}"}

    def _write_path(self, to: str) -> str:
        """The role a fault aimed ``to`` a role reaches: ``store`` is the lock nodes where there
        are no store nodes (see :meth:`_active`)."""
        return "lock" if to == "store" and not self._stores else to

    def _active(self, role: str, direction: str) -> list[_Fault]:
        # A system whose lock service is its store (Redis) has no store nodes: the write path
        # is the connections to its lock nodes.
        roles = {role, "store"} if role == "lock" and not self._stores else {role}
        with self._mutex:
            return [
                fault
                for fault in self._faults.values()
                if any(fault.aims_at(one, direction) for one in roles)
            ]

    # -- relaying ------------------------------------------------------------------------------

    def _accept(self, listener: socket.socket, fixed: tuple[str, int] | None) -> None:
        while True:
            client, _ = listener.accept()
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            dest = fixed or _original_destination(client)
            role = self.peers.get(dest[0], ("", "other"))[1]
            with self._mutex:
                self._links += 1
                link = _Link(self._links, client, dest, role)
            threading.Thread(target=self._open, args=(link,), daemon=True).start()

    def _open(self, link: _Link) -> None:
        for fault in self._active(link.role, "request"):
            mode = fault.params.get("mode")
            if fault.kind == "loss" and mode == "connections" and fault.chance():
                fault.record({"what": "dropped-connection", "conn": link.number,
                              "dest": link.where, "at": _now()})  # fmt: skip
                self._drain(link)
                return
        try:
            upstream = _marked_connection(link.dest)
        except OSError:
            link.client.close()  # as the destination itself would: refused or unreachable
            return
        link.upstream = upstream
        threading.Thread(
            target=self._relay, args=(link, upstream, link.client, "reply"), daemon=True
        ).start()
        self._relay(link, link.client, upstream, "request")

    def _drain(self, link: _Link) -> None:
        """Read and forget what a dropped connection sends, until its client gives up."""
        with link.client:
            while link.client.recv(_CHUNK):
                pass

    def _count(self, role: str, direction: str, size: int) -> None:
        with self._mutex:
            counts = self.counters.setdefault(role, {})
            counts[direction] = counts.get(direction, 0) + size

    def _relay(self, link: _Link, source: socket.socket, sink: socket.socket, way: str) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    if not link.dropped:
                        sink.shutdown(socket.SHUT_WR)
                    break
                self._count(link.role, way, len(data))
                passed = self._through_faults(link, way, data)
                if passed is None:
                    return
                if not link.dropped:
                    sink.sendall(passed)
                    self._after_delivery(link, way, passed)
        except OSError:
            self._settle(link, way, "lost")  # held, but the connection broke before delivery
            if not link.dead:
                link.reset()
            return
        link.finish()

    def _through_faults(self, link: _Link, way: str, data: bytes) -> bytes | None:
        """``data`` after the faults in force: what is left to send; ``None`` once the
        connection was reset."""
        for fault in self._active(link.role, way):
            if fault.kind == "hold":
                self._hold(fault, link, way, data)
            elif fault.kind == "delay":
                wait = float(fault.params.get("latency_s", 0.0))
                wait += fault.rng.uniform(0.0, float(fault.params.get("jitter_s", 0.0)))
                fault.chunks += 1
                fault.delayed_s += wait
                time.sleep(wait)
            elif fault.kind == "loss" and fault.params.get("mode", "segments") == "segments":
                if fault.chance():
                    fault.record({"what": "dropped", "conn": link.number, "dest": link.where,
                                  "direction": way, "bytes": len(data), "at": _now()})  # fmt: skip
                    link.dropped = True
                    return data
            elif fault.kind == "reset" and fault.chance():
                half = data[: len(data) // 2]
                target = link.upstream if way == "request" else link.client
                if half and target is not None:
                    target.sendall(half)
                fault.record({"what": "reset", "conn": link.number, "dest": link.where,
                              "direction": way, "sent": len(half), "of": len(data),
                              "at": _now()})  # fmt: skip
                link.reset()
                return None
        return data

    def _hold(self, fault: _Fault, link: _Link, way: str, data: bytes) -> None:
        event: dict[str, Any] = {"what": "held", "conn": link.number, "dest": link.where,
                                 "to": link.role, "bytes": len(data), "from": _now()}  # fmt: skip
        requests = [summarize(line, None) for line in data.split(b"\n") if line.strip()]
        if requests and all(len(r) > 1 or "bytes" not in r for r in requests):
            event["requests"] = requests
        with fault.done:
            fault.pending += 1
        fault.record(event)
        fault.released.wait(float(fault.params.get("max_s", 120.0)))
        event["released"] = _now()
        # The relay confirms the delivery (event["delivered"]) once the chunk is written.
        link.held[way].append((fault, event))

    def _settle(self, link: _Link, way: str, outcome: str) -> None:
        """Stamp the chunks held on ``link`` with ``outcome`` (``delivered`` or ``lost``) and the
        time, and count them off their faults."""
        held, link.held[way] = link.held[way], []
        for fault, event in held:
            event[outcome] = _now()
            with fault.done:
                fault.pending -= 1
                fault.done.notify_all()

    def _after_delivery(self, link: _Link, way: str, data: bytes) -> None:
        self._settle(link, way, "delivered")
        if way != "request":
            return
        if link.opening is not None:
            self._keep_session(link, data)
        for fault in self._active(link.role, way):
            if fault.kind == "replay":
                self._replay_frames(fault, link, data)

    def _keep_session(self, link: _Link, data: bytes) -> None:
        """Keep a RESP connection's opening commands (``AUTH``, ``HELLO``, ``SELECT``), which a
        replay on a connection of its own must send first, whenever the connection opened:
        read only until its first other command, so it costs nothing after."""
        if self.framings.get(link.role, {}).get("framing") != "resp":
            link.opening = None
            return
        assert link.opening is not None
        for frame in link.opening.feed(data):
            if resp_command(frame) not in _SESSION_COMMANDS:
                link.opening = None
                return
            link.session.append(frame)

    def _framing(self, fault: _Fault, role: str) -> tuple[str, bytes]:
        """How requests to ``role`` are framed, and what marks a write (the fault's parameters
        first, then the system's ``framings``)."""
        spec = {**self.framings.get(role, {}), **fault.params}
        return str(spec.get("framing", "")), str(spec.get("match", "")).encode()

    def _replay_frames(self, fault: _Fault, link: _Link, data: bytes) -> None:
        framing, match = self._framing(fault, link.role)
        if link.framer is None:
            link.framer = Framer(framing)
        for frame in link.framer.feed(data):
            if framing == "resp" and resp_command(frame) in _SESSION_COMMANDS:
                continue  # kept by _keep_session
            if match in frame and fault.chance():
                with fault.done:
                    fault.pending += 1
                threading.Thread(
                    target=self._send_again,
                    args=(fault, link, [*link.session, frame], frame, _now()),
                    daemon=True,
                ).start()

    def _send_again(
        self, fault: _Fault, link: _Link, frames: list[bytes], frame: bytes, delivered: float
    ) -> None:
        framing = self._framing(fault, link.role)[0]
        time.sleep(float(fault.params.get("after_s", 0.5)))
        event: dict[str, Any] = {"what": "replayed", "conn": link.number, "dest": link.where,
                                 "to": link.role, "request": summarize(frame, framing),
                                 "delivered": delivered, "replayed": _now()}  # fmt: skip
        try:
            with _marked_connection(link.dest) as sock:
                sock.sendall(b"".join(frames))
                sock.settimeout(_REPLAY_WAIT_S)
                reply = _read_reply(sock, framing, len(frames))
            event["reply"] = _reply_summary(reply, framing)
        except OSError as problem:
            event["reply"] = {"error": str(problem)}
        fault.record(event)
        with fault.done:
            fault.pending -= 1
            fault.done.notify_all()


def _read_reply(sock: socket.socket, framing: str, answers: int) -> bytes:
    """The bytes of the last of ``answers`` replies (what the replayed request got)."""
    data = b""
    while True:
        lines = data.split(b"\r\n" if framing == "resp" else b"\n")
        if len(lines) > answers:
            return lines[answers - 1]
        try:
            more = sock.recv(_CHUNK)
        except TimeoutError:
            return data
        if not more:
            return data
        data += more


def _reply_summary(reply: bytes, framing: str) -> dict[str, Any]:
    if framing == "resp":
        return {"resp": reply[:80].decode(errors="replace")}
    return _picked(reply, ("ok", "error", "seq", "mark"))


def _original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, _SO_ORIGINAL_DST, 16)
    port, address = struct.unpack("!2xH4s8x", raw)
    return socket.inet_ntoa(address), int(port)


def _marked_connection(dest: tuple[str, int]) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Without CAP_NET_ADMIN (tests, the bench) there is no redirect to escape from either.
    with contextlib.suppress(PermissionError):
        sock.setsockopt(socket.SOL_SOCKET, _SO_MARK, MARK)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(10.0)
    try:
        sock.connect(dest)
    except OSError:
        sock.close()
        raise
    sock.settimeout(None)
    return sock


def _routes(values: list[str]) -> dict[int, tuple[str, int]]:
    routes: dict[int, tuple[str, int]] = {}
    for value in values:
        port, _, dest = value.partition("=")
        host, _, dest_port = dest.rpartition(":")
        routes[int(port)] = (host, int(dest_port))
    return routes


def _peers(text: str) -> Iterator[tuple[str, tuple[str, str]]]:
    for address, (name, role) in json.loads(text).items():
        yield str(address), (str(name), str(role))


def main(argv: list[str] | None = None) -> int:
    """Serve the proxy and its control port until killed."""
    parser = argparse.ArgumentParser(description="fencecheck's write-path proxy")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--peers", default="{}", help='{"ADDRESS": ["NAME", "ROLE"], ...}')
    parser.add_argument("--route", action="append", default=[], help="PORT=HOST:PORT")
    parser.add_argument("--control-host", default="127.0.0.1", help="the worker's address")
    parser.add_argument("--control-port", type=int, default=CONTROL_PORT)
    parser.add_argument("--secret-file", help="the run's secret, required of control requests")
    parser.add_argument(
        "--framings", default="{}", help='{"ROLE": {"framing": "lines", "match": "..."}}'
    )
    args = parser.parse_args(argv)
    framings = json.loads(args.framings)
    proxy = Proxy(
        dict(_peers(args.peers)), args.port, _routes(args.route) or None, framings=framings
    )
    proxy.start()
    banner = f"proxy relaying on {proxy.ports}, peers {sorted(proxy.peers)}; control"
    wire.serve(args.control_host, args.control_port, proxy.answer, banner, args.secret_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
