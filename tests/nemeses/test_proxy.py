"""The write-path proxy on loopback (no iptables): relaying, each fault, framing, its report."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from harness.nodeside.proxy import Framer, Proxy, _Link, resp_command, resp_end, summarize
from nemeses.kinds import END_AFTER_WRITES, Draw
from nemeses.proxy import (
    CHAIN,
    DELAY_KIND,
    HOLD_KIND,
    REPLAY_KIND,
    RESET_KIND,
    redirect_script,
    removal_script,
)
from nemeses.proxy import said_by_proxy as proxy_sentence


class LineEcho:
    """A server that answers every line with ``{"ok":true,"n":N,"got":LINE}`` and counts them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.lines: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as stream, contextlib.suppress(ConnectionResetError):
            for line in stream:  # a reset test ends its connection with an RST
                self.lines.append(line)
                stream.write(json.dumps({"ok": True, "n": len(self.lines)}).encode() + b"\n")
                stream.flush()


@pytest.fixture
def relay() -> Iterator[tuple[Proxy, LineEcho, int]]:
    server = LineEcho()
    proxy = Proxy({"127.0.0.1": ("s1", "store")}, routes={0: ("127.0.0.1", server.port)})
    proxy.start()
    yield proxy, server, proxy.ports[0]


def ask(port: int, lines: list[bytes], timeout: float = 5.0) -> list[bytes]:
    """Send ``lines`` on one connection, one at a time; the replies."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        stream = sock.makefile("rwb")
        replies = []
        for line in lines:
            stream.write(line)
            stream.flush()
            replies.append(stream.readline())
        return replies


WRITE = b'{"op":"write","id":"w2-31","epoch":4,"auth":"SECRET","lock":"L"}\n'


def test_relays_both_ways_and_counts(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, _server, port = relay
    replies = ask(port, [b'{"op":"ping"}\n', WRITE])
    assert [json.loads(r)["n"] for r in replies] == [1, 2]
    report = proxy.report()
    assert report["connections"] == 1
    assert report["bytes"]["store"]["request"] == len(b'{"op":"ping"}\n') + len(WRITE)
    assert report["bytes"]["store"]["reply"] > 0


def test_hold_keeps_a_request_until_removed_then_delivers_in_order(
    relay: tuple[Proxy, LineEcho, int],
) -> None:
    proxy, server, port = relay
    proxy.add({"key": "h", "kind": "hold", "to": "store"})
    answers: list[list[bytes]] = []
    sender = threading.Thread(target=lambda: answers.append(ask(port, [WRITE, b"{}\n"])))
    sender.start()
    time.sleep(0.4)
    assert server.lines == []  # nothing got through while held
    report = proxy.remove("h")
    sender.join(5)
    assert [json.loads(line)["id"] for line in server.lines[:1]] == ["w2-31"]
    assert len(answers[0]) == 2
    (held,) = report["events"]
    assert held["what"] == "held"
    assert held["requests"] == [{"op": "write", "id": "w2-31", "epoch": 4, "lock": "L"}]
    assert held["delivered"] - held["from"] >= 0.35
    assert "SECRET" not in json.dumps(report)
    assert report["undelivered"] == 0


def test_hold_aims_at_its_destination_role_only(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, _server, port = relay
    proxy.add({"key": "h", "kind": "hold", "to": "lock"})
    assert len(ask(port, [WRITE], timeout=2.0)) == 1
    assert proxy.remove("h")["events"] == []


def test_delay_adds_latency_per_chunk(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, _, port = relay
    proxy.add({"key": "d", "kind": "delay", "direction": "reply", "params": {"latency_s": 0.2}})
    began = time.monotonic()
    ask(port, [WRITE, WRITE])
    assert time.monotonic() - began >= 0.4
    report = proxy.remove("d")
    assert report["chunks"] == 2 and report["delayed_s"] == pytest.approx(0.4)


def test_reset_cuts_a_request_in_the_middle(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, server, port = relay
    proxy.add({"key": "r", "kind": "reset", "params": {"count": 1}})
    with pytest.raises((ConnectionResetError, ConnectionAbortedError)):
        reply = ask(port, [WRITE])
        if reply == [b""]:  # an RST that lands after our read started reads as EOF on some
            raise ConnectionResetError  # kernels; either way no answer came
    time.sleep(0.2)
    assert server.lines == []  # half a line never makes a request
    (event,) = proxy.remove("r")["events"]
    assert event["what"] == "reset" and event["sent"] == len(WRITE) // 2
    assert len(ask(port, [WRITE])) == 1  # count spent: the next connection passes


def test_loss_of_connections_leaves_the_client_unanswered(
    relay: tuple[Proxy, LineEcho, int],
) -> None:
    proxy, server, port = relay
    proxy.add({"key": "l", "kind": "loss", "params": {"mode": "connections", "p": 1.0}})
    with pytest.raises(TimeoutError):
        ask(port, [WRITE], timeout=0.5)
    assert server.lines == []
    (event,) = proxy.remove("l")["events"]
    assert event["what"] == "dropped-connection"


def test_loss_of_a_segment_silences_its_connection(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, server, port = relay
    proxy.add({"key": "l", "kind": "loss", "direction": "reply", "params": {"p": 1.0}})
    with pytest.raises(TimeoutError):
        ask(port, [WRITE], timeout=0.5)
    assert len(server.lines) == 1  # the request arrived; its reply was lost
    (event,) = proxy.remove("l")["events"]
    assert event["what"] == "dropped" and event["direction"] == "reply"


def test_replay_sends_a_delivered_request_again(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, server, port = relay
    proxy.add(
        {
            "key": "p",
            "kind": "replay",
            "params": {"framing": "lines", "match": '"op":"write"', "after_s": 0.1, "count": 1},
        }
    )
    ask(port, [b'{"op":"ping"}\n', WRITE, WRITE])
    report = proxy.remove("p")
    assert server.lines.count(WRITE) == 3  # two sent, the first replayed once
    (event,) = report["events"]
    assert event["request"]["id"] == "w2-31"
    assert event["reply"] == {"ok": True}
    assert event["replayed"] - event["delivered"] >= 0.1


def test_replay_refuses_an_unknown_framing(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, _, _ = relay
    answer = proxy.answer({"op": "add", "key": "p", "kind": "replay", "to": "store"})
    assert answer["ok"] is False and "framing" in answer["message"]


def test_control_refuses_an_unknown_kind(relay: tuple[Proxy, LineEcho, int]) -> None:
    proxy, _, _ = relay
    answer = proxy.answer({"op": "add", "key": "x", "kind": "netem"})
    assert answer["ok"] is False and "hold" in answer["message"]


def test_resp_framing_splits_pipelined_commands() -> None:
    auth = b"*2\r\n$4\r\nAUTH\r\n$3\r\npwd\r\n"
    evalsha = b"*4\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n1\r\n$5\r\nk\r\nxy\r\n"
    framer = Framer("resp")
    assert framer.feed(auth + evalsha[:10]) == [auth]
    assert framer.feed(evalsha[10:]) == [evalsha]
    assert resp_end(b"PING\r\n") == 6
    assert resp_command(evalsha) == b"EVALSHA"
    assert summarize(auth, "resp") == {"command": "AUTH", "bytes": len(auth)}


def test_the_redirect_lets_the_proxys_own_connections_pass() -> None:
    script = redirect_script({"10.0.0.3": "l1"}).decode()
    lines = script.splitlines()
    assert lines[:2] == ["*nat", f":{CHAIN} - [0:0]"]
    mark = lines.index(f"-A {CHAIN} -m mark --mark 0x29 -j RETURN")
    redirect = lines.index(f"-A {CHAIN} -p tcp -d 10.0.0.3/32 -j REDIRECT --to-ports 7100")
    assert mark < redirect  # the proxy's marked connection must not loop back to itself
    assert f"-X {CHAIN}" in removal_script().decode()


def test_a_stop_names_each_held_write_and_counts_the_rest() -> None:
    report = {
        "kind": "hold",
        "events": [
            {
                "what": "held",
                "from": 10.0,
                "delivered": 13.1,
                "requests": [{"op": "write", "id": "w2-31", "epoch": 4}],
            },
            {"what": "held", "from": 10.2, "delivered": 13.1, "requests": [{"op": "renew"}]},
        ],
    }
    assert proxy_sentence("w2", report) == (
        "w2's write w2-31 (epoch 4) was held 3.10 s; w2's proxy held 2 chunks"
    )


def test_the_schedules_draw_the_lease_aware_shapes() -> None:
    roles = {"l1": "lock", "s1": "store", "w1": "worker"}
    draw = Draw(random.Random(3), "holder", "worker", roles, {}, 0.02, 3 * 10**9, 10**9)
    targets, hold = HOLD_KIND.draw(draw)
    assert targets == ("holder",)
    # Everything waits (the keepalives too), until the next holder's first accepted write.
    assert hold["to"] == "any" and hold[END_AFTER_WRITES] == 1 and HOLD_KIND.outlives_lease
    for _ in range(20):
        _, delay = DELAY_KIND.draw(draw)
        assert delay["to"] in ("lock", "any")  # keepalives only, or everything
        assert delay["latency_s"] in (0.2, 0.5, 1.2)
        _, reset = RESET_KIND.draw(draw)
        assert reset["to"] == "store" and reset["direction"] in ("request", "reply")
        _, replay = REPLAY_KIND.draw(draw)
        assert replay["to"] == "store" and replay["after_s"] in (0.1, 0.5, 1.1)


def test_replay_to_the_store_of_a_system_whose_lock_nodes_are_its_store() -> None:
    # Redis: no store nodes; the framing is the lock role's, and "store" means the lock nodes.
    framings = {"lock": {"framing": "resp", "match": "EVALSHA"}}
    proxy = Proxy({"127.0.0.1": ("r1", "lock")}, routes={0: ("127.0.0.1", 9)}, framings=framings)
    assert proxy.answer({"op": "add", "key": "p", "kind": "replay", "to": "store"})["ok"]
    assert proxy._active("lock", "request")[0].key == "p"


def test_a_resp_connections_opening_is_kept_for_a_replay_added_later() -> None:
    framings = {"lock": {"framing": "resp", "match": "EVALSHA"}}
    proxy = Proxy({"127.0.0.1": ("r1", "lock")}, routes={0: ("127.0.0.1", 9)}, framings=framings)
    link = _Link(1, socket.socket(), ("127.0.0.1", 9), "lock")
    auth = b"*2\r\n$4\r\nAUTH\r\n$3\r\npwd\r\n"
    proxy._after_delivery(link, "request", auth)  # before any replay fault
    proxy._after_delivery(link, "request", b"*1\r\n$4\r\nPING\r\n")
    proxy._after_delivery(link, "request", b"*2\r\n$4\r\nAUTH\r\n$1\r\nx\r\n")
    assert link.session == [auth] and link.opening is None  # read only up to PING
    link.client.close()
