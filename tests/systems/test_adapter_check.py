"""``fencecheck adapter check``: the contract battery passes the reference system and names the
problem of each broken adapter, on real containers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.run.contract import ContractReport, check_adapter
from systems import System
from tests.support.broken_adapters import (
    LockForgetsEpochs,
    OpenToOutsiders,
    StoreIgnoresEpochs,
    UnfencedSinkClaimedFenced,
)

pytestmark = pytest.mark.docker


def failures(report: ContractReport) -> dict[str, str]:
    """Failed item name -> what was seen."""
    return {item.name: item.detail for item in report.failed()}


# Every shipped system: the contract includes refusing a client without the run's secret.
@pytest.mark.parametrize("name", ["reference", "noop", "etcd", "redis", "zookeeper"])
def test_a_system_passes_through_the_command_line(
    registered_here: None, node_image: str, name: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "adapter", "check", name],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"adapter {name} passes the contract" in done.stdout
    assert "✗" not in done.stdout
    assert "✓ a client without the run's secret is refused" in done.stdout
    assert "✓ the holders' traffic passes through the write-path proxy" in done.stdout


@pytest.mark.parametrize(
    ("adapter", "item", "seen", "fix"),
    [
        (
            StoreIgnoresEpochs(),
            "a write with an older epoch is refused by every fenced sink",
            "store answered accepted to stale epoch",
            "Refused(STALE)",
        ),
        (
            LockForgetsEpochs(),
            "epochs survive a restart of lock-server on l1",
            "granted after a restart of",
            "epoch counters on disk",
        ),
        (
            UnfencedSinkClaimedFenced(),
            "a write with an older epoch is refused by every fenced sink",
            "store-batch answered accepted to stale epoch",
            "declare it fenced=False",
        ),
        (
            OpenToOutsiders(),
            "a client without the run's secret is refused",
            "the outsider's write store was accepted",
            "never the secret itself",
        ),
    ],
    ids=[
        "store-ignores-epochs",
        "lock-forgets-epochs",
        "unfenced-sink-claimed-fenced",
        "open-to-outsiders",
    ],
)
def test_a_broken_adapter_fails_the_item_it_breaks_with_the_fix(
    node_image: str, adapter: System, item: str, seen: str, fix: str
) -> None:
    report = check_adapter(adapter)
    assert not report.ok
    failed = failures(report)
    assert item in failed, failed
    assert seen in failed[item]
    assert fix in next(i.fix for i in report.items if i.name == item)
