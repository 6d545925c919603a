"""``--acquire try``: a holder asks for a lease in attempts that do not wait, each its own
operation in the history, so the attempt that is granted is short in real time."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from harness.record import HistoryWriter, read_history
from harness.record.spec import SpecError, TestSpec
from harness.run.agent_link import AgentLink
from harness.run.holder_ops import TRY_GAP, HolderBoard, HolderOps
from harness.run.plan import rerun_command
from harness.run.recorder import Recorder
from tests.support.localcluster import MakeCluster

TTL = 1.0


def holder_ops(cluster_endpoint: tuple[str, int], token: str, writer: HistoryWriter) -> HolderOps:
    host, port = cluster_endpoint
    return HolderOps(
        node="w2",
        process=1,
        process_stride=2,
        link=AgentLink(host, port, token=token),
        recorder=Recorder(writer),
        seed=1,
        stop=threading.Event(),
        op_timeout=10.0,
        acquire_wait=3 * TTL,
        work_ms=0,
        board=HolderBoard(),
        lease_ttl=TTL,
        tries=True,
    )


def test_each_try_is_an_operation_and_the_granted_one_does_not_wait(
    make_cluster: MakeCluster, tmp_path: Path
) -> None:
    cluster = make_cluster(workers=2, lease_ttl=TTL)
    assert cluster.agent("w1", {"op": "acquire", "lock": "L", "wait": 5.0})["ok"]
    endpoint = cluster.agents.endpoints["w2"]
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        ops = holder_ops((endpoint.host, endpoint.port), cluster.agents.token, writer)
        release = threading.Timer(0.5, cluster.agent, ("w1", {"op": "release", "lock": "L"}))
        release.start()
        try:
            granted = ops.acquire("L")
        finally:
            release.join()
        ops.close()
    assert granted.ok
    events = list(read_history(path))
    assert all(event.f == "acquire" for event in events)
    tries = [event for event in events if event.type != "invoke"]
    busy, last = tries[:-1], tries[-1]
    # Half a second held, a try every TRY_GAP TTLs: several refused, each with its own invoke.
    assert len(busy) >= 0.5 / (TRY_GAP * TTL) / 2
    assert all(event.type == "fail" and event.error == "timeout" for event in busy)
    assert len(events) == 2 * len(tries)
    assert last.type == "ok" and last.value["epoch"] == 2
    invoked = events[-2]
    assert invoked.type == "invoke"
    assert last.time - invoked.time < 0.5 * 1e9, "the granted try did not wait for the lock"


def test_the_acquire_mode_is_checked_and_carried_by_thererun_command() -> None:
    with pytest.raises(SpecError, match="--acquire 'poll' is not a way to ask for a lease"):
        TestSpec(acquire="poll").check()
    assert "--acquire try" in " ".join(rerun_command(TestSpec(acquire="try", seed=1)))
    assert "--acquire" not in rerun_command(TestSpec(seed=1))
