"""Fixtures shared by every test area.

Tests marked ``docker`` need a reachable engine. Without one they are skipped with the reason,
except under ``CI=true``, where a missing engine must fail the run instead of hiding it.
"""

from __future__ import annotations

import os

import pytest

from harness.node.docker.engine import engine_problem


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``docker`` tests when no engine answers (never under CI=true)."""
    if not any(item.get_closest_marker("docker") for item in items):
        return
    problem = engine_problem()
    if problem is None or os.environ.get("CI", "").lower() == "true":
        return
    skip = pytest.mark.skip(reason=f"no Docker engine: {problem}")
    for item in items:
        if item.get_closest_marker("docker"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def node_image() -> str:
    """The current node image tag, built once per session if its recipe changed."""
    from harness.node.docker.images import node_image as current_node_image

    return current_node_image()
