"""``adapter check``'s ``seq`` item and skipped items, against agents answering as a sink would,
and the verdict's and report's warning: a claimed ``seq`` must be on every accepted write and read
entry, rising across keys; a fenced sink without it is a warning; an item about a part the system
lacks is never a check mark."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from harness.cli.adapter import render_report
from harness.record import Sink
from harness.record.results import StoredResults
from harness.record.verdict import UNJUDGED_ACROSS_KEYS
from harness.report.render import _seq_warnings
from harness.run.contract import ContractReport, _Agents, _Battery
from systems import SystemConfig
from tests.support.fake import FakeSystem


class NumberedSink(FakeSystem):
    """Its one fenced sink claims ``seq`` (``claims``) or not."""

    def __init__(self, claims: bool) -> None:
        super().__init__()
        self.claims = claims

    def inventory(self, config: SystemConfig) -> tuple[Sink, ...]:
        """One fenced sink, ``seq`` as claimed."""
        return (Sink("fake", fenced=True, seq=self.claims),)


class SinkAgents(_Agents):
    """Agents in front of one append-only sink that numbers writes across keys with ``step``
    (0: it reports no ``seq``; negative: its order runs backwards)."""

    def __init__(self, step: int) -> None:
        self.workers = ["w1"]
        self.step = step
        self.count = 100
        self.keys: dict[str, list[dict[str, Any]]] = {}

    def ask(self, worker: str, request: dict[str, Any]) -> dict[str, Any]:
        entries = self.keys.get(request["key"], [])
        return {"ok": True, "entries": entries}

    def write(self, worker: str, lock: str, epoch: int, sink: str, key: str) -> dict[str, Any]:
        self.count += self.step
        numbered = {"seq": self.count} if self.step else {}
        self.keys.setdefault(key, []).append({"id": f"w{self.count}", "epoch": epoch, **numbered})
        return {"ok": True, **numbered}


_NO_TARGETS: Any = SimpleNamespace(targets=())
"""A deployment as the battery reads it here: only its process targets."""


def _items(claims: bool, step: int) -> Mapping[str, Any]:
    battery = _Battery(NumberedSink(claims), {}, SinkAgents(step), _NO_TARGETS, None)
    battery.seq_proven("L", "w1", 7)
    return {item.name: item for item in battery.items}


def test_a_claimed_seq_present_and_rising_holds() -> None:
    items = _items(claims=True, step=1)
    (item,) = items.values()
    assert item.ok and item.kind == "checked", item


@pytest.mark.parametrize(
    ("step", "seen"),
    [(0, "accepted writes without an integer seq"), (-1, "does not rise strictly")],
    ids=["omitted", "falling"],
)
def test_a_claimed_seq_omitted_or_falling_fails_with_the_fix(step: int, seen: str) -> None:
    (item,) = _items(claims=True, step=step).values()
    assert not item.ok
    assert seen in item.detail
    assert "Sink(seq=True)" in item.fix


def test_a_fenced_sink_without_seq_is_a_loud_warning_in_the_check_and_the_verdict() -> None:
    (item,) = _items(claims=False, step=0).values()
    assert item.ok and item.kind == "warning"
    assert UNJUDGED_ACROSS_KEYS in item.detail
    shown = _shown(ContractReport("fake", [item]))
    assert "! fake reports seq" in shown
    assert f"1 warning(s): fake has no seq: {UNJUDGED_ACROSS_KEYS}" in shown


def test_no_check_mark_for_an_unfenced_sink_the_system_does_not_have() -> None:
    battery = _Battery(NumberedSink(claims=True), {}, SinkAgents(1), _NO_TARGETS, None)
    battery.unfenced_accepts_stale("L", "w1", 3)
    (item,) = battery.items
    assert item.kind == "skipped"
    assert "no unfenced sink" in item.detail
    shown = _shown(ContractReport("fake", [item]))
    assert "✓" not in shown
    assert "- every unfenced sink accepts a stale write" in shown


def _shown(report: ContractReport) -> str:
    out = io.StringIO()
    render_report(Console(file=out, width=400, highlight=False), report)
    return out.getvalue()


def test_the_verdict_and_the_report_warn_of_a_fenced_sink_without_seq() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    history, inventory = root / "valid.jsonl", root / "inventory.json"
    shown = subprocess.run(
        [sys.executable, "-m", "harness", "check", str(history), "--inventory", str(inventory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert shown.returncode == 0, shown.stderr
    assert f"warning: store: {UNJUDGED_ACROSS_KEYS}" in shown.stdout
    numbered = {"fenced": True, "seq_observable": True, "accepted_writes": 3}
    bare = {**numbered, "seq_observable": False}
    sinks = {"a": numbered, "b": bare, "c": {**bare, "fenced": False}}
    assert _seq_warnings(StoredResults.from_json({"valid": True, "sinks": sinks})) == [
        ("b", f"{UNJUDGED_ACROSS_KEYS} (it reports no seq)")
    ]
