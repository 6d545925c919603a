"""The one shared connection to the Docker engine.

Every part of the Docker backend (images, cluster, nodes, doctor) talks to the engine through the
client returned here, so connection settings and the "engine not reachable" message live in one
place.
"""

from __future__ import annotations

import functools

import docker
import docker.errors
import requests.exceptions

__all__ = ["EngineError", "engine", "engine_problem"]

# Parallel create/start/exec from many threads: the default pool of 10 connections would make
# threads queue behind one another.
_POOL_SIZE = 64
# Long commands run through exec and block on the API socket; a hung engine must still fail.
_API_TIMEOUT_S = 600
# The first contact answers at once from a healthy engine: one that accepts and never answers
# (wedged, or not an engine at all) is reported after this long rather than after 600 s.
_CONNECT_TIMEOUT_S = 5


class EngineError(RuntimeError):
    """The Docker engine cannot be reached; the message says how to start it."""


@functools.cache
def engine() -> docker.DockerClient:
    """A client for the local Docker engine (``DOCKER_HOST`` and friends are honoured).

    Raises :class:`EngineError` with the fix when the engine does not answer.
    """
    try:
        client = docker.from_env(max_pool_size=_POOL_SIZE, timeout=_CONNECT_TIMEOUT_S)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as problem:
        raise EngineError(
            f"the Docker engine is not reachable or does not answer ({problem}); run "
            "`scripts/install.sh` (installs docker.io and starts dockerd), or start or restart "
            "dockerd and retry"
        ) from problem
    client.api.timeout = _API_TIMEOUT_S
    return client


def engine_problem() -> str | None:
    """Why no engine answers (the fix included), or ``None`` when one does: for callers that
    skip rather than fail (the test suite, the pytest plugin)."""
    try:
        engine()
    except EngineError as problem:
        return str(problem)
    return None
