"""Pure parts of the Docker backend: topology rules, apt mirror parsing, recipe hashes, stats."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.node.docker import images
from harness.node.docker.cluster import (
    Cluster,
    ClusterError,
    NodeSpec,
    default_topology,
    new_run_id,
)
from harness.node.docker.node import CallStats


def test_default_topology_is_lock_store_and_workers() -> None:
    assert default_topology(2) == [
        NodeSpec("l1", "lock"),
        NodeSpec("s1", "store"),
        NodeSpec("w1", "worker"),
        NodeSpec("w2", "worker"),
    ]
    with pytest.raises(ClusterError, match="at least one worker"):
        default_topology(0)


def test_bad_specs_and_topologies_are_refused() -> None:
    with pytest.raises(ClusterError, match="not one of"):
        NodeSpec("w1", "boss")
    with pytest.raises(ClusterError, match="valid hostname"):
        NodeSpec("W_1", "worker")
    with pytest.raises(ClusterError, match="unique"):
        Cluster("r1", [NodeSpec("w1", "worker"), NodeSpec("w1", "worker")])
    with pytest.raises(ClusterError, match="run id"):
        Cluster("Bad Id", default_topology())
    assert Cluster(new_run_id(), default_topology()).nodes == {}


def _apt(tmp_path: Path, sources_list: str = "", **parts: str) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(sources_list)
    for name, text in parts.items():
        (tmp_path / "sources.list.d" / name.replace("_", ".")).write_text(text)
    return tmp_path


def test_mirror_from_deb822_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FENCECHECK_DEBIAN_MIRROR", raising=False)
    apt = _apt(
        tmp_path,
        debian_sources=(
            "Types: deb\n# a comment\nURIs: http://deb.debian.org/debian-security\n"
            "Suites: bookworm-security\nComponents: main\n\n"
            "Types: deb deb-src\nURIs: http://mirror.example/debian/\n"
            "Suites: bookworm bookworm-updates\nComponents: main\n"
        ),
    )
    assert images.debian_mirror("bookworm", apt) == "http://mirror.example/debian"


def test_mirror_from_one_line_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FENCECHECK_DEBIAN_MIRROR", raising=False)
    apt = _apt(
        tmp_path,
        "# deb http://old.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main contrib\n",
    )
    assert images.debian_mirror("bookworm", apt) == "http://one.example/debian"


def test_disabled_or_missing_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FENCECHECK_DEBIAN_MIRROR", raising=False)
    apt = _apt(
        tmp_path,
        debian_sources="Enabled: no\nTypes: deb\nURIs: http://x.example/debian\nSuites: bookworm\n",
    )
    with pytest.raises(images.ImageError, match="FENCECHECK_DEBIAN_MIRROR"):
        images.debian_mirror("bookworm", apt)
    monkeypatch.setenv("FENCECHECK_DEBIAN_MIRROR", "http://env.example/debian/")
    assert images.debian_mirror("bookworm", apt) == "http://env.example/debian"


def test_tags_follow_the_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recipes = tmp_path / "docker"
    shutil.copytree(images.RECIPES, recipes)
    monkeypatch.setattr(images, "RECIPES", recipes)
    base, node = images.base_tag(), images.node_tag()
    assert base.startswith("fencecheck-base:") and len(base.split(":")[1]) == 12
    assert (images.base_tag(), images.node_tag()) == (base, node)

    with (recipes / "node" / "packages.txt").open("a") as packages:
        packages.write("redis-server\n")
    assert (images.base_tag(), images.node_tag()) != (base, node)
    assert images.base_tag() == base

    base_json = recipes / "base.json"
    base_json.write_text(base_json.read_text().replace("minbase", "buildd"))
    assert images.base_tag() != base


def test_call_stats_summarise_each_operation() -> None:
    stats = CallStats()
    for value in (0.3, 0.1, 0.2):
        stats.add("run", value)
    with stats.timed("signal"):
        pass
    assert stats.ops() == ["run", "signal"]
    assert stats.summary()["run"] == {"count": 3.0, "median": 0.2, "p99": 0.3}
    stats.clear()
    assert stats.ops() == []
