"""docs/contract-reference.md is generated from the code and cannot drift from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "contract_reference.py"


def test_the_committed_reference_is_what_the_code_generates() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_the_reference_names_every_public_name_of_the_contract() -> None:
    import systems
    import systems.base
    import systems.deploy
    import systems.kit

    text = (ROOT / "docs" / "contract-reference.md").read_text()
    for module in (systems, systems.base, systems.kit, systems.deploy):
        for name in module.__all__:
            if name != "deploy":  # the module itself: its names have a section
                assert f"### `{name}` (" in text, f"{module.__name__}.{name}"
    assert "- `keys: int = 0`" in text  # an Exposure field, with its type and default


def test_each_link_of_the_guide_into_the_reference_names_a_heading() -> None:
    import re

    headings = set()
    for line in (ROOT / "docs" / "contract-reference.md").read_text().splitlines():
        if line.startswith("#"):
            words = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            headings.add(words.replace(" ", "-"))
    guide = (ROOT / "docs" / "adding-a-system.md").read_text()
    links = re.findall(r"contract-reference\.md#([\w\-]+)", guide)
    assert len(links) >= 7  # every step of the guide links its part of the reference
    assert set(links) <= headings, set(links) - headings
