"""Whether a node can take clock faults: libfaketime preloaded into a process moves its clock, and
gcc compiles fencecheck's clock shim (``harness/nodeside/fakeclock.c``, which Redis runs under:
libfaketime cannot start it).

Shared by the doctors of both backends (``fencecheck doctor``, ``fencecheck hosts check``): each
check does the real thing once, with files of its own, and never touches the node's clock.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Final

from harness.node.protocol import Node, NodeError
from harness.nodeside import clock

__all__ = ["SHIM_SOURCE", "check_compiler", "check_libfaketime", "shim_compile"]

_STEP_S: Final = 3600.0
_PROBE: Final = f"{clock.CONTROL_DIR}/doctor"
_TOLERANCE_S: Final = 5.0
_SCRATCH: Final = "/tmp/fencecheck-doctor-shim"
_COMPILE_TIMEOUT_S: Final = 120.0  # gcc on a loaded 2-core machine
_NOT_FOUND: Final = 127
SHIM_SOURCE: Final = (Path(clock.__file__).parent / "fakeclock.c").read_bytes()
"""fencecheck's clock shim, as it is shipped to a node and compiled there."""


def shim_compile(source: str, library: str) -> str:
    """The shell command that compiles the shim's ``source`` on a node into ``library``."""
    return f"gcc -O2 -shared -fPIC -o {library} -x c {source}"


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


def check_compiler(node: Node) -> str:
    """Compile the clock shim on ``node`` in a scratch folder (removed after); the detail line,
    or :class:`NodeError` saying what is missing and who needs it."""
    source, library = f"{_SCRATCH}/fakeclock.c", f"{_SCRATCH}/fakeclock.so"
    node.put_file(source, SHIM_SOURCE)
    try:
        built = node.run(shim_compile(source, library), timeout=_COMPILE_TIMEOUT_S)
    finally:
        node.run(["rm", "-rf", _SCRATCH])
    if built.ok:
        return "gcc compiled fencecheck's clock shim (Redis's clock faults preload it)"
    said = (built.stderr or built.stdout).strip()[-300:]
    what = (
        "gcc is not installed"
        if built.exit_code == _NOT_FOUND
        else f"gcc cannot compile fencecheck's clock shim: {said}"
    )
    raise NodeError(
        f"{node.name}: {what}; Redis's clock faults compile the shim "
        "(harness/nodeside/fakeclock.c) on its nodes, with gcc and libc6-dev (other systems do "
        "not need them)"
    )
