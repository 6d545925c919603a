"""Helpers for the Docker tests of real systems (redis, zookeeper).

:func:`running` starts a cluster of the system's own topology on its own image (built once from
its package list), sets the system up, starts the harness's agents with its holder client, and
always tears everything down; :func:`ask` talks to an agent; :func:`pause_inside_write` makes a
stale holder.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness.node import NodeError
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.images import system_image
from harness.nodeside import wire
from harness.run.agents import AgentSet, deploy_system, stop_agents
from systems.base import Deployment, System, SystemConfig, packages_of, topology
from tests.support.localcluster import wait_until

__all__ = ["Running", "ask", "pause_inside_write", "running"]


@dataclass(frozen=True, slots=True)
class Running:
    """A system set up on a cluster, with the harness's agents on its workers."""

    cluster: Cluster
    deployment: Deployment
    agents: AgentSet


@contextlib.contextmanager
def running(system: System, config: SystemConfig, workers: int = 2) -> Iterator[Running]:
    """``system`` under ``config`` on its own topology and image; on the way out every stopped
    process is continued, agents and system stopped and the cluster removed."""
    image = system_image(packages_of(system))
    nodes = [NodeSpec(name, role) for name, role in topology(system.roles(), workers)]
    with Cluster(f"test-{system.name}-{new_run_id()}", nodes, image=image) as cluster:
        deployment, agents = deploy_system(system, cluster.nodes, config)
        try:
            yield Running(cluster, deployment, agents)
        finally:
            for node in cluster.nodes.values():
                for daemon in node.daemons():
                    with contextlib.suppress(NodeError):
                        node.signal(daemon, signal.SIGCONT)
            stop_agents(cluster.nodes)
            system.teardown(cluster.nodes)


def ask(run: Running, worker: str, request: dict[str, Any]) -> dict[str, Any]:
    """Send one request to ``worker``'s agent and return its answer."""
    endpoint = run.agents.endpoints[worker]
    return wire.call((endpoint.host, endpoint.port), request, 60.0, run.agents.token)


def pause_inside_write(run: Running, sink: str, work_ms: int) -> tuple[int, int, dict[str, Any]]:
    """w1 takes lock L and is SIGSTOPped inside a write's critical section (``work_ms`` long);
    meanwhile w2 takes L and writes ``w2-1`` to ``sink``/k; then w1 resumes and its write
    ``w1-1`` goes out. Returns w1's epoch, w2's epoch and the answer w1's write got."""
    old = ask(run, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    request = {"op": "write", "lock": "L", "sink": sink, "key": "k"}
    replies: list[dict[str, Any]] = []
    stale = {**request, "epoch": old, "id": "w1-1", "work_ms": work_ms}
    writer = threading.Thread(target=lambda: replies.append(ask(run, "w1", stale)))
    writer.start()
    wait_until(lambda: "w1-1" in ask(run, "w1", {"op": "holds"})["working"], "w1's write")
    w1 = run.cluster.nodes["w1"]
    w1.signal(w1.daemon("agent"), signal.SIGSTOP)
    try:
        new = ask(run, "w2", {"op": "acquire", "lock": "L", "wait": 30})["epoch"]
        assert ask(run, "w2", {**request, "epoch": new, "id": "w2-1"})["ok"] is True
    finally:
        w1.signal(w1.daemon("agent"), signal.SIGCONT)
    writer.join(timeout=60)
    return old, new, replies[0]
