"""The wire protocol refuses requests without the run's secret and never logs the secret."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.nodeside import wire

SECRET = "s3cret-of-this-run"


@pytest.fixture
def server() -> Iterator[tuple[tuple[str, int], list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"ok": True, "epoch": 999999}

    line_server = wire.LineServer(("127.0.0.1", 0), handle, token=SECRET)
    thread = threading.Thread(target=line_server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = line_server.server_address[:2]
        yield (str(host), int(port)), seen
    finally:
        line_server.shutdown()
        line_server.server_close()
        thread.join()


def test_a_forged_request_without_or_with_a_wrong_secret_is_refused(
    server: tuple[tuple[str, int], list[dict[str, Any]]],
) -> None:
    address, seen = server
    forged = {"op": "write", "lock": "L0", "sink": "store", "key": "k", "id": "x", "epoch": 999999}
    for token in (None, "guess", ""):
        reply = wire.call(address, forged, 30.0, token)
        assert reply["ok"] is False
        assert reply["error"] == wire.UNAUTHORIZED
    assert seen == []  # the handler never saw a forged request


def test_the_runs_own_requests_pass_and_the_secret_does_not_reach_the_handler(
    server: tuple[tuple[str, int], list[dict[str, Any]]],
) -> None:
    address, seen = server
    assert wire.call(address, {"op": "read", "key": "k"}, 30.0, SECRET)["ok"] is True
    pool = wire.Pool(address, 30.0, SECRET)
    assert pool.call({"op": "read", "key": "k2"})["ok"] is True
    assert seen == [{"op": "read", "key": "k"}, {"op": "read", "key": "k2"}]


def test_ping_stays_open_for_readiness_probes(
    server: tuple[tuple[str, int], list[dict[str, Any]]],
) -> None:
    address, _ = server
    assert wire.call(address, {"op": "ping"}, 30.0)["ok"] is True


def test_the_secret_is_never_logged(
    server: tuple[tuple[str, int], list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    address, _ = server
    wire.call(address, {"op": "read", "key": "k"}, 30.0, SECRET)
    wire.call(address, {"op": "read", "key": "k"}, 30.0, "wrong-guess")
    logged = capsys.readouterr().out
    assert '"op":"read"' in logged
    assert SECRET not in logged
    assert "wrong-guess" not in logged


def test_the_command_line_names_the_secret_file_never_the_secret(tmp_path: Path) -> None:
    secret = tmp_path / "run-secret"
    secret.write_text(SECRET + "\n")
    assert wire.use_secret(None) is None
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        wire.use_secret(str(empty))
    parser = wire.with_listen_options("test")
    args = parser.parse_args(["--port", "1", "--secret-file", str(secret)])
    assert args.secret_file == str(secret)
    assert json.dumps(vars(args)).count(SECRET) == 0  # argv names the file, never the secret
