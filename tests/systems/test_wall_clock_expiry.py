"""``wall-clock-expiry``: the reference lock server under libfaketime, wall clock only, stepped.

A real lock server process on this host, preloaded as a clocked run starts it (its control file
in a temporary directory): a wall-clock step forward ends a live lease at once only when the
server measures leases on its wall clock; the correct one measures them on the monotonic clock,
which the step leaves alone.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.nodeside import clock, wire
from systems.reference import lock_server
from tests.support.localcluster import free_ports, wait_until

_LIBRARY = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
pytestmark = pytest.mark.skipif(not _LIBRARY.exists(), reason="libfaketime is not installed")

_TTL_S = 30.0


def _serve(tmp_path: Path, bugs: list[str]) -> Iterator[tuple[tuple[str, int], str]]:
    (port,) = free_ports(1)
    ask = f"wire:127.0.0.1:{port}"
    control = str(tmp_path / "control")
    argv = [sys.executable, lock_server.__file__, "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--data-dir", str(tmp_path / "data"), *(w for b in bugs for w in ("--bug", b))]
    command = clock.preloaded("lock-server", argv, ask, wall_only=True)
    command = [
        f"FAKETIME_TIMESTAMP_FILE={control}" if w.startswith("FAKETIME_TIMESTAMP") else w
        for w in command
    ]
    process = subprocess.Popen(command, cwd=Path(__file__).parents[2], stderr=subprocess.DEVNULL)
    address = ("127.0.0.1", port)
    try:
        wait_until(lambda: _answers(address), "the lock server to listen")
        yield address, control
    finally:
        process.kill()
        process.wait()


def _answers(address: tuple[str, int]) -> bool:
    try:
        return bool(wire.call(address, {"op": "ping"}, 1.0)["ok"])
    except OSError:
        return False


def _acquire(address: tuple[str, int], owner: str) -> dict[str, object]:
    request = {"op": "acquire", "lock": "L", "ttl": _TTL_S, "wait": 0.0, "owner": owner}
    return wire.call(address, request, 5.0)


@pytest.mark.parametrize("bug", [False, True])
def test_a_wall_clock_step_forward_ends_a_lease_only_under_the_switch(
    tmp_path: Path, bug: bool
) -> None:
    served = _serve(tmp_path, [lock_server.WALL_CLOCK_EXPIRY] if bug else [])
    address, control = next(served)
    try:
        assert _acquire(address, "a")["ok"] is True
        done = clock.apply(control, "step", 2 * _TTL_S, f"wire:{address[0]}:{address[1]}")
        (reading,) = done["readings"]
        assert reading[1] - reading[0] == pytest.approx(2 * _TTL_S, abs=1.0)  # its wall moved
        second = _acquire(address, "b")
        if bug:
            assert second["ok"] is True and second["epoch"] == 2  # a's lease ended at once
        else:
            assert second == {"ok": False, "error": "timeout"}  # a's lease runs on
    finally:
        served.close()
