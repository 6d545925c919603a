"""The no-op system without an engine: its registration, its in-memory lock and fence, and the
refusal of runs that would kill its server (it keeps nothing on disk)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.nodeside import wire
from harness.nodeside.agent import Agent, AgentConfig
from harness.nodeside.client import STALE, Accepted, Grant, Read, Refused
from harness.record.spec import TestSpec
from harness.run.plan import RunError
from harness.run.runner import run_test
from systems import System, SystemConfig, Volatile, durability_problem, load_system, topology
from systems.noop import NoopSystem, client
from systems.noop.server import Service
from systems.reference import ReferenceSystem


def test_it_is_registered_with_one_server_node_and_workers() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["fencecheck.systems"]["noop"] == (
        "systems.noop:NoopSystem"
    )
    system = NoopSystem()
    assert isinstance(system, System) and isinstance(system, Volatile)
    assert [name for name, _ in topology(system.roles(), 2)] == ["n1", "w1", "w2"]
    (sink,) = system.inventory(SystemConfig())
    assert sink.fenced and sink.seq and not system.packages()


def test_the_command_line_lists_it(registered_here: None) -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "harness", "list"], capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    assert "noop" in listed.stdout


def test_epochs_increase_and_a_held_lock_waits_for_its_lease() -> None:
    service = Service()
    first = service.handle({"op": "acquire", "lock": "L", "ttl": 0.2, "wait": 0})
    assert first == {"ok": True, "epoch": 1, "waited": first["waited"]}
    busy = service.handle({"op": "acquire", "lock": "L", "ttl": 0.2, "wait": 0})
    assert busy == {"ok": False, "error": "timeout"}
    # Unrenewed, the lease lapses; the next holder gets a higher epoch.
    second = service.handle({"op": "acquire", "lock": "L", "ttl": 5, "wait": 5})
    assert second["ok"] and second["epoch"] == 2
    assert service.handle({"op": "renew", "lock": "L", "epoch": 1})["error"] == "not-held"
    assert service.handle({"op": "release", "lock": "L", "epoch": 2}) == {"ok": True}
    assert service.handle({"op": "acquire", "lock": "L", "ttl": 5, "wait": 0})["epoch"] == 3


def test_the_sink_refuses_an_epoch_below_its_mark_and_numbers_what_it_accepts() -> None:
    service = Service()

    def write(epoch: int, id: str) -> dict[str, object]:
        return service.handle({"op": "write", "lock": "L", "epoch": epoch, "key": "k", "id": id})

    assert write(2, "a") == {"ok": True, "seq": 1}
    assert write(1, "old") == {"ok": False, "error": STALE, "mark": 2}
    fenced = {"op": "read", "key": "k", "lock": "L", "epoch": 3}
    assert service.handle(fenced)["entries"] == [{"id": "a", "epoch": 2, "seq": 1}]
    assert write(2, "b")["error"] == STALE  # the fenced read raised the mark to 3
    assert write(3, "c") == {"ok": True, "seq": 2}
    plain = service.handle({"op": "read", "key": "k"})
    assert [entry["id"] for entry in plain["entries"]] == ["a", "c"]


@pytest.fixture
def server() -> Iterator[str]:
    """The no-op server on loopback, in this process."""
    listening = wire.LineServer(("127.0.0.1", 0), Service().handle)
    thread = threading.Thread(target=listening.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listening.server_address[1]}"
    listening.shutdown()
    listening.server_close()


def test_the_holder_client_gets_typed_answers(server: str) -> None:
    holder = client.Client({"server": server, "node": "w1", "timeout": 5})
    grant = holder.acquire("L", 10.0, 1.0)
    assert isinstance(grant, Grant) and grant.epoch == 1
    assert holder.write("L", "memory", "k", "w1-1", 1, None) == Accepted(1)
    newer = client.Client({"server": server, "node": "w2"})
    assert holder.release("L", 1)
    assert isinstance(newer.acquire("L", 10.0, 1.0), Grant)
    assert newer.write("L", "memory", "k", "w2-1", 2, None) == Accepted(2)
    assert holder.write("L", "memory", "k", "w1-2", 1, None) == Refused(STALE)
    read = holder.read("memory", "k")
    assert isinstance(read, Read) and [e.id for e in read.entries] == ["w1-1", "w2-1"]


def test_an_unreachable_server_is_a_definite_refusal() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    holder = client.Client({"server": f"127.0.0.1:{port}", "timeout": 1})
    assert holder.write("L", "memory", "k", "x", 1, None) == Refused("unavailable")


def test_an_agent_write_with_no_work_never_gives_the_cpu_away(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sleep(0)`` yields the CPU: on a loaded machine a time slice per write (issue 16)."""
    agent = Agent("w1", client.Client({"server": server, "node": "w1"}), AgentConfig(10.0))
    epoch = agent.handle({"op": "acquire", "lock": "L", "wait": 1})["epoch"]
    slept: list[float] = []
    monkeypatch.setattr("harness.nodeside.agent.time.sleep", slept.append)
    request = {"op": "write", "lock": "L", "epoch": epoch, "sink": "memory", "key": "k"}
    assert agent.handle({**request, "id": "w1-1", "work_ms": 0})["ok"]
    assert agent.handle({**request, "id": "w1-2", "work_ms": 20})["ok"]
    assert slept == [0.02]


@pytest.mark.parametrize(
    ("kinds", "targets", "refused"),
    [
        (("kill",), ("holder",), False),
        (("pause", "partition"), ("lock", "holder"), False),
        (("kill",), ("lock",), True),
        (("kill",), ("n1",), True),
        (("pause", "kill"), ("holder", "lock-leader"), True),
        (("restart-while-paused",), ("holder",), True),
    ],
)
def test_faults_that_would_kill_its_server_are_refused(
    kinds: tuple[str, ...], targets: tuple[str, ...], refused: bool
) -> None:
    problem = durability_problem(NoopSystem(), kinds, targets)
    assert (problem is not None) == refused
    if problem is not None:
        assert "in memory only" in problem and "--target holder" in problem


def test_durable_systems_may_be_killed() -> None:
    assert (
        durability_problem(ReferenceSystem(), ("kill", "restart-while-paused"), ("lock",)) is None
    )


def test_a_run_that_kills_it_is_refused_before_anything_starts(
    registered_here: None, tmp_path: Path
) -> None:
    assert isinstance(load_system("noop"), NoopSystem)
    store = tmp_path / "store"
    spec = TestSpec(system="noop", nemeses=("kill",), targets=("lock",), store=store)
    with pytest.raises(RunError, match="keeps its lock state in memory only"):
        run_test(spec)
    assert not store.exists()
