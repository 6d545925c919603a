"""The controller's link to an agent: answers, unknown outcomes, reconnection, unreachability."""

from __future__ import annotations

import signal
import socketserver
import threading
from collections.abc import Iterator

import pytest

from harness.run.agent_link import AgentLink, AgentUnreachable
from tests.support.localcluster import MakeCluster, free_ports, wait_until


def test_a_timed_out_request_is_unknown_and_may_still_complete(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(lease_ttl=30.0)
    endpoint = cluster.agents.endpoints["w1"]
    link = AgentLink(endpoint.host, endpoint.port, token=cluster.agents.token)
    pong = link.call({"op": "ping"}, 30.0)
    assert pong is not None and pong["node"] == "w1"
    cluster.signal("w1", signal.SIGSTOP)
    try:
        # The agent is stopped: no answer can come, whatever the timeout.
        assert link.call({"op": "acquire", "lock": "L", "wait": 0}, 0.2) is None
    finally:
        cluster.signal("w1", signal.SIGCONT)

    def granted() -> bool:
        reply = link.call({"op": "holds"}, 30.0)
        return reply is not None and "L" in reply["holds"]

    # On a new connection: the abandoned acquire was carried out by the agent all the same.
    wait_until(granted, "the abandoned acquire to be granted")
    link.close()


def test_nothing_listening_is_unreachable() -> None:
    (port,) = free_ports(1)
    with pytest.raises(AgentUnreachable, match=f"127.0.0.1:{port}"):
        AgentLink("127.0.0.1", port).call({"op": "ping"}, 5.0)


class _Garbler(socketserver.ThreadingTCPServer):
    """A test double of a broken agent: answers every line with something that is not JSON."""

    daemon_threads = True

    def __init__(self) -> None:
        self.connections = 0
        super().__init__(("127.0.0.1", 0), _GarbleHandler)


class _GarbleHandler(socketserver.StreamRequestHandler):
    server: _Garbler

    def handle(self) -> None:
        self.server.connections += 1
        for _ in self.rfile:
            self.wfile.write(b"garbage\n")


@pytest.fixture
def garbler() -> Iterator[_Garbler]:
    server = _Garbler()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_reply_that_is_not_json_is_unknown_and_drops_the_connection(garbler: _Garbler) -> None:
    host, port = garbler.server_address[:2]
    link = AgentLink(str(host), int(port))
    assert link.call({"op": "ping"}, 30.0) is None
    assert link.call({"op": "ping"}, 30.0) is None
    link.close()
    assert garbler.connections == 2  # the second call did not reuse the first's connection


def test_closing_a_link_while_a_holder_waits_on_it_is_an_unknown_outcome_never_a_crash() -> None:
    """The teardown closes links from the main thread while holders left behind (a second
    signal, a join that timed out) wait on them: each such call ends ``None``, never with an
    exception in the holder's thread (a flaky traceback in the signal matrix's healing cells)."""
    asked = threading.Semaphore(0)

    class Silent(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            while self.rfile.readline():
                asked.release()  # and never answer: a frozen server

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    crashes: list[BaseException] = []
    try:
        for _ in range(50):
            link = AgentLink("127.0.0.1", server.server_address[1])
            outcome: list[object] = []

            def call(link: AgentLink = link, outcome: list[object] = outcome) -> None:
                try:
                    outcome.append(link.call({"op": "ping"}, 30.0))
                except BaseException as problem:  # what the holder's thread would die of
                    crashes.append(problem)

            holder = threading.Thread(target=call)
            holder.start()
            assert asked.acquire(timeout=10)
            link.close()
            holder.join(10)
            assert not holder.is_alive()
            assert crashes or outcome == [None]
    finally:
        server.shutdown()
        server.server_close()
    assert crashes == []
