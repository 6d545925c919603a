"""A five-node cluster shared by the cluster tests that do not change its topology."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.node.docker.cluster import Cluster, default_topology, new_run_id


@pytest.fixture(scope="session")
def cluster(node_image: str) -> Iterator[Cluster]:
    """``l1``, ``s1``, ``w1``..``w3``, up for the whole session."""
    with Cluster(f"test-{new_run_id()}", default_topology(3), image=node_image) as running:
        yield running
