"""Helpers for the Docker tests of real systems (redis, zookeeper).

A system's node image is the node image plus the system's packages.txt, built with the Docker SDK
and tagged by a hash of the node tag and the package list, so it is built once and reused until
either changes. :func:`running` starts a cluster with a system set up on it and always tears both
down; :func:`ask` talks to an agent; :func:`pause_inside_write` makes a stale holder.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import signal
import tarfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from localcluster import wait_until

from harness.node import NodeError
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.engine import engine
from harness.node.docker.images import image_exists, node_image
from harness.nodeside import wire
from systems import Deployment, System, SystemConfig

__all__ = ["ask", "pause_inside_write", "running", "system_image"]

# Daemons' maintainer scripts would start them during the build without this (SYSTEMS.md).
_DOCKERFILE: Final = """\
ARG BASE
FROM ${BASE}
COPY packages.txt /tmp/packages.txt
RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \\
 && export DEBIAN_FRONTEND=noninteractive && apt-get update \\
 && sed 's/#.*//' /tmp/packages.txt | xargs apt-get install -y --no-install-recommends \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/packages.txt
CMD ["sleep", "infinity"]
"""


def system_image(packages: Path) -> str:
    """The tag of the image for a system whose package list is ``packages``, built if absent."""
    base = node_image()
    text = packages.read_bytes()
    digest = hashlib.sha256(base.encode() + b"\0" + text + _DOCKERFILE.encode()).hexdigest()[:12]
    tag = f"fencecheck-system:{digest}"
    if image_exists(tag):
        return tag
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", _DOCKERFILE.encode()), ("packages.txt", text)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    output = []
    for chunk in engine().api.build(
        fileobj=context,
        custom_context=True,
        tag=tag,
        buildargs={"BASE": base},
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
    ):
        if "error" in chunk:
            raise RuntimeError(f"building {tag} failed: {chunk['error']}\n{''.join(output[-30:])}")
        output.append(str(chunk.get("stream", "")))
    return tag


@contextlib.contextmanager
def running(
    system: System, image: str, topology: Sequence[NodeSpec], config: SystemConfig
) -> Iterator[tuple[Cluster, Deployment]]:
    """A cluster of ``topology`` on ``image`` with ``system`` set up under ``config``; on the way
    out every stopped process is continued, the system torn down and the cluster removed."""
    with Cluster(f"test-{system.name}-{new_run_id()}", list(topology), image=image) as cluster:
        deployment = system.setup(cluster.nodes, config)
        try:
            yield cluster, deployment
        finally:
            for node in cluster.nodes.values():
                for daemon in node.daemons():
                    with contextlib.suppress(NodeError):
                        node.signal(daemon, signal.SIGCONT)
            system.teardown(cluster.nodes)


def ask(deployment: Deployment, worker: str, request: dict[str, Any]) -> dict[str, Any]:
    """Send one request to ``worker``'s agent and return its answer."""
    endpoint = deployment.agents[worker]
    return wire.call((endpoint.host, endpoint.port), request, 60.0)


def pause_inside_write(
    cluster: Cluster, deployment: Deployment, sink: str, work_ms: int
) -> tuple[int, int, dict[str, Any]]:
    """w1 takes lock L and is SIGSTOPped inside a write's critical section (``work_ms`` long);
    meanwhile w2 takes L and writes ``w2-1`` to ``sink``/k; then w1 resumes and its write
    ``w1-1`` goes out. Returns w1's epoch, w2's epoch and the answer w1's write got."""
    old = ask(deployment, "w1", {"op": "acquire", "lock": "L", "wait": 10})["epoch"]
    request = {"op": "write", "lock": "L", "sink": sink, "key": "k"}
    replies: list[dict[str, Any]] = []
    stale = {**request, "epoch": old, "id": "w1-1", "work_ms": work_ms}
    writer = threading.Thread(target=lambda: replies.append(ask(deployment, "w1", stale)))
    writer.start()
    wait_until(lambda: "w1-1" in ask(deployment, "w1", {"op": "holds"})["working"], "w1's write")
    w1 = cluster.nodes["w1"]
    w1.signal(w1.daemon("agent"), signal.SIGSTOP)
    try:
        new = ask(deployment, "w2", {"op": "acquire", "lock": "L", "wait": 30})["epoch"]
        assert ask(deployment, "w2", {**request, "epoch": new, "id": "w2-1"}) == {"ok": True}
    finally:
        w1.signal(w1.daemon("agent"), signal.SIGCONT)
    writer.join(timeout=60)
    return old, new, replies[0]
