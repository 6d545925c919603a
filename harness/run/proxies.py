"""The write-path proxy on every worker, for a run that asks for a proxy fault kind.

Inserted so that the holder client needs no change: the proxy (:mod:`harness.nodeside.proxy`)
listens on the worker's loopback, and a ``nat`` chain of ours in the worker's own namespace
(:func:`nemeses.proxy.redirect_script`) REDIRECTs every TCP connection the worker opens to a
lock-service or store node there; the proxy's own connections carry a mark the chain lets pass.
The proxy starts before the agents, so their first connection already goes through it; it is
stopped and the chain removed with the agents. Its counters (connections, bytes per destination
role and direction) are what ``adapter check`` reads to prove the holders' traffic passes through
it (:func:`traffic`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from harness.node import Daemon, Node
from harness.nodeside import proxy
from nemeses.proxy import (
    PROXY_DAEMON,
    PROXY_KINDS,
    ask_proxy,
    proxy_token,
    redirect_script,
    removal_script,
)
from systems import deploy
from systems.base import AdapterError, FramesRequests, System, nodes_with_role

__all__ = ["proxied", "start_proxies", "stop_proxies", "traffic"]

_RESTORE: Final = ("iptables-restore", "-w", "--noflush")


def proxied(kinds: tuple[str, ...] | list[str]) -> bool:
    """Whether a run with fault ``kinds`` needs the proxy."""
    return bool(set(PROXY_KINDS) & set(kinds))


def start_proxies(
    system: System,
    nodes: Mapping[str, Node],
    install_dir: str = deploy.INSTALL_DIR,
    secret_file: str | None = None,
) -> None:
    """Start the proxy on every worker (its control port requiring the run's secret in
    ``secret_file``) and redirect the worker's connections to the other nodes through it."""
    peers = {node.ip: (node.name, node.role) for node in nodes.values() if node.role != "worker"}
    framings: dict[str, dict[str, str]] = {}
    if isinstance(system, FramesRequests):
        framings = {
            role: {"framing": framing, "match": match}
            for role, (framing, match) in system.request_framing().items()
        }
    path = f"{install_dir}/proxy.py"
    argv = [
        "python3",
        path,
        *("--port", str(proxy.PORT)),
        *("--peers", json.dumps(peers)),
        *("--framings", json.dumps(framings)),
        *(("--secret-file", secret_file) if secret_file else ()),
    ]
    ready = deploy.Pings(proxy.CONTROL_PORT)

    def start(node: Node) -> Daemon:
        deploy.install(node, {path: deploy.source_of(proxy), **deploy.nodeside_files(install_dir)})
        here = [*argv, "--control-host", node.ip]
        daemon = deploy.start_and_wait(node, PROXY_DAEMON, here, ready)
        done = node.run(
            list(_RESTORE), stdin=redirect_script({ip: n for ip, (n, _) in peers.items()})
        )
        if not done.ok:
            raise AdapterError(
                f"{node.name}: cannot redirect its connections to the proxy "
                f"(exit {done.exit_code}): {done.stderr.strip()[-300:]}; the node needs iptables "
                "with the nat table and the NET_ADMIN capability"
            )
        return daemon

    deploy.on_each(nodes_with_role(nodes, "worker"), start)


def stop_proxies(nodes: Mapping[str, Node]) -> None:
    """Remove the redirect and stop the proxy on every worker (the holders connect directly)."""
    for node in nodes_with_role(nodes, "worker"):
        node.run(list(_RESTORE), stdin=removal_script())
        deploy.kill_daemons(node, (PROXY_DAEMON,))


def traffic(node: Node) -> dict[str, Any]:
    """The proxy's counters on ``node``: connections relayed, bytes per role and direction."""
    return ask_proxy(node, {"op": "report"}, proxy_token(node))
