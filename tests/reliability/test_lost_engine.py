"""An engine that stops answering mid-run ends the run within seconds of the bound on one engine
call (not 600 s per call), names the lost engine in the verdict, and prints the command, naming
the run id, that removes the containers and network left behind."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR
from harness.node.docker.cluster import remove_run
from tests.support.cli import run_id_once_recording

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

_ENGINE = "/var/run/docker.sock"


class _Proxy:
    """A Unix socket relaying to the engine until :meth:`stop_answering`, after which it takes
    requests (new and on open connections) and never answers them: an engine gone silent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.silent = threading.Event()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(64)
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def stop_answering(self) -> None:
        self.silent.set()

    def close(self) -> None:
        self._server.close()
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client = self._server.accept()[0]
            except OSError:
                return
            self._open.append(client)
            if self.silent.is_set():
                continue
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(_ENGINE)
            self._open.append(upstream)
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._relay, args=(source, target), daemon=True).start()

    def _relay(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if not self.silent.is_set():
                    target.sendall(data)
            if not self.silent.is_set():
                target.shutdown(socket.SHUT_WR)  # the other side reads to the end, as direct


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[_Proxy]:
    if not os.path.exists(_ENGINE):
        pytest.skip(f"no engine socket at {_ENGINE}")
    relay = _Proxy(tmp_path / "docker.sock")
    try:
        yield relay
    finally:
        relay.close()


def test_an_engine_gone_silent_mid_run_is_named_with_the_cleanup(
    proxy: _Proxy, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    argv = [sys.executable, "-m", "harness", "run", "--system", "noop", "--nemesis", "none"]
    argv += ["--ttl", "0.5", "--time-limit", "4", "--workers", "1", "--seed", "9"]
    env = {
        **os.environ,
        "DOCKER_HOST": f"unix://{proxy.path}",
        "FENCECHECK_ENGINE_TIMEOUT": "3",
        "COLUMNS": "300",
    }
    run = subprocess.Popen(
        [*argv, "--store", str(store), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    run_id = ""
    try:
        run_id = run_id_once_recording(store, run)
        proxy.stop_answering()
        silent_at = time.monotonic()
        out, err = run.communicate(timeout=120)
        took = time.monotonic() - silent_at
    finally:
        if run.poll() is None:
            run.kill()
        if run_id:
            remove_run(run_id)  # through the real engine
    assert run.returncode == EXIT_ERROR, err
    # The workload's 4 s, then one engine call's 3 s bound; every later call fails at once.
    assert took < 30, f"{took:.0f} s after the engine went silent"
    assert "the Docker engine stopped answering" in err
    assert f"fencecheck cluster down {run_id}" in err
    assert out.split(maxsplit=1)[0].rstrip(",") == "UNKNOWN", out
    (results_file,) = store.glob("*/*/results.json")
    results = json.loads(results_file.read_text())
    assert "stopped answering" in results["run_error"]
    assert "Traceback" not in err
