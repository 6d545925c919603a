"""Partition: iptables DROP rules in the nodes' network namespaces, in a chain of our own.

Setup removes anything of ours a crashed run left, installs our empty chain with its jumps first
in INPUT and OUTPUT, and checks that nothing precedes them (the first iptables call in a fresh
namespace is slow, so setup also takes that delay out of the first fault). A fault then costs one
``iptables-restore --noflush`` per node it touches, run from the controller's host in the node's
namespace when the backend allows (:class:`harness.node.NetnsRunner`), else inside the node. The
restore's success is the confirmation: the kernel swaps the rules in atomically.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from harness.node import CommandResult, NetnsRunner, Node, NodeError
from nemeses._base import NodeNemesis, raise_failures
from nemeses._fanout import on_each
from nemeses.kinds import LOCK_FOLLOWER, Draw, FaultKind, ManualCommand, ManualOption, node_names
from nemeses.protocol import Fault, FaultKey, HealReport, NemesisError, fault_fs
from nemeses.rules import (
    chain_rules,
    fill_script,
    jumps_first,
    place_drops,
    removal_script,
)
from nemeses.topology import TOPOLOGIES, Drop, partition_fault

__all__ = ["KIND", "PartitionNemesis", "remove_rules"]

_LIST: Final = ("iptables", "-w", "-S")
_RESTORE: Final = ("iptables-restore", "-w", "--noflush")


class PartitionNemesis(NodeNemesis):
    """Drops packets between nodes as a partition fault's ``params["drops"]`` say.

    Partitions in force at once add up: each node's chain holds the union of what the active
    faults placed on it, and ending one fault rewrites only the nodes it touched.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._placed: dict[FaultKey, dict[str, set[Drop]]] = {}
        self._chained: set[str] = set()

    @property
    def fs(self) -> frozenset[str]:
        """``start-partition`` and ``stop-partition``."""
        return fault_fs("partition")

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Clean leftovers and install our empty chain on every node (raises if any fails)."""
        super().setup(nodes)
        _, failures = on_each(list(self._nodes.values()), self._prepare)
        raise_failures("partition setup failed", [(n.name, error) for n, error in failures])

    def _prepare(self, node: Node) -> None:
        remove_rules(node)
        _restore(node, fill_script([], install_jumps=True))
        if not jumps_first(_listing(node)):
            raise NemesisError(
                f"{node.name}: our jumps are not the first rules of INPUT and OUTPUT, so an "
                "earlier rule could let packets past our drops; something else inserts rules there"
            )
        with self._lock:
            self._chained.add(node.name)

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Install (start) or remove (stop) the fault's drops; returns the nodes rewritten."""
        starting = self.starts(f)
        with self._lock:
            if starting:
                drops = self._drops(fault)
                placed = place_drops(drops, prefer=fault.targets)
                self._placed[fault.key] = placed
            else:
                placed = self._placed.pop(fault.key, {})
                if not placed:
                    raise NemesisError(
                        f"stop-partition {fault.describe()}: no such partition is in force"
                    )
            touched = sorted(placed)
            scripts = {name: self._fill_for(name) for name in touched}
        _, failures = on_each(touched, lambda name: self._install(name, scripts[name]))
        raise_failures(f"{f} failed", [(name, error) for name, error in failures])
        return {"rules_on": touched}

    def _drops(self, fault: Fault) -> set[Drop]:
        raw = fault.params.get("drops")
        if not isinstance(raw, list | tuple) or not raw:
            raise NemesisError(
                f"partition {fault.describe()} has no drops; build it with "
                "nemeses.topology.partition_fault"
            )
        drops = {(str(source), str(dest)) for source, dest in raw}
        for name in sorted({name for drop in drops for name in drop}):
            self.node(name)
        return drops

    def _fill_for(self, name: str) -> bytes:
        """The restore input giving ``name`` exactly the rules the active partitions place on it."""
        ips = {node_name: node.ip for node_name, node in self._nodes.items()}
        drops = [drop for placed in self._placed.values() for drop in placed.get(name, ())]
        return fill_script(chain_rules(name, drops, ips), install_jumps=name not in self._chained)

    def _install(self, name: str, script: bytes) -> None:
        _restore(self.node(name), script)
        with self._lock:
            self._chained.add(name)

    def heal(self) -> HealReport:
        """Remove our chain and its jumps from every node, whatever this object thinks is there."""
        with self._lock:
            self._placed.clear()
            self._chained.clear()
        nodes = list(self._nodes.values())
        removed, failures = on_each(nodes, lambda node: (node.name, remove_rules(node)))
        return HealReport(
            healed=[f"removed our iptables rules on {name}" for name, had in removed if had],
            errors=[f"{node.name}: {error}" for node, error in failures],
        )


def remove_rules(node: Node) -> bool:
    """Remove our chain and every jump to it from ``node``, confirmed by listing the rules again;
    returns whether there was anything to remove."""
    script = removal_script(_listing(node))
    if script is None:
        return False
    _restore(node, script)
    if removal_script(_listing(node)) is not None:
        raise NemesisError(f"{node.name}: our iptables rules are still there after removal")
    return True


def _listing(node: Node) -> str:
    return _checked(node, _iptables(node, _LIST)).stdout


def _restore(node: Node, script: bytes) -> None:
    _checked(node, _iptables(node, _RESTORE, script))


def _iptables(node: Node, argv: Sequence[str], stdin: bytes | None = None) -> CommandResult:
    try:
        if isinstance(node, NetnsRunner):
            return node.run_in_netns(argv, stdin=stdin)
        return node.run(argv, stdin=stdin)
    except NodeError as problem:
        raise NemesisError(f"{node.name}: cannot run {argv[0]}: {problem}") from None


def _checked(node: Node, result: CommandResult) -> CommandResult:
    if not result.ok:
        raise NemesisError(
            f"{node.name}: iptables failed (exit {result.exit_code}): "
            f"{(result.stderr or result.stdout).strip()[-500:]}; the node needs iptables and "
            "the NET_ADMIN capability"
        )
    return result


# Which companion option each manual topology takes, and what it means there.
_COMPANIONS: Final[dict[str, str]] = {
    "isolate": "from",
    "lock-cut": "from",
    "one-way": "to",
    "bridge": "side",
}


def _draw(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A topology drawn among those the cluster, the target and the run (``--partitions``)
    allow, with its peers."""
    names = sorted(draw.nodes)
    target = draw.target
    if target == LOCK_FOLLOWER:
        # Cut from the quorum, not from its clients: the shape a follower answers stale reads in
        # (the resolved follower is left out of its own peers).
        _allowed(["isolate"], draw)
        return (target,), {"topology": "isolate", "peers": draw.of_role("lock")}
    others = [name for name in names if name != target]
    cut_from = [name for name in draw.of_role("lock") if name != target]
    if draw.role == "lock":
        cut_from = [name for name in draw.of_role("store") if name != target] or others[:1]
    topologies = ["isolate"]
    if len(names) >= 2:
        topologies.append("halves")
    if cut_from:
        topologies.append("one-way")
        if draw.role != "lock" and draw.of_role("lock"):
            topologies.append("lock-cut")
    if target in draw.nodes and len(names) >= 3:
        topologies.append("bridge")
    topology = draw.rng.choice(_allowed(topologies, draw))
    if topology == "isolate":
        return (target,), {"topology": topology}
    if topology in ("one-way", "lock-cut"):
        params: dict[str, Any] = {"topology": topology, "peers": cut_from}
        if topology == "one-way":
            params["direction"] = draw.rng.choice(("out", "in"))
        return (target,), params
    shuffled = draw.rng.sample(others, len(others))
    if topology == "halves":
        # The target plus others up to half of the cluster, against the rest.
        side = shuffled[: max(0, len(names) // 2 - 1)]
        return (target, *side), {"topology": topology}
    peers = shuffled[: len(shuffled) // 2]
    return (target,), {"topology": topology, "peers": peers}


def _allowed(fitting: list[str], draw: Draw) -> list[str]:
    """The topologies of ``fitting`` the run allows; none is a run that cannot be played."""
    allowed = [topology for topology in fitting if topology in draw.topologies]
    if not allowed:
        raise NemesisError(
            f"no partition of --partitions {','.join(draw.topologies)} can be aimed at "
            f"{draw.target} ({draw.role}) in this cluster, which allows {', '.join(fitting)}; "
            "add one of those or aim the partitions elsewhere with --target"
        )
    return allowed


def _manual(nodes: tuple[str, ...], values: Mapping[str, Any], roles: Mapping[str, str]) -> Fault:
    chosen = {topology: values[topology] for topology in TOPOLOGIES if values.get(topology)}
    if len(chosen) != 1:
        raise NemesisError("give exactly one of " + ", ".join(f"--{t}" for t in TOPOLOGIES))
    ((topology, targets),) = chosen.items()
    for companion in sorted(set(_COMPANIONS.values())):
        if values.get(companion) and _COMPANIONS.get(topology) != companion:
            raise NemesisError(f"--{companion} does not apply to --{topology}")
    partner = _COMPANIONS.get(topology)
    given = list(node_names(values.get(partner), roles)) if partner else []
    if topology in ("one-way", "bridge") and not given:
        raise NemesisError(f"--{topology} needs --{partner}: the nodes of the other side")
    if topology == "lock-cut" and not given:
        given = [name for name, role in roles.items() if role == "lock"]
        if not given:
            raise NemesisError("this cluster has no lock node; name the peers with --from")
    return partition_fault(topology, node_names(targets, roles), list(roles), given or None)


def _fault(targets: tuple[str, ...], params: Mapping[str, Any], nodes: Sequence[str]) -> Fault:
    """A window's partition: its drops worked out from its topology, targets and peers."""
    peers = [peer for peer in params.get("peers") or () if peer not in targets]
    return partition_fault(
        str(params.get("topology", "isolate")),
        targets,
        nodes,
        peers or None,
        inbound=params.get("direction") == "in",
    )


KIND = FaultKind(
    name="partition",
    summary="drop packets with iptables in our own chain: isolate, halves, bridge, one-way, "
    "lock-cut",
    verb="partitioned",
    colour="#c45ab3",
    heal_rank=3,
    holds="network",
    cluster_wide=True,
    stops_holder=True,
    fault=lambda targets, params, nodes: _fault(targets, params, nodes),
    pinnable=False,
    build=lambda locate, restarter: PartitionNemesis(),
    draw=_draw,
    recover=lambda node, leftovers: remove_rules(node),
    manual=ManualCommand(
        help="Drop packets between nodes with iptables (replacing the partition in force).",
        fault=_manual,
        options=(
            ManualOption("isolate", "Cut these nodes off (from --from, default all)."),
            ManualOption("halves", "These nodes against all the others."),
            ManualOption("bridge", "This node reaches both halves: --side and the rest."),
            ManualOption("one-way", "Drop packets from these nodes to --to."),
            ManualOption("lock-cut", "Cut these from the lock nodes (or --from) only."),
            ManualOption("from", "Peers for --isolate and --lock-cut."),
            ManualOption("to", "Destinations for --one-way."),
            ManualOption("side", "One half for --bridge."),
        ),
        takes_nodes=False,
        examples=(
            "fencecheck nemesis partition --isolate w2 --from l1 --for 5s",
            "fencecheck nemesis partition --halves l1,w1",
            "fencecheck nemesis partition --one-way w1 --to s1",
            "fencecheck nemesis partition --lock-cut w2",
            "fencecheck nemesis partition --bridge w2 --side l1,w1",
        ),
    ),
)
"""The partition fault kind's registry entry."""
