"""Fixtures for the systems tests: the reference system as local processes on loopback."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from systems import ENTRY_POINT_GROUP
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


@pytest.fixture
def registered_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This tree's ``fencecheck.systems`` entry points, as ``pip install -e .`` registers them.

    The installed metadata may come from another checkout; a stand-in ``dist-info`` on
    ``sys.path`` (and on ``PYTHONPATH``, for subprocesses) lists what this tree's pyproject says.
    """
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    systems = project["project"]["entry-points"][ENTRY_POINT_GROUP]
    info = tmp_path / "site" / "fencecheck_this_tree-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fencecheck-this-tree\nVersion: 0\n"
    )
    lines = "".join(f"{name} = {target}\n" for name, target in systems.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{lines}")
    monkeypatch.syspath_prepend(str(info.parent))
    here = str(Path(__file__).parents[2])
    paths = [here, str(info.parent), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
