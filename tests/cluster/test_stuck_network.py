"""A network the engine will not remove (stale endpoints) is reported with its fix, and gc still
removes every other leftover run first. The engine's refusal is reproduced by a network object
whose removal answers as dockerd does; no engine is needed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import docker.errors
import pytest

from harness.node.docker import cluster
from harness.node.docker.cluster import ClusterError, RunInfo

_REFUSAL = 'Forbidden ("error while removing network: network x has active endpoints")'


@dataclass
class _RefusingNetwork:
    """Answers ``remove`` like dockerd with stale endpoints, ``refusals`` times."""

    refusals: int
    name: str = "fencecheck-test-net"
    attrs: dict[str, Any] = field(default_factory=lambda: {"Containers": {"abc": {}}})
    disconnected: list[str] = field(default_factory=list)

    def remove(self) -> None:
        if self.refusals:
            self.refusals -= 1
            raise docker.errors.APIError(_REFUSAL)

    def disconnect(self, container: str, force: bool = False) -> None:
        assert force
        self.disconnected.append(container)


def test_a_forced_disconnect_frees_a_network_with_stale_endpoints() -> None:
    network = _RefusingNetwork(refusals=1)
    assert cluster._remove_network(network) == 1  # type: ignore[arg-type]
    assert network.disconnected == ["abc"]


def test_a_network_the_engine_keeps_names_the_engine_restart() -> None:
    with pytest.raises(ClusterError, match="restart the engine") as caught:
        cluster._remove_network(_RefusingNetwork(refusals=2))  # type: ignore[arg-type]
    assert "fencecheck-test-net" in str(caught.value)


def test_gc_removes_the_other_runs_before_reporting_the_stuck_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run(run_id: str) -> RunInfo:
        return RunInfo(run_id, (), (), "2026", "x:1:1", False, False, True, "")

    removed: list[str] = []

    def remove_run(run_id: str) -> int:
        if run_id == "stuck":
            raise ClusterError("the Docker engine will not remove network stuck-net")
        removed.append(run_id)
        return 2

    monkeypatch.setattr(cluster, "list_runs", lambda: [run("a"), run("stuck"), run("b")])
    monkeypatch.setattr(cluster, "remove_run", remove_run)
    with pytest.raises(ClusterError, match=r"removed 4 containers and networks, but .*stuck-net"):
        cluster.gc()
    assert removed == ["a", "b"]
