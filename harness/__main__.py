"""``python -m harness``: the ``fencecheck`` command line."""

from harness.cli import main

main()
