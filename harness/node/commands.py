"""Helpers every node backend shares: decoding output, showing commands, checking paths, and
the message of a failed command."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import Any

from harness.node.protocol import CommandResult, NodeError

__all__ = ["absolute_file", "failure", "live_state", "shown", "stat_fields", "text"]


def text(data: Any) -> str:
    """Command output as text (undecodable bytes replaced; ``None`` or empty gives "")."""
    return data.decode("utf-8", errors="replace") if data else ""


def shown(argv: Sequence[str] | str) -> str:
    """A command as a user would type it."""
    return argv if isinstance(argv, str) else shlex.join(argv)


def absolute_file(node: str, path: str) -> str:
    """``path`` normalised; raises :class:`NodeError` unless it is an absolute file path."""
    if not path.startswith("/") or path.endswith("/"):
        raise NodeError(f"{node}: {path!r} must be an absolute path to a file, e.g. /etc/x.conf")
    return os.path.normpath(path)


def failure(node: str, argv: Sequence[str] | str, result: CommandResult) -> str:
    """The message for a command that exited non-zero: its exit code and the tail of its output."""
    lines = [f"{node}: {shown(argv)} exited {result.exit_code}"]
    for label, output in (("stdout", result.stdout), ("stderr", result.stderr)):
        if output.strip():
            lines.append(f"--- {label} ---\n{output.rstrip()[-4000:]}")
    return "\n".join(lines)


def stat_fields(line: str) -> list[str]:
    """The fields of a ``/proc/PID/stat`` line after the command name, the state first (the name
    may hold spaces and parentheses; it ends at the last ')')."""
    return line[line.rfind(")") + 2 :].split()


def live_state(states: Sequence[str]) -> str:
    """A process's state from its leader's (first) and its threads' states (the rest).

    A multi-threaded process killed while one thread sits in a slow system call (an fsync on a
    busy disk) shows its leader as a zombie while that thread still exits, holding the files the
    threads share, its listening socket among them: restarting it then fails with "address already
    in use". Such a process is not gone yet: the state of a thread still alive is returned.
    """
    if states[0] != "Z":
        return states[0]
    return next((state for state in states[1:] if state not in ("Z", "X")), states[0])
