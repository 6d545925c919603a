"""Decoding a run's JSON files (``test.json``, ``results.json``, ``replay.json``): the one place
their bytes become data, so every reader above gets a typed record or a one-line reason.

The history has its own streaming reader (:mod:`harness.record.io`); these files are small and
read whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["load_object"]


def load_object(path: Path) -> dict[str, Any]:
    """The JSON object in the file at ``path``.

    Raises ``ValueError`` saying what is wrong (not JSON, or JSON but not an object) without the
    path, which the caller names with what is left to do; ``OSError`` (``FileNotFoundError``
    included) when the file cannot be read.
    """
    try:
        data = json.loads(path.read_bytes())
    except ValueError as problem:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"not JSON: {problem}") from None
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    return data
