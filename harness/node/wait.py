"""Readiness checks for nodes: a command succeeds, a TCP port answers, a log line appears.

A strategy is an object with a description, a deadline and one ``attempt``; :func:`wait_for` polls
it and, when time runs out, raises :class:`WaitTimeout` carrying the node's logs so the reason is on
screen instead of in a container that is about to be removed.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, Protocol

from harness.node import Node, NodeError

__all__ = [
    "CommandSucceeds",
    "LogLine",
    "PortOpen",
    "WaitStrategy",
    "WaitTimeout",
    "wait_all",
    "wait_for",
]

_LOG_TAIL_CHARS: Final = 2_000


class WaitTimeout(NodeError):
    """A node did not become ready in time; the message includes the tail of its logs."""


class WaitStrategy(Protocol):
    """One readiness condition, polled until it holds or ``timeout`` seconds pass."""

    @property
    def timeout(self) -> float:
        """Seconds to keep trying."""
        ...

    @property
    def interval(self) -> float:
        """Seconds between attempts."""
        ...

    def describe(self) -> str:
        """What is awaited, for messages: ``"port 2379 answers"``."""
        ...

    def attempt(self, node: Node) -> bool:
        """One check; True when the condition holds. May raise :class:`NodeError`."""
        ...


@dataclass(frozen=True, slots=True)
class CommandSucceeds:
    """Ready when ``argv`` (a string goes through ``sh -c``) exits 0 on the node."""

    argv: Sequence[str] | str
    timeout: float = 30.0
    interval: float = 0.1

    def describe(self) -> str:
        """What is awaited."""
        shown = self.argv if isinstance(self.argv, str) else " ".join(self.argv)
        return f"`{shown}` succeeds"

    def attempt(self, node: Node) -> bool:
        """Run the command once."""
        return node.run(self.argv, timeout=max(self.timeout, 1.0)).ok


@dataclass(frozen=True, slots=True)
class PortOpen:
    """Ready when a TCP connection to ``port`` on the node's address (or ``host``) succeeds."""

    port: int
    host: str | None = None
    timeout: float = 30.0
    interval: float = 0.1

    def describe(self) -> str:
        """What is awaited."""
        return f"TCP port {self.port} answers" + (f" on {self.host}" if self.host else "")

    def attempt(self, node: Node) -> bool:
        """Try one connection (0.5 s at most)."""
        try:
            with socket.create_connection((self.host or node.ip, self.port), timeout=0.5):
                return True
        except OSError:
            return False


@dataclass(frozen=True, slots=True)
class LogLine:
    """Ready when ``pattern`` (a regular expression) matches a line of a log of the node.

    ``log`` names the log as :meth:`harness.node.Node.logs` keys it: a daemon's name, or
    ``"container"`` for the container's own output.
    """

    pattern: str
    log: str = "container"
    timeout: float = 30.0
    interval: float = 0.2

    def describe(self) -> str:
        """What is awaited."""
        return f"/{self.pattern}/ appears in the {self.log} log"

    def attempt(self, node: Node) -> bool:
        """Fetch the log once and search it."""
        text = node.logs().get(self.log, b"").decode("utf-8", errors="replace")
        return re.search(self.pattern, text, re.MULTILINE) is not None


def wait_for(node: Node, strategy: WaitStrategy) -> float:
    """Poll ``strategy`` on ``node`` until it holds; returns the seconds it took.

    Raises :class:`WaitTimeout` (with the node's logs) when ``strategy.timeout`` passes; errors
    raised by an attempt count as "not yet" and the last one is shown.
    """
    start = time.monotonic()
    deadline = start + strategy.timeout
    last_error: NodeError | None = None
    while True:
        try:
            if strategy.attempt(node):
                return time.monotonic() - start
        except NodeError as problem:
            last_error = problem
        if time.monotonic() >= deadline:
            break
        time.sleep(strategy.interval)
    because = f"; last error: {last_error}" if last_error else ""
    raise WaitTimeout(
        f"{node.name}: gave up after {strategy.timeout:g} s waiting until "
        f"{strategy.describe()}{because}\n{_log_tails(node)}"
    )


def wait_all(pairs: Sequence[tuple[Node, WaitStrategy]]) -> None:
    """Wait for every (node, strategy) pair in parallel; raises the first failure."""
    if not pairs:
        return
    with ThreadPoolExecutor(max_workers=len(pairs), thread_name_prefix="wait") as pool:
        for future in [pool.submit(wait_for, node, strategy) for node, strategy in pairs]:
            future.result()


def _log_tails(node: Node) -> str:
    try:
        logs = node.logs()
    except NodeError as problem:
        return f"(logs unavailable: {problem})"
    parts = []
    for name, data in logs.items():
        text = data.decode("utf-8", errors="replace").rstrip()
        if text:
            parts.append(f"--- {node.name} {name} log (tail) ---\n{text[-_LOG_TAIL_CHARS:]}")
    return "\n".join(parts) or f"({node.name} has no log output)"
