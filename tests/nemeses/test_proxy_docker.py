"""The write-path proxy on real containers: inserted by the REDIRECT, each kind confirmed by the
proxy's own report and felt by a client on the worker; and a run that catches the switch a hold
exposes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.node import DockerNode
from harness.node.wait import wait_for
from harness.run.proxies import start_proxies, stop_proxies, traffic
from nemeses.protocol import Fault
from nemeses.proxy import ProxyNemesis
from systems import deploy
from systems.reference import ReferenceSystem

pytestmark = pytest.mark.docker

PORT = 7002
# A line server on s1 that answers every request and counts what it got.
SERVER = """
import sys
sys.path.insert(0, "/opt/fencecheck")
from harness.nodeside import wire
seen = []
def answer(request):
    seen.append(request.get("id"))
    return {"ok": True, "n": len(seen), "ids": seen[-5:]}
wire.serve("0.0.0.0", 7002, answer, "echo")
"""
# One request from the worker, as a holder client sends it: its answer or its error, and when.
CLIENT = """
import json, socket, sys, time
began = time.monotonic()
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[4])) as s:
        s.sendall(sys.argv[3].encode() + b"\\n")
        reply = s.makefile("rb").readline()
        out = {"reply": json.loads(reply) if reply else None}
except OSError as problem:
    out = {"error": type(problem).__name__}
out["seconds"] = time.monotonic() - began
print(json.dumps(out))
"""
WRITE = json.dumps({"op": "write", "id": "w1-7", "epoch": 3, "lock": "L", "sink": "store"})


@pytest.fixture(scope="module")
def nodes(node_image: str) -> Iterator[dict[str, DockerNode]]:
    specs = [NodeSpec("s1", "store"), NodeSpec("w1", "worker")]
    with Cluster(f"test-proxy-{new_run_id()}", specs, image=node_image) as cluster:
        found = {name: cluster.node(name) for name in ("s1", "w1")}
        deploy.install(found["s1"], deploy.nodeside_files())
        found["s1"].start_daemon("echo", ["python3", "-c", SERVER])
        wait_for(found["s1"], deploy.Pings(PORT))
        start_proxies(ReferenceSystem(), found)
        yield found
        stop_proxies(found)


def send(nodes: dict[str, DockerNode], line: str = WRITE, timeout: float = 10.0) -> Any:
    """One request from w1 to s1's address (the client knows nothing of the proxy)."""
    done = nodes["w1"].run(
        ["python3", "-c", CLIENT, nodes["s1"].ip, str(PORT), line, str(timeout)],
        timeout=timeout + 10,
    )
    return json.loads(done.stdout)


def test_each_kind_is_felt_by_the_worker_and_confirmed_by_the_proxy(
    nodes: dict[str, DockerNode],
) -> None:
    assert send(nodes)["reply"]["ok"]
    counted = traffic(nodes["w1"])
    assert counted["bytes"]["store"]["request"] > 0  # the redirect took the client's connection

    hold, fault = ProxyNemesis("hold"), Fault("hold", ("w1",), {"to": "any"})
    hold.setup(nodes)
    hold.invoke("start-hold", fault)
    answers: list[Any] = []
    client = threading.Thread(target=lambda: answers.append(send(nodes)))
    client.start()
    time.sleep(1.5)
    assert not answers  # held: no answer yet
    report = hold.invoke("stop-hold", fault)
    client.join(20)
    assert answers[0]["reply"]["ok"] and answers[0]["seconds"] >= 1.0
    (held,) = report["proxy"]["w1"]["events"]
    assert held["requests"][0]["id"] == "w1-7"
    assert held["delivered"] - held["from"] >= 1.0  # the client starts in a docker exec
    assert "w1's write w1-7 (epoch 3) was held" in report["said"]

    delay = ProxyNemesis("delay")
    delay.setup(nodes)
    slow = Fault("delay", ("w1",), {"to": "store", "direction": "reply", "latency_s": 0.5})
    delay.invoke("start-delay", slow)
    assert send(nodes)["seconds"] >= 0.5
    assert delay.invoke("stop-delay", slow)["proxy"]["w1"]["chunks"] >= 1

    reset = ProxyNemesis("reset")
    reset.setup(nodes)
    cut = Fault("reset", ("w1",), {"to": "store", "direction": "request", "count": 1})
    reset.invoke("start-reset", cut)
    assert send(nodes)["error"] in ("ConnectionResetError", "ConnectionAbortedError")
    assert reset.invoke("stop-reset", cut)["proxy"]["w1"]["events"][0]["what"] == "reset"

    loss = ProxyNemesis("loss")
    loss.setup(nodes)
    lost = Fault("loss", ("w1",), {"mode": "connections", "p": 1.0})
    loss.invoke("start-loss", lost)
    assert send(nodes, timeout=1.0)["error"] == "TimeoutError"
    assert loss.invoke("stop-loss", lost)["proxy"]["w1"]["events"][0]["what"] == (
        "dropped-connection"
    )

    replay = ProxyNemesis("replay")
    replay.setup(nodes)
    again = Fault("replay", ("w1",), {"to": "store", "after_s": 0.2, "count": 1})
    replay.invoke("start-replay", again)
    first = send(
        nodes, json.dumps({"op": "write", "id": "w1-9", "epoch": 3}, separators=(",", ":"))
    )
    time.sleep(1.0)
    (event,) = replay.invoke("stop-replay", again)["proxy"]["w1"]["events"]
    assert event["request"]["id"] == "w1-9"
    assert event["reply"]["ok"] and event["replayed"] - event["delivered"] >= 0.2
    assert first["reply"]["ok"]
    for nemesis in (hold, delay, reset, loss, replay):
        assert nemesis.heal().ok


def test_a_hold_across_a_takeover_catches_a_store_that_trusts_a_connection(
    node_image: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "harness", "run", "--bug", "fence-per-connection"),
            *("--time-limit", "15", "--seed", "3", "--store", str(tmp_path), "--no-progress"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stale-write" in done.stdout
    assert "was held" in done.stdout
