"""The one shared connection to the Docker engine.

Every part of the Docker backend (images, cluster, nodes, doctor) talks to the engine through the
client returned here, so connection settings, the "engine not reachable" message and the bound on
each call live in one place.

Each call the engine does not answer within :func:`call_timeout` seconds (120 by default,
``FENCECHECK_ENGINE_TIMEOUT`` to change it) marks the engine lost: that call and every later one
raise :class:`EngineError` at once, so a run whose engine stopped answering ends within a couple
of minutes (healed where it can be, its history checked, the command to remove what is left
printed) instead of waiting out every call in turn. Image builds and imports stream for minutes
and use their own client (:func:`builder`).
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import docker
import docker.errors
import requests
import requests.exceptions

__all__ = ["EngineError", "builder", "call_timeout", "engine", "engine_problem"]

# Parallel create/start/exec from many threads: the default pool of 10 connections would make
# threads queue behind one another.
_POOL_SIZE = 64
_DEFAULT_CALL_TIMEOUT_S = 120.0
"""A healthy engine answers any call but a build in seconds, even under load; the longest
command a shipped system runs through exec is bounded at 60 s (ZooKeeper's readiness), so twice
that is surely an engine that stopped answering."""
_BUILD_TIMEOUT_S = 1800
"""An image build or import streams for minutes; silence this long means the engine is lost."""
# The first contact answers at once from a healthy engine: one that accepts and never answers
# (wedged, or not an engine at all) is reported after this long rather than after a minute.
_CONNECT_TIMEOUT_S = 5


class EngineError(RuntimeError):
    """The Docker engine cannot be reached or stopped answering; the message says what to do."""


def call_timeout() -> float:
    """Seconds one engine call may take (``FENCECHECK_ENGINE_TIMEOUT``, default 120)."""
    try:
        seconds = float(os.environ.get("FENCECHECK_ENGINE_TIMEOUT", _DEFAULT_CALL_TIMEOUT_S))
    except ValueError:
        return _DEFAULT_CALL_TIMEOUT_S
    return seconds if seconds > 0 else _DEFAULT_CALL_TIMEOUT_S


def _connect(timeout: int) -> docker.DockerClient:
    try:
        client = docker.from_env(max_pool_size=_POOL_SIZE, timeout=_CONNECT_TIMEOUT_S)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as problem:
        raise EngineError(
            f"the Docker engine is not reachable or does not answer ({problem}); run "
            "`scripts/install.sh` (installs docker.io and starts dockerd), or start or restart "
            "dockerd and retry"
        ) from problem
    client.api.timeout = timeout
    return client


@functools.cache
def engine() -> docker.DockerClient:
    """A client for the local Docker engine (``DOCKER_HOST`` and friends are honoured), each of
    its calls bounded (see the module documentation).

    Raises :class:`EngineError` with the fix when the engine does not answer.
    """
    client = _connect(max(1, round(call_timeout())))
    _bound(client.api)
    return client


@functools.cache
def builder() -> docker.DockerClient:
    """A client for image builds and imports: calls that stream for minutes."""
    return _connect(_BUILD_TIMEOUT_S)


def _bound(api: docker.APIClient) -> None:
    """Make ``api`` fail at once after its first call the engine did not answer in time."""
    lost: list[str] = []
    guard = threading.Lock()
    send = api.send

    def bounded_send(request: requests.PreparedRequest, **options: Any) -> requests.Response:
        if lost:
            raise EngineError(lost[0])
        try:
            return send(request, **options)
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as problem:
            with guard:
                if not lost:
                    lost.append(
                        f"the Docker engine stopped answering ({type(problem).__name__} on "
                        f"{request.method} {request.path_url.split('?')[0]} after at most "
                        f"{call_timeout():g} s); restart it (systemctl restart docker)"
                    )
            raise EngineError(lost[0]) from problem

    api.send = bounded_send  # type: ignore[method-assign]


def engine_problem() -> str | None:
    """Why no engine answers (the fix included), or ``None`` when one does: for callers that
    skip rather than fail (the test suite, the pytest plugin)."""
    try:
        engine()
    except EngineError as problem:
        return str(problem)
    return None
