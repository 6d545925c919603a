"""List (and for ``continue``, resume) the processes of a node: run on the node itself.

Nemeses that did not start a node's daemons (a manual ``fencecheck nemesis`` command, a heal after
a crash) find them with this script, sent as ``python3 -c SOURCE MODE ARG LOGS``. It prints one
JSON list of processes: ``pid``, ``ppid``, ``state``, ``name`` (the daemon name, from where its
stdout goes: ``LOGS<name>.log``), ``argv``, ``env`` and ``cwd``.

Modes: ``daemons NAME`` (NAME may be empty: every daemon), ``pattern REGEX`` (like ``pgrep -f``),
``pid PID`` (one process), ``continue`` (SIGCONT every stopped process and list them). PID 1 and
the script itself are never listed. Stdlib-only, like everything shipped to nodes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from typing import Any

__all__ = ["main", "scan"]


def scan(mode: str, arg: str, logs: str) -> list[dict[str, Any]]:
    """The processes ``mode`` and ``arg`` select (see the module documentation)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid in (1, os.getpid(), os.getppid()):
            continue
        process = _read(pid)
        if process is None:
            continue
        argv, fields, out = process
        name = out[len(logs) : -4] if out.startswith(logs) and out.endswith(".log") else ""
        if not _selected(mode, arg, pid, argv, fields[0], name):
            continue
        env, cwd = _surroundings(pid)
        found.append(
            {
                "pid": pid,
                "ppid": int(fields[1]),
                "state": fields[0],
                "name": name,
                "argv": argv,
                "env": env,
                "cwd": cwd,
            }
        )
    return found


def _read(pid: int) -> tuple[list[str], list[str], str] | None:
    """A process's argv, its stat fields after the command name, and where its stdout goes;
    ``None`` for a process gone meanwhile or a kernel thread (no argv)."""
    base = f"/proc/{pid}/"
    try:
        with open(base + "stat") as stat:
            text = stat.read()
        with open(base + "cmdline", "rb") as cmdline:
            argv = [a.decode("utf-8", "replace") for a in cmdline.read().split(b"\0")[:-1]]
    except OSError:
        return None
    if not argv:
        return None
    try:
        out = os.readlink(base + "fd/1")
    except OSError:
        out = ""
    return argv, text[text.rfind(")") + 2 :].split(), out


def _selected(mode: str, arg: str, pid: int, argv: list[str], state: str, name: str) -> bool:
    if mode == "daemons":
        return bool(name) and (not arg or name == arg)
    if mode == "pattern":
        return re.search(arg, " ".join(argv)) is not None
    if mode == "pid":
        return pid == int(arg)
    if state == "T":
        # Continue it here: between a listing and a second command the pid could be reused.
        os.kill(pid, signal.SIGCONT)
        return True
    return False


def _surroundings(pid: int) -> tuple[dict[str, str], str]:
    """A process's environment and working directory, as far as they can be read."""
    base = f"/proc/{pid}/"
    try:
        with open(base + "environ", "rb") as environ:
            pairs = [kv.decode("utf-8", "replace") for kv in environ.read().split(b"\0")]
        env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        return env, os.readlink(base + "cwd")
    except OSError:
        return {}, "/"


def main() -> None:
    """``MODE ARG LOGS`` from the command line; prints the JSON list."""
    mode, arg, logs = sys.argv[1], sys.argv[2], sys.argv[3]
    print(json.dumps(scan(mode, arg, logs)))


if __name__ == "__main__":
    main()
