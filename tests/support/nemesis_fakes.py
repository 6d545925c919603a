"""Test doubles for the node protocols: processes, a freezer, a CPU quota and a small iptables.

:class:`FakeNode` keeps its state in memory and answers the commands the nemeses send it: the
process-scan script (``python3 -c ... MODE ARG``), ``iptables -S`` and ``iptables-restore``.
The iptables model knows just enough (chains, inserts, appends, deletes, declarations that flush)
to let tests check what the rules would do.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.node import CommandResult, Daemon, NodeError, NodeIdentity

__all__ = ["FakeNode", "FakeProcess", "Recording", "clock", "fake_cluster"]


@dataclass
class FakeProcess:
    """One process of a fake node."""

    pid: int
    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/"
    state: str = "S"


class FakeNode(NodeIdentity):
    """An in-memory node implementing Node, Freezable, Throttleable and NetnsRunner."""

    def __init__(self, name: str, role: str, ip: str) -> None:
        super().__init__(name, role, ip)
        self.processes: dict[int, FakeProcess] = {}
        self._daemons: dict[str, Daemon] = {}
        self._next_pid = 100
        self.frozen = False
        self.quota: tuple[int | None, int] = (None, 100_000)
        self.chains: dict[str, list[str]] = {"INPUT": [], "OUTPUT": [], "FORWARD": []}
        self.restores: list[str] = []
        self.fail_restore = False
        self.fail_freeze = False

    # -- Node ---------------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str] | str,
        *,
        timeout: float | None = None,
        check: bool = False,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        if self.frozen:
            raise NodeError(f"{self._name}: container is paused")
        assert not isinstance(argv, str)
        if argv[0] == "python3":
            return self._scan(argv[3], argv[4])
        return self.run_in_netns(argv, stdin=stdin)

    def start_daemon(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> Daemon:
        if self.frozen:
            raise NodeError(f"{self._name}: container is paused")
        pid = self._next_pid
        self._next_pid += 1
        self.processes[pid] = FakeProcess(pid, name, tuple(argv), dict(env or {}), cwd or "/")
        daemon = Daemon(name, self._name, pid, pid, tuple(argv), f"/var/log/fencecheck/{name}.log")
        self._daemons[name] = daemon
        return daemon

    def daemon(self, name: str) -> Daemon:
        if name not in self._daemons:
            raise NodeError(f"{self._name}: no daemon named {name!r}")
        return self._daemons[name]

    def daemons(self) -> list[Daemon]:
        return list(self._daemons.values())

    def signal(self, daemon: Daemon, signum: int) -> None:
        process = self.processes.get(daemon.pid)
        if process is None or process.state == "Z":
            raise NodeError(f"{self._name}: daemon {daemon.name!r} has exited")
        if signum == signal.SIGSTOP:
            process.state = "T"
        elif signum == signal.SIGCONT:
            process.state = "S"
        elif signum == signal.SIGKILL:
            del self.processes[daemon.pid]

    def process_state(self, daemon: Daemon) -> str | None:
        process = self.processes.get(daemon.pid)
        return None if process is None else process.state

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        raise NotImplementedError

    def get_file(self, path: str) -> bytes:
        raise NotImplementedError

    def logs(self) -> dict[str, bytes]:
        return {}

    # -- capabilities -------------------------------------------------------------------------

    def freeze(self) -> None:
        if self.fail_freeze:
            raise NodeError(f"{self._name}: the freezer is broken")
        self.frozen = True

    def thaw(self) -> None:
        self.frozen = False

    def set_cpu_quota(self, quota_us: int | None, period_us: int = 10_000) -> None:
        self.quota = (quota_us, period_us)

    def run_in_netns(self, argv: Sequence[str], *, stdin: bytes | None = None) -> CommandResult:
        if list(argv) == ["iptables", "-w", "-S"]:
            return CommandResult(0, self.listing(), "", 0.0)
        if list(argv) == ["iptables-restore", "-w", "--noflush"]:
            assert stdin is not None
            return self._restore(stdin.decode())
        return CommandResult(127, "", f"fake node cannot run {argv}", 0.0)

    # -- the iptables model -------------------------------------------------------------------

    def listing(self) -> str:
        """The filter table as ``iptables -S`` prints it."""
        lines = ["-P INPUT ACCEPT", "-P FORWARD ACCEPT", "-P OUTPUT ACCEPT"]
        lines += [f"-N {chain}" for chain in self.chains if chain not in _BUILTIN]
        for chain, rules in self.chains.items():
            lines += [f"-A {chain} {rule}" for rule in rules]
        return "\n".join(lines) + "\n"

    def dropped(self, source_ip: str, dest_ip: str) -> bool:
        """Whether a packet from ``source_ip`` to ``dest_ip`` is dropped on this node."""
        hook = "OUTPUT" if source_ip == self._ip else "INPUT" if dest_ip == self._ip else None
        if hook is None:
            return False
        return self._verdict(hook, source_ip, dest_ip)

    def _verdict(self, chain: str, source_ip: str, dest_ip: str) -> bool:
        for rule in self.chains.get(chain, []):
            words = rule.split()
            if words[:2] == ["-s", f"{source_ip}/32"] or words[:2] == ["-d", f"{dest_ip}/32"]:
                return True
            jump = words[-1]
            if (
                words == ["-j", jump]
                and jump in self.chains
                and self._verdict(jump, source_ip, dest_ip)
            ):
                return True
        return False

    def _restore(self, script: str) -> CommandResult:
        if self.fail_restore:
            return CommandResult(1, "", "iptables-restore: broken on purpose", 0.0)
        self.restores.append(script)
        chains = {chain: list(rules) for chain, rules in self.chains.items()}
        for number, line in enumerate(script.splitlines(), 1):
            words = line.split()
            if not words or words[0] in ("*filter", "COMMIT"):
                continue
            problem = _apply(chains, words)
            if problem:
                return CommandResult(1, "", f"iptables-restore: line {number} failed: {problem}", 0)
        self.chains = chains
        return CommandResult(0, "", "", 0.0)

    def _scan(self, mode: str, arg: str) -> CommandResult:
        found = []
        for process in self.processes.values():
            if mode == "daemons":
                hit = not arg or process.name == arg
            elif mode == "pattern":
                hit = arg in " ".join(process.argv)
            elif mode == "pid":
                hit = process.pid == int(arg)
            else:
                hit = process.state == "T"
                if hit:
                    process.state = "S"
            if hit:
                found.append(
                    {
                        "pid": process.pid,
                        "ppid": 1,
                        "state": process.state,
                        "name": process.name,
                        "argv": list(process.argv),
                        "env": process.env,
                        "cwd": process.cwd,
                    }
                )
        return CommandResult(0, json.dumps(found), "", 0.0)


_BUILTIN = ("INPUT", "OUTPUT", "FORWARD")


def _apply(chains: dict[str, list[str]], words: list[str]) -> str:
    """Apply one restore line to ``chains``; returns a problem, or "" when it worked."""
    if words[0].startswith(":"):
        chains[words[0][1:]] = []  # a declaration under --noflush creates or flushes
        return ""
    op, chain, rule = words[0], words[1], words[2:]
    if chain not in chains:
        return f"no chain {chain}"
    if op == "-X":
        if chains[chain] or chain in _BUILTIN:
            return f"chain {chain} is not empty or built in"
        del chains[chain]
    elif op == "-A":
        chains[chain].append(" ".join(rule))
    elif op == "-I":
        chains[chain].insert(int(rule[0]) - 1, " ".join(rule[1:]))
    elif op == "-D":
        if " ".join(rule) not in chains[chain]:
            return "Bad rule (does a matching rule exist in that chain?)"
        chains[chain].remove(" ".join(rule))
    else:
        return f"unknown operation {op}"
    return ""


def fake_cluster(workers: int = 3) -> dict[str, FakeNode]:
    """``l1`` (lock), ``s1`` (store), ``w1``..``wN`` (workers), each with one daemon running."""
    roles = [("l1", "lock", "lockd"), ("s1", "store", "stored")]
    roles += [(f"w{i}", "worker", "agent") for i in range(1, workers + 1)]
    nodes = {}
    for index, (name, role, daemon) in enumerate(roles):
        node = FakeNode(name, role, f"10.9.0.{index + 2}")
        node.start_daemon(daemon, ["python3", f"/opt/{daemon}.py", "--data", "/data"])
        nodes[name] = node
    return nodes


class Recording:
    """A thread-safe record callback that can wait for an event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._changed = threading.Condition()

    def __call__(self, f: str, value: dict[str, Any]) -> None:
        with self._changed:
            self.events.append((f, value))
            self._changed.notify_all()

    def wait_for(self, f: str) -> dict[str, Any]:
        """The value of the first ``f`` event, once recorded (10 s at most)."""
        with self._changed:
            assert self._changed.wait_for(lambda: any(e[0] == f for e in self.events), 10)
            return next(value for name, value in self.events if name == f)


def clock() -> Any:
    """A run clock: nanoseconds since it was made."""
    t0 = time.monotonic_ns()
    return lambda: time.monotonic_ns() - t0
