"""``fencecheck serve`` serves the store only, and only to pages on its own origin."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli.report import make_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A server of a small store (a run, ``latest``, links out of the store); silent
    connections are closed after 0.5 s."""
    store = tmp_path / "store"
    run = store / "t" / "20240501T120000.000000Z"
    run.mkdir(parents=True)
    (run / "report.html").write_text("<p>the report</p>")
    (store / "latest").symlink_to(run.relative_to(store))
    secret = tmp_path / "secret.txt"
    secret.write_text("private key material")
    (store / "leak").symlink_to(secret)
    (store / "leakdir").symlink_to(tmp_path)
    server = make_server(store, 0, idle_timeout=0.5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_port, store
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Host": host} if host is not None else {}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_reports_and_the_latest_link_inside_the_store_are_served(
    served: tuple[int, Path],
) -> None:
    port, _ = served
    for path in ("/t/20240501T120000.000000Z/report.html", "/latest/report.html"):
        status, body = _get(port, path)
        assert (status, body) == (200, b"<p>the report</p>")
    assert _get(port, "/latest/report.html", f"localhost:{port}")[0] == 200


@pytest.mark.parametrize("path", ["/leak", "/leakdir/secret.txt", "/leakdir/"])
def test_symlinks_out_of_the_store_are_not_followed(served: tuple[int, Path], path: str) -> None:
    port, _ = served
    status, body = _get(port, path)
    assert status == 404
    assert b"private key material" not in body
    assert b"secret.txt" not in body


@pytest.mark.parametrize(
    "host", ["evil.example:{port}", "evil.example", "127.0.0.1:1", "localhost.evil.example:{port}"]
)
def test_a_foreign_host_header_is_refused(served: tuple[int, Path], host: str) -> None:
    port, _ = served
    status, body = _get(port, "/latest/report.html", host.format(port=port))
    assert status == 403
    assert b"the report" not in body


@pytest.mark.parametrize("path", ["/", "/t/", "/t/20240501T120000.000000Z/", "/latest/"])
def test_folders_are_not_listed(served: tuple[int, Path], path: str) -> None:
    port, store = served
    status, body = _get(port, path)
    assert status == 404, body
    assert b"report.html" not in body and b"20240501T120000" not in body
    (store / "index.html").write_text("<p>the index</p>")
    assert _get(port, "/") == (200, b"<p>the index</p>")  # the store's own index is served


@pytest.mark.parametrize("path", ["/%00", "/t/%00/report.html", "/%ff%fe", "/" + "a" * 5000])
def test_odd_paths_are_a_4xx_without_a_traceback(
    served: tuple[int, Path], path: str, capfd: pytest.CaptureFixture[str]
) -> None:
    port, _ = served
    status, _body = _get(port, path)
    assert 400 <= status < 500
    assert "Traceback" not in capfd.readouterr().err


def test_silent_connections_are_closed_and_do_not_pile_up(served: tuple[int, Path]) -> None:
    port, _ = served
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
    try:
        for sock in silent:
            sock.settimeout(10)
            assert sock.recv(1) == b""  # closed by the server (more than the limit: at once)
        assert _get(port, "/latest/report.html")[0] == 200
    finally:
        for sock in silent:
            sock.close()
