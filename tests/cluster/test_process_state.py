"""A killed daemon is gone only when its last thread is: a leader thread that is a zombie while
another thread still exits (a slow fsync) still holds the daemon's files, its listening socket
among them, and a restart then fails with "address already in use" (seen in a CI run)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from harness.node.commands import live_state
from harness.node.docker.node import _group_state

# The main thread leaves through pthread_exit while another thread sleeps: the kernel shows the
# leader as a zombie until the process's last thread ends, exactly the state of a killed daemon
# whose handler thread is still in a system call.
_LEADER_EXITS = """
import ctypes, threading, time
threading.Thread(target=time.sleep, args=(60,)).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2 :].split()[0]


def test_a_zombie_leader_with_a_live_thread_is_not_gone() -> None:
    process = subprocess.Popen([sys.executable, "-c", _LEADER_EXITS])
    try:
        deadline = time.monotonic() + 10
        while _state(process.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(process.pid) == "Z"
        assert _group_state(process.pid, "Z") == "S"
    finally:
        process.kill()
        process.wait()


def test_live_state_reads_the_leader_first() -> None:
    assert live_state(["S", "S"]) == "S"
    assert live_state(["T"]) == "T"
    assert live_state(["Z", "Z", "D"]) == "D"
    assert live_state(["Z", "X"]) == "Z"
    assert live_state(["Z"]) == "Z"
