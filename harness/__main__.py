"""``python -m harness``: the ``fencecheck`` command line."""

from harness.cli import run_as_program

run_as_program()
