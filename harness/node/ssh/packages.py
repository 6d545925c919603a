"""What a host needs installed for fencecheck, checked and (on Debian-like hosts) installed.

The harness itself runs only standard tools on a host: python3 for the node-side programs (the
systems' agents and servers are stdlib-only Python), iptables for partitions, coreutils and
util-linux to start and time commands, tar to fetch logs, libfaketime (package ``faketime``) for
the clock faults, gcc and the C library's headers for the clock shim Redis's clock faults compile
on the host. Each command (or file, by its absolute path) maps to the Debian package that
provides it; installing goes through ``apt-get`` over SSH.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Final

from harness.node import NodeError
from harness.node.ssh.node import SshNode

__all__ = ["REQUIRED", "install_packages", "missing_packages"]

REQUIRED: Final[Mapping[str, str]] = {
    "python3": "python3",
    "iptables": "iptables",
    "iptables-restore": "iptables",
    "timeout": "coreutils",
    "nohup": "coreutils",
    "setsid": "util-linux",
    "tar": "tar",
    "awk": "mawk",
    # The command comes with libfaketime, which the clock faults preload into daemons.
    "faketime": "faketime",
    # The clock shim (harness/nodeside/fakeclock.c) is compiled on the host; without the
    # headers gcc cannot (apt-get leaves them out: only recommended by gcc).
    "gcc": "gcc",
    "/usr/include/stdio.h": "libc6-dev",
}
"""Command the harness runs on hosts (or file it needs, by absolute path) -> the Debian package
that provides it."""

_APT_TIMEOUT_S: Final = 600.0


def missing_packages(node: SshNode) -> list[str]:
    """The Debian packages providing commands ``node`` lacks (empty when all are there)."""
    commands = " ".join(shlex.quote(c) for c in REQUIRED)
    result = node.run(
        f"for c in {commands}; do "
        'case $c in /*) test -e "$c" ;; *) command -v "$c" >/dev/null ;; esac || echo "$c"; done'
    )
    return sorted({REQUIRED[c] for c in result.stdout.split() if c in REQUIRED})


def install_packages(node: SshNode) -> list[str]:
    """Install what :func:`missing_packages` lists with ``apt-get``; returns what was installed."""
    wanted = missing_packages(node)
    if not wanted:
        return []
    if not node.run("command -v apt-get").ok:
        raise NodeError(
            f"{node.name}: missing {', '.join(wanted)} and the host has no apt-get; "
            "install them with the host's package manager"
        )
    node.run(
        "apt-get update -q && apt-get install -y -q --no-install-recommends " + " ".join(wanted),
        env={"DEBIAN_FRONTEND": "noninteractive"},
        timeout=_APT_TIMEOUT_S,
        check=True,
    )
    still = missing_packages(node)
    if still:
        raise NodeError(f"{node.name}: {', '.join(still)} still missing after apt-get install")
    return wanted
