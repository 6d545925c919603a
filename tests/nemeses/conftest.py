"""Test setup for the nemeses: the fake nodes of nemesis_fakes.py made importable."""

from __future__ import annotations

import sys
from pathlib import Path

# The tests run with --import-mode=importlib, which puts no test directory on sys.path; this one
# goes there so that its tests can import the fake nodes of nemesis_fakes.py.
sys.path.insert(0, str(Path(__file__).parent))
