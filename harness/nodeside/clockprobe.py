"""A clock probe: reports the clock of a daemon that reports none, from beside it.

Started on the daemon's node under the same preload and the same control file as the daemon
(:func:`systems.deploy.start_clock_probe`), it reads what that preload makes of that file in a
process: the clock the clock nemeses confirm a fault on the daemon by (its ``ask`` is this
probe's ``wire:HOST:PORT``). It answers ``ping`` and, as every wire server does, ``clock``; nothing
else. What it cannot show is the daemon itself misreading its clock (a runtime that caches it, a
clock call the preload does not reach): the system's adapter says how the daemon was measured to
follow the preload.

    python3 clockprobe.py --host IP --port PORT [--secret-file FILE]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from harness.nodeside import wire

__all__ = ["main"]


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") == "ping":
        return {"ok": True}
    return wire.bad_request("a clock probe answers ping and clock only")


def main(argv: Sequence[str]) -> None:
    """Serve ``ping`` and ``clock`` on ``--host:--port`` until killed."""
    args = wire.with_listen_options(__doc__.splitlines()[0]).parse_args(argv)
    wire.serve(args.host, args.port, _answer, "clock probe", args.secret_file)


if __name__ == "__main__":
    main(sys.argv[1:])
