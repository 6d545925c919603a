"""Whether a node can take clock faults: libfaketime preloaded into a process moves its clock.

Shared by the doctors of both backends (``fencecheck doctor``, ``fencecheck hosts doctor``): it
does the real thing once, with a control file of its own, and never touches the node's clock.
"""

from __future__ import annotations

import time
from typing import Final

from harness.node.protocol import Node, NodeError
from harness.nodeside import clock

__all__ = ["check_libfaketime"]

_STEP_S: Final = 3600.0
_PROBE: Final = f"{clock.CONTROL_DIR}/doctor"
_TOLERANCE_S: Final = 5.0


def check_libfaketime(node: Node) -> str:
    """Step a preloaded python3's clock an hour ahead and read it; the detail line, or
    :class:`NodeError` saying what is wrong."""
    node.put_file(_PROBE, f"{_STEP_S:+.6f} x1".encode())
    argv = clock.preloaded("doctor", ["python3", "-c", "import time; print(time.time())"], "")
    before = time.time()
    result = node.run(argv, timeout=20.0)
    after = time.time()
    node.run(["rm", "-f", _PROBE])
    if not result.ok:
        raise NodeError(
            f"{node.name}: a preloaded python3 exited {result.exit_code}: "
            f"{result.stderr.strip()[-300:]}"
        )
    seen = float(result.stdout.strip())
    if not before + _STEP_S - _TOLERANCE_S <= seen <= after + _STEP_S + _TOLERANCE_S:
        raise NodeError(
            f"{node.name}: under {clock.PRELOAD} the clock moved {seen - after:+.0f} s, "
            f"not {_STEP_S:+.0f} s"
        )
    return f"a preloaded process read its clock {_STEP_S:+.0f} s ahead; the node's stayed"
