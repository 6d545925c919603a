"""Per-system node images: a system's package list decides its image's recipe-hashed tag."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.node.docker.images import SYSTEM_REPOSITORY, ImageError, node_tag, system_tag
from systems import AdapterError, read_packages
from systems.noop import NoopSystem
from systems.reference import ReferenceSystem


def test_a_system_needing_nothing_more_runs_on_the_node_image() -> None:
    assert NoopSystem().packages() == ()
    assert system_tag(()) == node_tag()


def test_the_reference_system_adds_only_what_its_lazy_file_system_needs() -> None:
    assert set(ReferenceSystem().packages()) == {"python3-pyfuse3", "fuse3"}


def test_the_tag_follows_the_package_list_and_nothing_else() -> None:
    tag = system_tag(["etcd-server", "etcd-client"])
    assert tag.startswith(f"{SYSTEM_REPOSITORY}:")
    assert system_tag(["etcd-client", "etcd-server", "etcd-client"]) == tag  # a set, in any order
    assert system_tag(["etcd-server"]) != tag


def test_a_package_list_file_is_one_name_a_line_with_comments(tmp_path: Path) -> None:
    listed = tmp_path / "packages.txt"
    listed.write_text("# what the nodes need\nredis-server  # the store\n\n  redis-tools\n")
    assert read_packages(listed) == ("redis-server", "redis-tools")
    with pytest.raises(AdapterError, match="cannot read the package list"):
        read_packages(tmp_path / "missing.txt")


def test_a_name_that_is_no_debian_package_is_refused_with_the_file_to_fix() -> None:
    with pytest.raises(ImageError, match=r"packages\.txt"):
        system_tag(["redis server; rm -rf /"])
