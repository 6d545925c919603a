"""The spec ``fencecheck run`` builds from a command line, without running it."""

from __future__ import annotations

import pytest

import harness.cli.run as run_cli
from harness.cli import main
from harness.record.spec import TestSpec
from harness.run.plan import RunError


class _Parsed(RunError):
    """Raised by the stand-in for the runner, to stop once the CLI built its spec."""


def spec_of(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> TestSpec:
    """The spec ``fencecheck run`` builds from ``argv`` (``["run", ...]``, or a whole command
    starting with ``fencecheck``); the runner is replaced by a catcher."""
    caught: list[TestSpec] = []

    def catch(spec: TestSpec, **_: object) -> None:
        caught.append(spec)
        raise _Parsed("parsed")

    monkeypatch.setattr(run_cli, "run_test", catch)
    with pytest.raises(SystemExit):
        main(argv[1:] if argv[0] == "fencecheck" else argv)
    (spec,) = caught
    return spec
