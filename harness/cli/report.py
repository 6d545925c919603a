"""``fencecheck report`` writes the HTML report of a run; ``fencecheck serve`` browses the store."""

from __future__ import annotations

import functools
import os
import sys
import threading
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import click

from harness.cli import cli
from harness.report import write_report
from harness.report.index import write_index
from harness.run.store import DEFAULT_STORE, find_runs, open_run_dir
from harness.run.summary import RunSummary, summarize

__all__ = ["IDLE_TIMEOUT_S", "LOOPBACK", "make_server", "report", "serve"]

LOOPBACK: Final = "127.0.0.1"
IDLE_TIMEOUT_S: Final = 10.0
"""Seconds a connection to ``serve`` may stay silent (half-open, or a slow sender) before it is
closed."""


@cli.command()
@click.argument(
    "store_dir", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_STORE / "latest"
)
def report(store_dir: Path) -> None:
    """Write report.html for a run (STORE_DIR such as store/latest), or for every run in a store.

    Given a store (a folder of <test>/<timestamp>/ runs) it rewrites every run's report and the
    store's index.html. Exit 0 when written, 3 when STORE_DIR is neither, or when a run's record
    or history cannot be read (each such run is named; the others are still written).
    """
    if not store_dir.exists():
        raise click.ClickException(
            f"{store_dir} does not exist; pass a run directory such as store/latest or "
            "store/<test>/<timestamp>, or a store such as store"
        )
    if (store_dir / "history.jsonl").exists():
        summary = _readable_run(store_dir)
        click.echo(write_report(summary.run, summary))
        return
    runs = find_runs(store_dir)
    if not runs:
        raise click.ClickException(
            f"{store_dir} is neither a run directory (no history.jsonl) nor a store with runs; "
            "pass store/latest, store/<test>/<timestamp> or store"
        )
    unreadable = 0
    written: list[RunSummary] = []
    for run in runs:
        try:
            summary = _readable_run(run.path)
            click.echo(write_report(summary.run, summary))
        except click.ClickException as problem:
            problem.show()
            unreadable += 1
        else:
            written.append(summary)
    click.echo(write_index(store_dir, fresh=written))
    if unreadable:
        raise click.ClickException(f"{unreadable} of {len(runs)} runs could not be read (above)")


def _readable_run(path: Path) -> RunSummary:
    """The summary of the run at ``path`` (its files read once) once its record and the start
    of its history read as a run's; else a :class:`click.ClickException` naming the file and
    the fix."""
    try:
        run = open_run_dir(path)
        return summarize(run, run.read_record())
    except (OSError, ValueError) as problem:
        raise click.ClickException(str(problem)) from None


class _StoreHandler(SimpleHTTPRequestHandler):
    """Serves the store's files; never cached, since reports and the index are rewritten.

    Guards a plain file server lacks: a path whose real location (symlinks followed) is outside
    the store is not found, so a link planted in the store cannot serve ``/etc`` or ``~/.ssh``; a
    request whose ``Host`` is not this loopback server is refused, so a web page that rebinds its
    own DNS name to 127.0.0.1 cannot read the store (DNS rebinding); a folder is never listed
    (the index and the reports link every file a person needs), and a path no file can have
    (``/%00``) is a 400, not a traceback. ``store/latest`` is a symlink inside the store and keeps
    working. A connection that sends nothing for the server's ``idle_timeout`` is closed.
    """

    def setup(self) -> None:
        """Bound every wait on the connection."""
        super().setup()
        self.connection.settimeout(getattr(self.server, "idle_timeout", IDLE_TIMEOUT_S))

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def send_head(self) -> Any:
        """The usual response head, after the Host and containment checks."""
        if not self._host_allowed():
            self.send_error(HTTPStatus.FORBIDDEN, "unexpected Host header (DNS rebinding?)")
            return None
        try:
            root = Path(self.directory).resolve()
            if not Path(self.translate_path(self.path)).resolve().is_relative_to(root):
                self.send_error(HTTPStatus.NOT_FOUND, "outside the store")
                return None
            return super().send_head()
        except ValueError:  # a NUL byte or an undecodable name: no file is called that
            self.send_error(HTTPStatus.BAD_REQUEST, "no file can have this path")
            return None

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        """Folders are not listed: the store's index.html and the reports link what there is."""
        self.send_error(HTTPStatus.NOT_FOUND, "folders are not listed: start at /index.html")

    def _host_allowed(self) -> bool:
        host = self.headers.get("Host", "")
        name, colon, port = host.rpartition(":")
        if not colon:
            name, port = host, ""
        served = str(getattr(self.server, "server_port", ""))
        return name.lower() in _LOCAL_NAMES and port in ("", served)


_LOCAL_NAMES: Final = frozenset((LOOPBACK, "localhost"))


class _StoreServer(ThreadingHTTPServer):
    """A thread per connection, at most :attr:`max_connections` at once (more are closed at once:
    hundreds of half-open connections must not pile up threads), and one line on standard error,
    not a traceback, for a request that failed."""

    max_connections = 64
    request_queue_size = 128  # connections beyond the limit are closed, not left unaccepted

    def __init__(self, address: tuple[str, int], handler: Any, idle_timeout: float) -> None:
        super().__init__(address, handler)
        self.idle_timeout = idle_timeout
        self._slots = threading.BoundedSemaphore(self.max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve ``request`` in its own thread if a slot is free, else close it."""
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve, then free the connection's slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line naming the client and the error (a dropped connection, most often)."""
        problem = sys.exception()
        click.echo(f"serve: a request from {client_address[0]} failed: {problem!r}", err=True)


def make_server(
    root: Path, port: int, *, idle_timeout: float = IDLE_TIMEOUT_S
) -> ThreadingHTTPServer:
    """An HTTP server for ``root`` bound to the loopback address only (``port`` 0: any free);
    a connection silent for ``idle_timeout`` seconds is closed."""
    handler: Any = functools.partial(_StoreHandler, directory=str(root))
    return _StoreServer((LOOPBACK, port), handler, idle_timeout)


@cli.command()
@click.option(
    "--store",
    "store_root",
    type=click.Path(path_type=Path, file_okay=False),
    default=DEFAULT_STORE,
    show_default=True,
    help="The store to serve.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
def serve(store_root: Path, port: int) -> None:
    """Browse the store's runs and reports at http://127.0.0.1:PORT/ (Ctrl-C to stop)."""
    if not store_root.is_dir():
        raise click.ClickException(
            f"no store at {store_root}; run a test first (fencecheck run) or pass --store DIR"
        )
    write_index(store_root)
    try:
        server = make_server(store_root, port)
    except OSError as problem:
        raise click.ClickException(
            f"cannot listen on {LOOPBACK}:{port}: {problem.strerror}; pick another --port"
        ) from None
    with server:
        click.echo(f"serving {store_root.resolve()} at http://{LOOPBACK}:{server.server_port}/")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            click.echo("stopped")
