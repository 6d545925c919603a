"""Cluster lifecycle on a real engine: teardown leaves nothing, on success, error, SIGTERM; gc."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from harness.node.docker.cluster import (
    Cluster,
    ClusterError,
    NodeSpec,
    gc,
    list_runs,
    new_run_id,
)

pytestmark = pytest.mark.docker

_PAIR = [NodeSpec("l1", "lock"), NodeSpec("w1", "worker")]


def _leftovers(run_id: str) -> tuple[int, int]:
    """(containers, networks) the engine still has for ``run_id``."""
    for run in list_runs():
        if run.run_id == run_id:
            return len(run.nodes), int(run.network)
    return 0, 0


def _script(run_id: str, image: str, after_up: str) -> str:
    return textwrap.dedent(
        f"""
        import os, signal, sys, time
        from harness.node.docker.cluster import Cluster, NodeSpec
        # A suite started in the background (`cmd &` in a script) hands its children SIGINT
        # ignored; the child stands for a run in a terminal, where Ctrl-C raises.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with Cluster({run_id!r}, [NodeSpec("l1", "lock"), NodeSpec("w1", "worker")],
                     image={image!r}):
            print("up", flush=True)
            {after_up}
        """
    )


def test_teardown_removes_containers_and_network(node_image: str) -> None:
    run_id = f"test-{new_run_id()}"
    with Cluster(run_id, _PAIR, image=node_image) as cluster:
        assert _leftovers(run_id) == (2, 1)
        assert cluster.node("w1").run(["getent", "hosts", "l1"]).ok
    assert _leftovers(run_id) == (0, 0)
    assert cluster.nodes == {}


def test_teardown_happens_on_an_exception(node_image: str) -> None:
    run_id = f"test-{new_run_id()}"
    with pytest.raises(RuntimeError, match="boom"), Cluster(run_id, _PAIR, image=node_image):
        raise RuntimeError("boom")
    assert _leftovers(run_id) == (0, 0)


def test_a_failed_start_tears_down_what_was_created(node_image: str) -> None:
    run_id = f"test-{new_run_id()}"
    missing = Cluster(run_id, _PAIR, image="fencecheck-node:does-not-exist")
    with pytest.raises(ClusterError, match="fencecheck images build"), missing:
        pass
    assert _leftovers(run_id) == (0, 0)


@pytest.mark.parametrize(
    ("signum", "exit_code"),
    [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)],
    ids=["sigterm", "ctrl-c"],
)
def test_a_signal_tears_the_cluster_down(node_image: str, signum: int, exit_code: int) -> None:
    run_id = f"test-{new_run_id()}"
    child = subprocess.Popen(
        [sys.executable, "-c", _script(run_id, node_image, "time.sleep(600)")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "up\n"
    assert _leftovers(run_id) == (2, 1)
    child.send_signal(signum)
    assert child.wait(timeout=60) == exit_code
    assert _leftovers(run_id) == (0, 0)


def test_gc_removes_an_orphaned_cluster_and_spares_live_ones(
    node_image: str, cluster: Cluster
) -> None:
    run_id = f"test-{new_run_id()}"
    # os._exit skips every cleanup: the cluster is orphaned exactly as by a crash.
    crashed = subprocess.run(
        [sys.executable, "-c", _script(run_id, node_image, "os._exit(9)")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert crashed.returncode == 9, crashed.stderr
    assert _leftovers(run_id) == (2, 1)
    orphan = next(run for run in list_runs() if run.run_id == run_id)
    assert not orphan.owner_alive
    try:
        assert gc() >= 3
    except ClusterError as problem:
        # A network some other run left stuck on a shared engine is reported, after gc removed
        # everything else; this test is about its own orphan.
        assert "will not remove network" in str(problem) and run_id not in str(problem)
    assert _leftovers(run_id) == (0, 0)
    assert _leftovers(cluster.run_id) == (5, 1)


def test_a_clashing_run_id_leaves_the_running_cluster_alone(
    node_image: str, cluster: Cluster
) -> None:
    clash = Cluster(cluster.run_id, _PAIR, image=node_image)
    with pytest.raises(ClusterError, match="cannot create network"), clash:
        pass
    assert _leftovers(cluster.run_id) == (5, 1)
