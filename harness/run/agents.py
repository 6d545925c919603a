"""The harness's agents: one lock holder per worker node, started by the harness for any system.

The adapter's :class:`systems.base.Deployment` names only its holder client (a module and its
config); the harness ships the agent, :mod:`harness.nodeside` and that module to each worker,
starts the agent with the run's lease TTL and holder flaws (under libfaketime in a run with clock
faults, so that they can move its clock: :func:`systems.deploy.start_clocked`), and waits until it
answers a ping.
After a kill the agent is started again the same way (same command line); it holds nothing then.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from harness.node import Daemon, Node
from harness.nodeside import agent
from harness.nodeside.agent import AgentConfig
from harness.run.proxies import start_proxies, stop_proxies
from systems import deploy
from systems.base import Deployment, HolderClientCode, System, SystemConfig, nodes_with_role

__all__ = [
    "AGENT_DAEMON",
    "AGENT_PORT",
    "AgentSet",
    "Endpoint",
    "client_path",
    "deploy_system",
    "start_agents",
    "stop_agents",
]

AGENT_DAEMON: Final = "agent"
AGENT_PORT: Final = 7000
_CLIENT_FILE: Final = "client.py"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A TCP address the controller can reach."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class AgentSet:
    """The agents of a run, by worker node, and how to start one again after a kill.

    ``token`` is the run's secret every request to them must carry (``None``: none is asked)."""

    endpoints: Mapping[str, Endpoint]
    port: int
    ready_timeout: float
    token: str | None = field(default=None, repr=False)

    def restart(self, node: Node) -> Daemon:
        """Start the killed agent of ``node`` again (same command line) and wait for its ping."""
        ready = deploy.Pings(self.port, self.ready_timeout)
        return deploy.restart_daemon(node, AGENT_DAEMON, ready)


def start_agents(
    nodes: Mapping[str, Node],
    client: HolderClientCode,
    ttl: float,
    flaws: Collection[str] = (),
    *,
    port: int = AGENT_PORT,
    install_dir: str = deploy.INSTALL_DIR,
    ready_timeout: float = 20.0,
    secret: tuple[str, str] | None = None,
    clocked: bool = False,
) -> AgentSet:
    """Install and start an agent on every worker of ``nodes``, using the system's ``client``
    with lease TTL ``ttl`` and the agent's holder ``flaws``; return once every one answers.

    With ``secret`` (the run's secret and the file every node keeps it in) the agents refuse
    requests without it, and their clients send it to the system's services. ``clocked``: under
    libfaketime, for a run with clock faults."""
    workers = nodes_with_role(nodes, "worker")
    module_path = client_path(install_dir)
    files = {
        f"{install_dir}/agent.py": deploy.source_of(agent),
        module_path: deploy.source_of(client.module),
        **deploy.nodeside_files(install_dir),
    }
    known = [flaw for flaw in flaws if flaw in agent.HOLDER_FLAWS]
    config = AgentConfig(ttl, frozenset(known), dict(client.config))

    def start(node: Node) -> Daemon:
        deploy.install(node, files)
        argv = _argv(install_dir, node, port, module_path, config, secret[1] if secret else None)
        ready = deploy.Pings(port, ready_timeout)
        ask = f"wire:{node.ip}:{port}"
        return deploy.start_clocked(node, AGENT_DAEMON, argv, ready, ask, clocked)

    deploy.on_each(workers, start)
    endpoints = {node.name: Endpoint(node.ip, port) for node in workers}
    return AgentSet(endpoints, port, ready_timeout, secret[0] if secret else None)


def client_path(install_dir: str = deploy.INSTALL_DIR) -> str:
    """Where the system's holder client module is on a worker (beside the agent)."""
    return f"{install_dir}/{_CLIENT_FILE}"


def stop_agents(nodes: Mapping[str, Node]) -> None:
    """SIGKILL every agent of ``nodes``."""
    for node in nodes_with_role(nodes, "worker"):
        deploy.kill_daemons(node, (AGENT_DAEMON,))


def _argv(
    install_dir: str,
    node: Node,
    port: int,
    client_path: str,
    config: AgentConfig,
    secret_file: str | None,
) -> Sequence[str]:
    return [
        "python3",
        f"{install_dir}/agent.py",
        *("--host", node.ip, "--port", str(port)),
        *("--node", node.name, "--client", client_path),
        *("--config", config.to_json()),
        *(("--secret-file", secret_file) if secret_file else ()),
    ]


def deploy_system(
    system: System,
    nodes: Mapping[str, Node],
    config: SystemConfig,
    flaws: Collection[str] = (),
    *,
    secret_file: str = deploy.SECRET_FILE,
    port: int = AGENT_PORT,
    install_dir: str = deploy.INSTALL_DIR,
    proxy: bool = False,
) -> tuple[Deployment, AgentSet]:
    """Everything a run needs running on ``nodes``: the run's secret in ``secret_file`` on every
    node (and named in the config the system gets), the system set up, with ``proxy`` the
    write-path proxy on every worker (:mod:`harness.run.proxies`), and the harness's agents
    started with the holder ``flaws``. What was started is stopped again if a later step fails."""
    token = deploy.install_secret(nodes, secret_file)
    config = replace(config, secret_file=secret_file)
    deployment = system.setup(nodes, config)
    try:
        if proxy:
            start_proxies(system, nodes, install_dir, secret_file)
        agents = start_agents(
            nodes,
            deployment.client,
            deployment.lease_ttl or config.lease_ttl,
            flaws,
            port=port,
            install_dir=install_dir,
            secret=(token, secret_file),
            clocked=config.clocked,
        )
    except BaseException:
        if proxy:
            stop_proxies(nodes)
        system.teardown(nodes)
        raise
    return deployment, agents
