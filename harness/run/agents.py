"""The harness's agents: one lock holder per worker node, started by the harness for any system.

The adapter's :class:`systems.base.Deployment` names only its holder client (a module and its
config); the harness ships the agent, :mod:`harness.nodeside` and that module to each worker,
starts the agent with the run's lease TTL and holder flaws (in a run with clock faults, with a
control file it moves its own clock by, so that they can move it:
:func:`systems.deploy.start_clocked`), and waits until it answers a ping.
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
from systems.base import (
    AdapterError,
    Deployment,
    HolderClientCode,
    System,
    SystemConfig,
    nodes_with_role,
    packages_of,
)

__all__ = [
    "AGENT_DAEMON",
    "AGENT_PORT",
    "AgentSet",
    "Endpoint",
    "client_imports_problem",
    "client_path",
    "deploy_system",
    "start_agents",
    "stop_agents",
]

AGENT_DAEMON: Final = "agent"
AGENT_PORT: Final = 7000
_CLIENT_FILE: Final = "client.py"
_MISSING: Final = 4
_IMPORTS: Final = """
import importlib.util, sys
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location("fencecheck_client", sys.argv[2])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
try:
    spec.loader.exec_module(module)
except ModuleNotFoundError as missing:
    print(missing.name or missing)
    sys.exit(4)
"""
"""Runs on a worker: imports the shipped holder client as the agent will; exit 4 naming the
first module it imports that the node lacks."""


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
    timed_sinks: Collection[str] = (),
) -> AgentSet:
    """Install and start an agent on every worker of ``nodes``, using the system's ``client``
    with lease TTL ``ttl`` and the agent's holder ``flaws``; return once every one answers.

    With ``secret`` (the run's secret and the file every node keeps it in) the agents refuse
    requests without it, and their clients send it to the system's services. ``clocked``: with a
    control file its clock follows, for a run with clock faults. ``timed_sinks``: the sinks a
    lock-delay protects, which the agents write to only once the lock service confirms the
    lease."""
    workers = nodes_with_role(nodes, "worker")
    module_path = client_path(install_dir)
    files = {
        f"{install_dir}/agent.py": deploy.source_of(agent),
        module_path: deploy.source_of(client.module),
        **deploy.nodeside_files(install_dir),
    }
    known = [flaw for flaw in flaws if flaw in agent.HOLDER_FLAWS]
    config = AgentConfig(ttl, frozenset(known), dict(client.config), frozenset(timed_sinks))

    def start(node: Node) -> Daemon:
        deploy.install(node, files)
        argv = _argv(install_dir, node, port, module_path, config, secret[1] if secret else None)
        ready = deploy.Pings(port, ready_timeout)
        ask = f"wire:{node.ip}:{port}"
        # The agent moves its own clock: libfaketime would stop its timed waits (renewals).
        return deploy.start_clocked(node, AGENT_DAEMON, argv, ready, ask, clocked, mover="itself")

    deploy.on_each(workers, start)
    endpoints = {node.name: Endpoint(node.ip, port) for node in workers}
    return AgentSet(endpoints, port, ready_timeout, secret[0] if secret else None)


def client_path(install_dir: str = deploy.INSTALL_DIR) -> str:
    """Where the system's holder client module is on a worker (beside the agent)."""
    return f"{install_dir}/{_CLIENT_FILE}"


def client_imports_problem(
    node: Node,
    client: HolderClientCode,
    packages: Sequence[str],
    install_dir: str = deploy.INSTALL_DIR,
) -> str | None:
    """Why the holder client cannot be imported on ``node`` (a module it imports is not there),
    naming the module and the node image's package list; ``None`` when it imports. The client
    is shipped and imported there, never on the controller (:func:`systems.deploy.source_of`)."""
    path = client_path(install_dir)
    deploy.install(
        node, {path: deploy.source_of(client.module), **deploy.nodeside_files(install_dir)}
    )
    done = node.run(["python3", "-c", _IMPORTS, install_dir, path], timeout=60)
    if done.ok:
        return None
    name = client.module if isinstance(client.module, str) else client.module.__name__
    listed = ", ".join(packages) or "none beyond the base node image"
    if done.exit_code == _MISSING:
        missing = done.stdout.strip() or "?"
        top = missing.split(".")[0]
        return (
            f"the holder client {name} imports {missing!r}, which node {node.name} does not have: "
            f"add the Debian package that provides it (e.g. python3-{top.replace('_', '-')}) to "
            f"the system's package list (now: {listed}; packages.txt beside the adapter), then "
            "`fencecheck images build --system NAME`"
        )
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return f"the holder client {name} fails to import on node {node.name}: {last}"


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
        # Before any agent starts: a client that cannot import would fail on every worker.
        for worker in nodes_with_role(nodes, "worker")[:1]:
            problem = client_imports_problem(
                worker, deployment.client, packages_of(system), install_dir
            )
            if problem is not None:
                raise AdapterError(problem)
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
            timed_sinks=[s.name for s in system.inventory(config) if s.mitigation == "lock-delay"],
        )
    except BaseException:
        if proxy:
            stop_proxies(nodes)
        system.teardown(nodes)
        raise
    return deployment, agents
