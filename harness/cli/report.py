"""``fencecheck report`` writes the HTML report of a run; ``fencecheck serve`` browses the store."""

from __future__ import annotations

import functools
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import click

from harness.cli import cli
from harness.report import write_report
from harness.report.index import write_index
from harness.run.record import read_record
from harness.run.store import DEFAULT_STORE, RunDir, find_runs, open_run_dir

__all__ = ["LOOPBACK", "make_server", "report", "serve"]

LOOPBACK: Final = "127.0.0.1"


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
        click.echo(write_report(_readable_run(store_dir)))
        return
    runs = find_runs(store_dir)
    if not runs:
        raise click.ClickException(
            f"{store_dir} is neither a run directory (no history.jsonl) nor a store with runs; "
            "pass store/latest, store/<test>/<timestamp> or store"
        )
    unreadable = 0
    for run in runs:
        try:
            click.echo(write_report(_readable_run(run.path)))
        except click.ClickException as problem:
            problem.show()
            unreadable += 1
    click.echo(write_index(store_dir))
    if unreadable:
        raise click.ClickException(f"{unreadable} of {len(runs)} runs could not be read (above)")


def _readable_run(path: Path) -> RunDir:
    """The run at ``path`` once its record and the start of its history read as a run's;
    else a :class:`click.ClickException` naming the file and the fix."""
    try:
        run = open_run_dir(path)
        read_record(run)
    except (OSError, ValueError) as problem:
        raise click.ClickException(str(problem)) from None
    return run


class _StoreHandler(SimpleHTTPRequestHandler):
    """Serves the store's files; never cached, since reports and the index are rewritten.

    Two guards a plain file server lacks: a path whose real location (symlinks followed) is
    outside the store is not found, so a link planted in the store cannot serve ``/etc`` or
    ``~/.ssh``; and a request whose ``Host`` is not this loopback server is refused, so a web
    page that rebinds its own DNS name to 127.0.0.1 cannot read the store (DNS rebinding).
    ``store/latest`` is a symlink inside the store and keeps working.
    """

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def send_head(self) -> Any:
        """The usual response head, after the Host and containment checks."""
        if not self._host_allowed():
            self.send_error(HTTPStatus.FORBIDDEN, "unexpected Host header (DNS rebinding?)")
            return None
        root = Path(self.directory).resolve()
        if not Path(self.translate_path(self.path)).resolve().is_relative_to(root):
            self.send_error(HTTPStatus.NOT_FOUND, "outside the store")
            return None
        return super().send_head()

    def _host_allowed(self) -> bool:
        host = self.headers.get("Host", "")
        name, colon, port = host.rpartition(":")
        if not colon:
            name, port = host, ""
        served = str(getattr(self.server, "server_port", ""))
        return name.lower() in _LOCAL_NAMES and port in ("", served)


_LOCAL_NAMES: Final = frozenset((LOOPBACK, "localhost"))


def make_server(root: Path, port: int) -> ThreadingHTTPServer:
    """An HTTP server for ``root`` bound to the loopback address only (``port`` 0: any free)."""
    handler: Any = functools.partial(_StoreHandler, directory=str(root))
    return ThreadingHTTPServer((LOOPBACK, port), handler)


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
