"""A run's cluster of containers: a private network, one container per node, guaranteed teardown.

Every container and network carries labels (run id, role, node name, owner process), so whatever a
crashed controller left behind can be found and removed by :func:`gc`, and a running cluster can be
picked up again by :meth:`Cluster.attach`. Containers run ``sleep infinity`` under the engine's
init (``--init``) so signals and orphaned children behave as on a real host.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, Final, cast

import docker.errors
from docker.models.containers import Container
from docker.models.networks import Network

from harness.node import NodeError
from harness.node.docker.engine import EngineError, engine
from harness.node.docker.images import node_image
from harness.node.docker.node import DockerNode
from harness.node.interrupts import interrupts_deferred
from harness.node.wait import CommandSucceeds, wait_all

__all__ = [
    "LABEL_INDEX",
    "LABEL_KEEP",
    "LABEL_NODE",
    "LABEL_OWNER",
    "LABEL_ROLE",
    "LABEL_RUN",
    "LABEL_USER",
    "ROLES",
    "Cluster",
    "ClusterError",
    "NodeSpec",
    "RunInfo",
    "default_topology",
    "gc",
    "list_runs",
    "manual_runs",
    "new_run_id",
    "remove_run",
]

LABEL_RUN: Final = "fencecheck.run"
LABEL_ROLE: Final = "fencecheck.role"
LABEL_NODE: Final = "fencecheck.node"
LABEL_INDEX: Final = "fencecheck.index"
LABEL_OWNER: Final = "fencecheck.owner"
LABEL_KEEP: Final = "fencecheck.keep"
LABEL_USER: Final = "fencecheck.user"
"""Who created the run (``uid:person``): on a shared engine, commands without a run id touch only
yours."""
ROLES: Final = ("lock", "store", "worker")

_RUN_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,47}")
_HOSTNAME = re.compile(r"[a-z][a-z0-9-]{0,30}")
# The first iptables call in a fresh network namespace takes ~0.7 s; paying it at setup keeps
# that delay out of the first partition. It also proves exec works, so it doubles as readiness.
_WARM_UP = CommandSucceeds(["iptables", "-w", "-n", "-L"], timeout=30.0, interval=0.2)


class ClusterError(NodeError):
    """The cluster could not be created, found or removed; the message says what to do."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of a topology: its stable hostname and its role (lock, store or worker)."""

    name: str
    role: str

    def __post_init__(self) -> None:
        if not _HOSTNAME.fullmatch(self.name):
            raise ClusterError(
                f"node name {self.name!r} is not a valid hostname; use lowercase letters, digits "
                "and '-', starting with a letter (e.g. w1)"
            )
        if self.role not in ROLES:
            raise ClusterError(f"node {self.name}: role {self.role!r} is not one of {ROLES}")


def default_topology(workers: int = 3) -> list[NodeSpec]:
    """The standard cluster: ``l1`` (lock), ``s1`` (store), ``w1``..``wN`` (workers)."""
    if workers < 1:
        raise ClusterError(f"a cluster needs at least one worker, not {workers}")
    return [
        NodeSpec("l1", "lock"),
        NodeSpec("s1", "store"),
        *(NodeSpec(f"w{i}", "worker") for i in range(1, workers + 1)),
    ]


def new_run_id() -> str:
    """A fresh run id: UTC time plus a random suffix, e.g. ``20250520-101530-3fa2``."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def _owner_label() -> str:
    """``host:pid:start`` of this process: :func:`gc` tells a crashed owner from a live one."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid())}"


def _start_ticks(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return "gone"
    return text[text.rfind(")") + 2 :].split()[19]


def _me() -> str:
    """``uid:person``: on a shared engine many people are root (through sudo), so the uid alone
    would call every root-owned cluster "yours"; the person is who invoked sudo, else the login."""
    person = os.environ.get("SUDO_USER") or getpass.getuser()
    return f"{os.getuid()}:{person}"


def _owner_alive(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid, _, ticks = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        # Another controller host: nothing here can tell whether it still runs.
        return True
    return _start_ticks(int(pid)) == ticks


class Cluster:
    """The containers of one run on a private network, created and removed as a unit.

    Use as a context manager: ``__enter__`` brings the cluster up, ``__exit__`` tears it down
    (unless ``keep``), also on Ctrl-C, SIGTERM or an exception.
    """

    def __init__(
        self,
        run_id: str,
        nodes: Sequence[NodeSpec],
        *,
        image: str | None = None,
        keep: bool = False,
        fuse: bool = False,
    ) -> None:
        """Describe a cluster; nothing is created before :meth:`up`.

        ``image`` defaults to :func:`harness.node.docker.images.node_image` (built when missing).
        ``keep`` leaves the containers running after ``__exit__`` (``fencecheck cluster down``
        removes them). ``fuse`` gives every container ``/dev/fuse`` and ``CAP_SYS_ADMIN``, which
        mounting the lazy file system needs (the disk fault kinds; no other run gets them).
        """
        if not _RUN_ID.fullmatch(run_id):
            raise ClusterError(
                f"run id {run_id!r} is not usable in container names; use up to 48 lowercase "
                "letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
        names = [spec.name for spec in nodes]
        if not names:
            raise ClusterError("a cluster needs at least one node")
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ClusterError(f"node names must be unique; repeated: {', '.join(duplicated)}")
        self.run_id = run_id
        """This run's id; every container and the network carry it as a label."""
        self.specs: tuple[NodeSpec, ...] = tuple(nodes)
        """The topology, in order."""
        self.keep = keep
        """Whether ``__exit__`` leaves the cluster running."""
        self.nodes: dict[str, DockerNode] = {}
        """The running nodes by name, in topology order (empty until :meth:`up`)."""
        self.restarted: tuple[str, ...] = ()
        """Nodes :meth:`attach` had to start again (their container had stopped)."""
        self._image = image
        self._fuse = fuse
        self._restore: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"Cluster({self.run_id!r}, nodes={[spec.name for spec in self.specs]})"

    @property
    def network_name(self) -> str:
        """The name of the run's private network."""
        return f"fencecheck-{self.run_id}"

    def container_name(self, node: str) -> str:
        """The engine's name of ``node``'s container."""
        return f"fencecheck-{self.run_id}-{node}"

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> Cluster:
        self._install_sigterm_handler()
        try:
            self.up()
        except BaseException:
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self.keep:
                self._close_nodes()
            else:
                self.down()
        finally:
            self._restore_signal_handlers()

    def up(self) -> None:
        """Create the network and the containers (in parallel), start them, wait until ready.

        A failure or an interrupt part-way removes whatever was created, then re-raises.
        """
        if self.nodes:
            raise ClusterError(f"cluster {self.run_id} is already up")
        image = self._image or node_image()
        client = engine()
        labels = {LABEL_RUN: self.run_id, LABEL_OWNER: _owner_label(), LABEL_USER: _me()}
        if self.keep:
            labels[LABEL_KEEP] = "1"
        created = False
        try:
            # A signal while the engine creates the network would leave it behind unrecorded:
            # it is delivered once ``created`` says whether there is something to remove.
            with interrupts_deferred():
                try:
                    client.networks.create(
                        self.network_name, driver="bridge", labels=labels, check_duplicate=True
                    )
                except docker.errors.APIError as problem:
                    raise ClusterError(
                        f"cannot create network {self.network_name}: "
                        f"{problem.explanation or problem}; if a run with this id is left over, "
                        f"`fencecheck cluster down {self.run_id}`"
                    ) from problem
                created = True
            # From here on this run owns the network: any failure or interrupt removes what exists.
            with ThreadPoolExecutor(len(self.specs), thread_name_prefix="cluster-up") as pool:
                futures = [
                    pool.submit(self._start_node, image, index, spec, labels)
                    for index, spec in enumerate(self.specs)
                ]
                started = [future.result() for future in futures]
            self.nodes = {node.name: node for node in started}
            wait_all([(node, _WARM_UP) for node in started])
        except BaseException:
            if created:
                self.down()
            raise

    def _start_node(
        self, image: str, index: int, spec: NodeSpec, labels: dict[str, str]
    ) -> DockerNode:
        api = engine().api
        try:
            created = api.create_container(
                image,
                command=["sleep", "infinity"],
                hostname=spec.name,
                name=self.container_name(spec.name),
                labels={
                    **labels,
                    LABEL_ROLE: spec.role,
                    LABEL_NODE: spec.name,
                    LABEL_INDEX: str(index),
                },
                host_config=api.create_host_config(
                    cap_add=["NET_ADMIN", *(["SYS_ADMIN"] if self._fuse else [])],
                    devices=["/dev/fuse:/dev/fuse:rwm"] if self._fuse else None,
                    init=True,
                    network_mode=self.network_name,
                ),
                # The stubs type this argument wrongly: the engine takes a mapping per network.
                networking_config=api.create_networking_config(
                    cast(
                        Any,
                        {self.network_name: api.create_endpoint_config(aliases=[spec.name])},
                    )
                ),
                detach=True,
            )
            api.start(created["Id"])
            container = engine().containers.get(created["Id"])
        except docker.errors.ImageNotFound as problem:
            raise ClusterError(
                f"image {image} is missing; build it with `fencecheck images build`"
            ) from problem
        except docker.errors.APIError as problem:
            raise ClusterError(
                f"cannot start node {spec.name}: {problem.explanation or problem}"
            ) from problem
        return _node_of(container, self.network_name)

    def down(self) -> None:
        """Remove every container and the network of this run (whatever exists of them).

        Ctrl-C and SIGTERM are held off while removing, so a second interrupt cannot leave
        half a cluster behind.
        """
        self._close_nodes()
        with interrupts_deferred():
            try:
                remove_run(self.run_id)
            except (docker.errors.DockerException, EngineError, ClusterError, OSError) as problem:
                raise ClusterError(
                    f"cluster {self.run_id} may be left on the engine ({problem}); once the "
                    f"engine answers, remove it with `fencecheck cluster down {self.run_id}`"
                ) from problem
        self.nodes = {}

    def _close_nodes(self) -> None:
        for node in self.nodes.values():
            node.close()

    def _install_sigterm_handler(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_DFL:
            # Someone (the runner) already turns SIGTERM into an orderly stop: keep theirs.
            return

        def terminate(signum: int, frame: FrameType | None) -> None:
            # Raising turns SIGTERM into an unwinding exit, so __exit__ tears the cluster down.
            raise SystemExit(128 + signum)

        def restore() -> None:
            signal.signal(signal.SIGTERM, previous)

        signal.signal(signal.SIGTERM, terminate)
        self._restore.append(restore)

    def _restore_signal_handlers(self) -> None:
        while self._restore:
            self._restore.pop()()

    # -- lookup -----------------------------------------------------------------------------

    @classmethod
    def attach(cls, run_id: str | None = None, *, start_stopped: bool = False) -> Cluster:
        """The running cluster of ``run_id``; if ``None``, the newest of :func:`manual_runs`
        (never another user's run, nor a run whose controller still drives it).

        Nodes whose container stopped (its main process was killed) are an error, or with
        ``start_stopped`` are started again (listed in :attr:`restarted`). The returned cluster
        has ``keep=True``: leaving a ``with`` block does not remove it; call :meth:`down` to.
        """
        runs = list_runs()
        if not runs:
            raise ClusterError(
                "no fencecheck cluster is running; start one with `fencecheck cluster up`"
            )
        if run_id is None:
            mine = manual_runs(runs)
            if not mine:
                raise ClusterError(
                    "no cluster that you kept (`fencecheck cluster up` or `run --keep-cluster`, "
                    "its run over) is running; start one with `fencecheck cluster up`, or name "
                    "another with --run RUN_ID (see `fencecheck cluster status`)"
                )
            run = mine[-1]
        else:
            matches = [info for info in runs if info.run_id == run_id]
            if not matches:
                known = ", ".join(info.run_id for info in runs)
                raise ClusterError(f"no cluster with run id {run_id!r}; running: {known}")
            run = matches[0]
        containers = sorted(_containers(run.run_id), key=lambda c: int(c.labels[LABEL_INDEX]))
        cluster = cls(
            run.run_id,
            [NodeSpec(c.labels[LABEL_NODE], c.labels[LABEL_ROLE]) for c in containers],
            keep=True,
        )
        # A paused (frozen) container is still a live node: attaching to it is how it gets thawed.
        stopped = [c for c in containers if c.status not in ("running", "paused")]
        if stopped and not start_stopped:
            raise ClusterError(
                f"cluster {run.run_id}: nodes {', '.join(c.labels[LABEL_NODE] for c in stopped)} "
                f"are not running (their main process ended); `fencecheck nemesis heal --run-id "
                f"{run.run_id}` starts them again, `fencecheck cluster down {run.run_id}` "
                "removes the cluster"
            )
        for container in stopped:
            container.start()
            container.reload()
        if stopped:
            wait_all([(_node_of(c, cluster.network_name), _WARM_UP) for c in stopped])
        cluster.restarted = tuple(c.labels[LABEL_NODE] for c in stopped)
        cluster.nodes = {
            c.labels[LABEL_NODE]: _node_of(c, cluster.network_name) for c in containers
        }
        return cluster

    def node(self, name: str) -> DockerNode:
        """The node called ``name`` (raises :class:`ClusterError` listing the names if none)."""
        try:
            return self.nodes[name]
        except KeyError:
            raise ClusterError(
                f"cluster {self.run_id} has no node {name!r}; nodes: {', '.join(self.nodes)}"
            ) from None

    def by_role(self, role: str) -> list[DockerNode]:
        """The nodes with ``role``, in topology order."""
        if role not in ROLES:
            raise ClusterError(f"role {role!r} is not one of {ROLES}")
        return [node for node in self.nodes.values() if node.role == role]


def _node_of(container: Container, network: str) -> DockerNode:
    labels = container.labels
    ip = container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
    return DockerNode(container, name=labels[LABEL_NODE], role=labels[LABEL_ROLE], ip=ip)


# -- runs on the engine ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run found on the engine by its labels."""

    run_id: str
    nodes: tuple[str, ...]
    states: tuple[str, ...]
    created: str
    owner: str
    owner_alive: bool
    kept: bool
    network: bool
    """Whether the run's network still exists."""
    user: str = ""
    """``uid:person`` that created it (a bare uid for older runs, "" before the label
    existed)."""

    @property
    def mine(self) -> bool:
        """Whether the invoking person created the run (an older run: whether the uid did)."""
        return self.user in (_me(), str(os.getuid()))


def _containers(run_id: str | None = None) -> list[Container]:
    label = LABEL_RUN if run_id is None else f"{LABEL_RUN}={run_id}"
    # On a shared engine another user's container may go between the listing and its inspection.
    found: list[Container] = engine().containers.list(
        all=True, filters={"label": label}, ignore_removed=True
    )
    return found


def _networks(run_id: str | None = None) -> list[Network]:
    label = LABEL_RUN if run_id is None else f"{LABEL_RUN}={run_id}"
    found: list[Network] = engine().networks.list(filters={"label": label})
    return found


def list_runs() -> list[RunInfo]:
    """Every fencecheck run with containers or a network on the engine, oldest first."""
    grouped: dict[str, list[Container]] = {}
    for container in _containers():
        grouped.setdefault(container.labels[LABEL_RUN], []).append(container)
    labels: dict[str, tuple[dict[str, str], str]] = {}
    for network in _networks():
        attrs: dict[str, Any] = network.attrs
        labels[attrs["Labels"][LABEL_RUN]] = (attrs["Labels"], str(attrs["Created"]))
    with_network = set(labels)
    for run_id, containers in grouped.items():
        first = min(containers, key=lambda c: str(c.attrs["Created"]))
        labels.setdefault(run_id, (first.labels, str(first.attrs["Created"])))
    runs = []
    for run_id, (run_labels, created) in labels.items():
        containers = sorted(
            grouped.get(run_id, []), key=lambda c: int(c.labels.get(LABEL_INDEX, "0"))
        )
        owner = run_labels.get(LABEL_OWNER, "")
        runs.append(
            RunInfo(
                run_id=run_id,
                nodes=tuple(c.labels.get(LABEL_NODE) or str(c.name) for c in containers),
                states=tuple(c.status for c in containers),
                created=created,
                owner=owner,
                owner_alive=_owner_alive(owner) if owner else False,
                kept=run_labels.get(LABEL_KEEP) == "1",
                network=run_id in with_network,
                user=run_labels.get(LABEL_USER, ""),
            )
        )
    return sorted(runs, key=lambda info: info.created)


def manual_runs(runs: Sequence[RunInfo]) -> list[RunInfo]:
    """Of ``runs`` (oldest first), the clusters this user kept for faults by hand: kept, created
    by this user, and no controller driving them any more."""
    return [run for run in runs if run.kept and run.mine and not run.owner_alive]


def remove_run(run_id: str) -> int:
    """Remove the containers (in parallel, forcibly) then the network of ``run_id``.

    Returns how many containers and networks were removed.
    """
    containers = _containers(run_id)
    removed = 0
    if containers:
        with ThreadPoolExecutor(len(containers), thread_name_prefix="cluster-down") as pool:
            removed += sum(pool.map(_remove_container, containers))
    for network in _networks(run_id):
        removed += _remove_network(network)
    return removed


def _remove_network(network: Network) -> int:
    try:
        network.remove()
    except docker.errors.NotFound:
        return 0
    except docker.errors.APIError as problem:
        if "active endpoints" not in str(problem):
            raise
        # The engine can keep an endpoint of a container that is already gone (seen after
        # containers were force-removed under heavy load); only a forced disconnect or an
        # engine restart clears it.
        for endpoint in network.attrs.get("Containers") or {}:
            with contextlib.suppress(docker.errors.APIError):
                network.disconnect(endpoint, force=True)
        try:
            network.remove()
        except docker.errors.NotFound:
            return 0
        except docker.errors.APIError as again:
            raise ClusterError(
                f"the Docker engine will not remove network {network.name}: it still counts "
                "endpoints of containers that are gone; restart the engine (systemctl restart "
                "docker, or bash scripts/install.sh) and run fencecheck cluster gc again"
            ) from again
    return 1


def _remove_container(container: Container) -> int:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return 0
    except docker.errors.APIError as problem:
        # A removal already in progress (two teardowns racing) finishes on its own.
        if "already in progress" in str(problem):
            return 0
        raise
    return 1


def gc(*, include_kept: bool = False) -> int:
    """Remove what crashed runs left: runs whose owning controller process is gone.

    Runs kept on purpose (``fencecheck cluster up``) stay unless ``include_kept``; runs whose
    owner still runs are never touched. Returns the number of containers and networks removed;
    raises :class:`ClusterError` naming the fix when the engine refused to let some of them go
    (after removing all the others).
    """
    removed = 0
    stuck: list[ClusterError] = []
    for run in list_runs():
        if run.owner_alive or (run.kept and not include_kept):
            continue
        # One run the engine will not let go of must not keep the others on the machine.
        try:
            removed += remove_run(run.run_id)
        except ClusterError as problem:
            stuck.append(problem)
    if stuck:
        more = f" (and {len(stuck) - 1} more like it)" if len(stuck) > 1 else ""
        raise ClusterError(f"removed {removed} containers and networks, but {stuck[0]}{more}")
    return removed
