"""The matrices and examples that ship inside the package.

In a checkout, ``matrices`` and ``examples`` here are links to the top-level folders, where people
edit them; the wheel carries them as real files (package data), so a ``pip install``'d
fencecheck has ``fencecheck matrices``, ``fencecheck examples`` and ``run-all --matrix
detection`` too. Imports nothing of ours.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["bundled_examples", "bundled_matrices", "bundled_matrix"]


def _folder(name: str) -> Path:
    return Path(str(resources.files(__name__).joinpath(name)))


def bundled_matrices() -> dict[str, Path]:
    """Name (the file name without ``.json``) -> path of every shipped matrix."""
    folder = _folder("matrices")
    return {path.stem: path for path in sorted(folder.glob("*.json"))}


def bundled_examples() -> list[Path]:
    """Every shipped example file (histories, an inventory, the pytest plugin's example)."""
    return sorted(p for p in _folder("examples").iterdir() if p.is_file() and p.suffix != ".pyc")


def bundled_matrix(name: str) -> Path | None:
    """The shipped matrix called ``name`` (``detection`` or ``detection.json``), if there is one."""
    return bundled_matrices().get(name.removesuffix(".json"))
