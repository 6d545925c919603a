"""sshd containers acting as real hosts (:mod:`harness.node.ssh.containers`) for the SSH tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.node.ssh.containers import SshdHosts, sshd_hosts

ROLES = ("lock", "store", "worker", "worker")
"""The test hosts' roles: l1, s1, w1, w2."""


@pytest.fixture(scope="module")
def test_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdHosts]:
    """Four sshd containers (lock, store, two workers) and their hosts file; removed afterwards."""
    with sshd_hosts(ROLES, tmp_path_factory.mktemp("hosts")) as hosts:
        yield hosts
