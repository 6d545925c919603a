"""Exit codes of a verdict (docs/design.md §8), kept beside the verdict so every caller agrees.

0 valid, 1 invalid, 2 unknown, 3 error. Exit 1 means "the history is invalid" to any CI, so an
internal error, bad input or a crash must never end with it.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["EXIT_ERROR", "EXIT_INVALID", "EXIT_UNKNOWN", "EXIT_VALID", "exit_code_of"]

EXIT_VALID: Final = 0
EXIT_INVALID: Final = 1
EXIT_UNKNOWN: Final = 2
EXIT_ERROR: Final = 3


def exit_code_of(valid: bool | Literal["unknown"]) -> int:
    """The exit code for a verdict's ``valid`` field."""
    if valid is True:
        return EXIT_VALID
    return EXIT_INVALID if valid is False else EXIT_UNKNOWN
