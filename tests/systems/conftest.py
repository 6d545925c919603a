"""Fixtures for the systems tests: the reference system as local processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.localcluster import (
    LocalCluster,
    MakeCluster,
    build_cluster,
    stop_cluster,
)


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    """A factory: ``make_cluster(workers=2, lease_ttl=0.5, lock_delay=0.0, bugs=())``."""
    made: list[LocalCluster] = []

    def make(**options: Any) -> LocalCluster:
        cluster = build_cluster(tmp_path, len(made), **options)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        stop_cluster(cluster)
