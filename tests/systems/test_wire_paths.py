"""The wire's cheaper paths keep their promises: log lines carry wall-clock and monotonic stamps
also when the second turns between two lines (its text is formatted once a second), and a
request's timeout applies though the socket's is set only when it changes."""

from __future__ import annotations

import io
import re
import threading
import time
from typing import Any

import pytest

from harness.nodeside import wire

_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6})Z (\d+) (.*)$")


def test_each_line_carries_the_wall_clock_to_the_microsecond_across_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = io.StringIO()
    monkeypatch.setattr(wire.sys, "stdout", out)
    # Binary fractions, so that no rounding of the float clock blurs the microseconds.
    clock = iter([1_700_000_000.25, 1_700_000_000.75, 1_700_000_001.0, 1_700_000_001.5])
    monkeypatch.setattr(wire.time, "time", lambda: next(clock))
    for word in ("a", "b", "c", "d"):
        wire.log(word)
    lines = [_LINE.match(line) for line in out.getvalue().splitlines()]
    assert all(lines)
    stamps = [m.group(1) for m in lines if m]
    assert stamps == [
        "2023-11-14T22:13:20.250000",
        "2023-11-14T22:13:20.750000",
        "2023-11-14T22:13:21.000000",
        "2023-11-14T22:13:21.500000",
    ]
    assert [m.group(3) for m in lines if m] == ["a", "b", "c", "d"]
    monotonic = [int(m.group(2)) for m in lines if m]
    assert monotonic == sorted(monotonic) and monotonic[-1] <= time.monotonic_ns()


def test_a_requests_own_timeout_applies_after_others_with_other_timeouts() -> None:
    """The socket's timeout is set only when it changes: each request still gets its own."""
    release = threading.Event()

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        if request.get("op") == "slow":
            release.wait(5)
        return {"ok": True}

    server = wire.LineServer(("127.0.0.1", 0), handle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = ("127.0.0.1", server.server_address[1])
        with wire.Connection(address, 2.0) as connection:
            assert connection.request({"op": "quick"}, 5.0) == {"ok": True}
            assert connection.request({"op": "quick"}, 5.0) == {"ok": True}
            with pytest.raises(TimeoutError):
                connection.request({"op": "slow"}, 0.2)
        with wire.Connection(address, 2.0) as connection:
            assert connection.request({"op": "quick"}) == {"ok": True}  # the connect timeout
            with pytest.raises(TimeoutError):
                connection.request({"op": "slow"}, 0.2)
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_a_connection_closed_while_it_waits_fails_as_an_unknown_outcome() -> None:
    """Teardown may close a holder's connection from another thread while its request is under
    way: the request then fails at once as every unknown outcome does (an OSError naming the
    close, not the server), never as a ValueError that escapes the holder thread as a
    traceback, and never only when its own timeout runs out."""
    release = threading.Event()
    server = wire.LineServer(("127.0.0.1", 0), lambda request: {"ok": release.wait(10)})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    failures: list[BaseException] = []

    def ask() -> None:
        try:
            connection.request({"op": "slow"}, 30.0)
        except BaseException as problem:
            failures.append(problem)

    try:
        connection = wire.Connection(("127.0.0.1", server.server_address[1]), 2.0)
        waiting = threading.Thread(target=ask)
        waiting.start()
        time.sleep(0.2)
        connection.close()
        waiting.join(5)
        assert not waiting.is_alive()
        (failure,) = failures
        assert isinstance(failure, ConnectionAbortedError)
        assert "closed while waiting" in str(failure)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
