"""The no-op system on real containers: a short run of holders under pauses on it is checked valid
(its adapter contract: ``test_adapter_check.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness.record import read_history
from harness.record.spec import TestSpec
from harness.run.runner import run_test

pytestmark = pytest.mark.docker


def test_a_run_under_pauses_is_valid_and_its_fence_refused_stale_writes(
    registered_here: None, node_image: str, tmp_path: Path
) -> None:
    spec = TestSpec(
        system="noop",
        workers=3,
        nemeses=("pause",),
        ttl=0.5,
        time_limit=12.0,
        seed=7,
        store=tmp_path,
        name="noop-docker",
    )
    outcome = run_test(spec, console=Console(quiet=True), progress=False)
    assert outcome.error is None, outcome.error
    assert outcome.result.valid is True, outcome.result
    events = list(read_history(outcome.run_dir.history))
    assert any(e.f == "write" and e.type == "ok" for e in events)
    assert any(e.f == "write" and e.error == "stale-epoch" for e in events)
