"""The adapter contract version: an adapter written for another contract fails in one line naming
what changed and the guide's migration section; ``fencecheck list`` shows the whole reason."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from systems import CONTRACT, ENTRY_POINT_GROUP, AdapterError
from systems.registry import load_entry
from systems.upgrade import CHANGES, MIGRATION
from tests.support.fake import FakeSystem

ROOT = Path(__file__).resolve().parents[2]


class DeclaresOne(FakeSystem):
    """Written for contract 1, and says so."""

    CONTRACT = 1  # type: ignore[misc]


class DeclaresNothing:
    """Says nothing of its contract (as every contract-1 adapter did)."""


class DeclaresLater(FakeSystem):
    """Written for a contract newer than this fencecheck's."""

    CONTRACT = CONTRACT + 1  # type: ignore[misc]


def _entry(value: str) -> EntryPoint:
    return EntryPoint(name="third-party", value=value, group=ENTRY_POINT_GROUP)


def _refusal(value: str) -> str:
    with pytest.raises(AdapterError) as refused:
        load_entry(_entry(value))
    message = str(refused.value)
    assert "\n" not in message, "one line"
    return message


def test_an_adapter_written_for_the_previous_contract_fails_with_the_migration_line() -> None:
    message = _refusal("tests.support.contract1.adapter:OldLockSystem")
    assert "imports systems.base.Endpoint" in message
    assert "gone: the harness dials its own agents" in message
    assert CHANGES[CONTRACT] in message
    assert MIGRATION in message
    assert f"set CONTRACT = {CONTRACT}" in message
    assert "Traceback" not in message


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        ("DeclaresOne", "was written for contract 1"),
        ("DeclaresNothing", "declares no CONTRACT, so it was written for contract 1"),
    ],
)
def test_an_older_declared_or_undeclared_contract_names_what_changed(
    factory: str, said: str
) -> None:
    message = _refusal(f"{__name__}:{factory}")
    assert said in message
    assert CHANGES[2] in message
    assert MIGRATION in message


def test_a_newer_contract_asks_for_a_newer_fencecheck() -> None:
    message = _refusal(f"{__name__}:DeclaresLater")
    assert f"was written for contract {CONTRACT + 1}" in message
    assert "newer fencecheck" in message


def test_an_adapter_of_this_contract_loads() -> None:
    assert load_entry(_entry("tests.support.fake:FakeSystem")).name == "fake"


def test_the_migration_section_exists_in_the_guide() -> None:
    anchor = MIGRATION.split("#", 1)[1]
    headings = [
        line.lstrip("#").strip().lower().replace(" ", "-")
        for line in (ROOT / "docs/adding-a-system.md").read_text().splitlines()
        if line.startswith("#")
    ]
    assert anchor in headings


def test_list_shows_a_system_that_fails_to_load_with_its_whole_reason(tmp_path: Path) -> None:
    # A real installed entry point: a dist-info folder on the path, as pip would leave it.
    info = tmp_path / "old_lock-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: old-lock\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nold-lock = tests.support.contract1.adapter:OldLockSystem\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("COLUMNS", None)
    shown = subprocess.run(
        [sys.executable, "-m", "harness", "list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    rows = shown.stdout[: shown.stdout.index("holder flaws")]
    # The reason, wrapped over the row's lines, reads whole once the table's rules are gone.
    cells = "".join(
        line.split("│")[2].strip() for line in rows.splitlines() if line.count("│") >= 4
    )
    assert "old-lock" in rows
    assert "cannot load" in cells
    assert MIGRATION.replace(" ", "") in cells.replace(" ", "")
    assert f"setCONTRACT={CONTRACT}" in cells.replace(" ", "")
