"""Whose cluster a cluster is, on a shared engine where many people are root through sudo: the
person who invoked sudo, not the uid (a bare-uid label of an older run still counts by uid)."""

from __future__ import annotations

import os

import pytest

from harness.node.docker.cluster import RunInfo


def _run(user: str) -> RunInfo:
    return RunInfo(
        run_id="r",
        nodes=("l1",),
        states=("running",),
        created="",
        owner="",
        owner_alive=False,
        kept=True,
        network=True,
        user=user,
    )


def test_a_cluster_is_yours_only_if_you_made_it(monkeypatch: pytest.MonkeyPatch) -> None:
    uid = os.getuid()
    monkeypatch.setenv("SUDO_USER", "alice")
    assert _run(f"{uid}:alice").mine
    assert not _run(f"{uid}:bob").mine
    assert _run(str(uid)).mine  # a run labelled before the person was
    monkeypatch.setenv("SUDO_USER", "bob")
    assert not _run(f"{uid}:alice").mine
