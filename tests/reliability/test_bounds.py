"""Specs within the documented limits stay bounded: the largest allowed schedule is small, and the
largest allowed final read runs its reads in parallel."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from harness.node.docker.cluster import default_topology
from harness.record import HistoryWriter, read_history
from harness.record.spec import LIMITS, TestSpec
from harness.run.plan import schedule_for
from harness.run.recorder import Recorder
from harness.run.runner import _final_readers, _final_reads

# The reference system as local processes on loopback (no Docker): the systems tests' helper.
from tests.support.localcluster import build_cluster, stop_cluster


def test_the_longest_allowed_run_has_a_schedule_of_bounded_size() -> None:
    ttl = 86400 / 100_000
    spec = TestSpec(ttl=ttl, time_limit=86400, nemeses=("pause", "kill"), seed=1)
    spec.check()
    roles = {node.name: node.role for node in default_topology(int(LIMITS["workers"].high))}
    schedule = schedule_for(spec, roles, ttl)
    # A window per (fault + gap) ≥ 1.4 TTL at most: the schedule cannot outgrow the TTL count.
    assert 0 < len(schedule.windows) <= 100_000 / 1.4
    assert len(json.dumps(schedule.to_json())) < 100 * 2**20


def test_final_reads_run_in_parallel_and_read_every_key_once(tmp_path: Path) -> None:
    cluster = build_cluster(tmp_path, 0, workers=2, lease_ttl=0.5)
    try:
        history = tmp_path / "history.jsonl"
        reads = [("store", f"k{n}") for n in range(200)]
        with HistoryWriter(history) as writer:
            recorder = Recorder(writer)
            readers = _final_readers(cluster.agents, 0.5, recorder, TestSpec(), 10.0, len(reads))
            _final_reads(readers, reads, recorder.stopped)
    finally:
        stop_cluster(cluster)
    events = list(read_history(history))
    done = Counter(e.value["key"] for e in events if e.type == "ok" and e.f == "read")
    assert done == Counter({key: 1 for _, key in reads})
    open_reads = most_open = 0
    for event in events:
        open_reads += 1 if event.type == "invoke" else -1
        most_open = max(most_open, open_reads)
    # More reads in flight at once than there are agents: the readers did not queue one by one.
    assert most_open > len(cluster.agents.endpoints)
