"""An engine that accepts connections and never answers makes ``run`` fail fast with exit 3."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR


@pytest.fixture
def hung_engine(tmp_path: Path) -> Iterator[str]:
    """A Unix socket that accepts every connection and never sends a byte."""
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    accepted: list[socket.socket] = []
    closing = threading.Event()

    def accept() -> None:
        while not closing.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        closing.set()
        server.close()
        for connection in accepted:
            connection.close()


def test_run_against_a_hung_engine_answers_within_seconds(hung_engine: str, tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": hung_engine}
    # The 600 s API timeout must not apply to the first contact: a hang fails by this timeout.
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "--no-progress", "--store", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_ERROR, done.stderr
    assert "Traceback" not in done.stderr
    assert "does not answer" in done.stderr
    assert not list((tmp_path / "s").glob("*/*/history.jsonl"))
