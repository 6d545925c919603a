"""A wire server started under libfaketime on a node, for the clock-fault tests of each backend."""

from __future__ import annotations

from typing import Final

from harness.node import Node
from systems import deploy

PORT: Final = 7100
NAME: Final = "clocky"
_SERVER: Final = (
    "import sys; sys.path.insert(0, '/opt/fencecheck'); from harness.nodeside import wire; "
    f"wire.serve(sys.argv[1], {PORT}, lambda request: {{'ok': True}}, 'clock test')"
)


def start_clocked_server(node: Node) -> None:
    """Start daemon :data:`NAME` on ``node``: a wire server (which answers ``clock``) on
    :data:`PORT`, under libfaketime with its own control file; returns once it answers."""
    deploy.install(node, deploy.nodeside_files())
    argv = ["python3", "-c", _SERVER, node.ip]
    ready = deploy.Pings(PORT, 20.0)
    deploy.start_clocked(node, NAME, argv, ready, f"wire:{node.ip}:{PORT}")
