"""Partition topologies: which packets between which nodes a partition drops.

A partition is a directed graph of who reaches whom (:func:`intended_reachability`); the pairs it
lacks are its *drops*, ``(source, destination)`` pairs of node names: packets from source to
destination are dropped, and that is what the iptables rules enforce. The topologies of
docs/design.md §7:

- ``isolate``: the targets cannot talk to the peers (default: every other node), both ways.
- ``halves``: the targets are one half, the peers (default: the rest) the other; both ways.
- ``bridge``: the one target reaches everybody, but the peers and the rest (the two halves it
  bridges) cannot reach each other.
- ``one-way``: packets from the targets to the peers are dropped; the other direction flows
  (``inbound=True`` turns it round: packets from the peers to the targets are dropped).
- ``lock-cut``: the targets (a holder) cannot talk to the peers (the lock service) both ways, and
  still reach every other node (the store): the lease lapses while writes still get through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx

from harness.record.schedule import TOPOLOGIES
from nemeses.protocol import Fault, NemesisError

__all__ = [
    "TOPOLOGIES",
    "Drop",
    "intended_reachability",
    "partition_drops",
    "partition_fault",
    "reachability",
]


Drop = tuple[str, str]
"""``(source, destination)``: packets from source to destination are dropped."""


def intended_reachability(
    topology: str,
    targets: Sequence[str],
    nodes: Iterable[str],
    peers: Sequence[str] | None = None,
    *,
    inbound: bool = False,
) -> nx.DiGraph:
    """Who reaches whom under ``topology``: an edge ``a -> b`` when a's packets arrive at b.

    Raises :class:`NemesisError` naming the problem for unknown nodes, overlapping or empty sides.
    """
    everyone = list(dict.fromkeys(nodes))
    if topology not in TOPOLOGIES:
        raise NemesisError(
            f"unknown partition topology {topology!r}; choose one of {', '.join(TOPOLOGIES)}"
        )
    _known(everyone, targets, "target")
    if not targets:
        raise NemesisError(f"a {topology} partition needs at least one target node")
    if peers is not None:
        _known(everyone, peers, "peer")
        overlap = sorted(set(targets) & set(peers))
        if overlap:
            raise NemesisError(f"{', '.join(overlap)} cannot be both a target and a peer")
    graph = reachability(everyone, ())
    others = [name for name in everyone if name not in targets]
    if topology == "bridge":
        if len(targets) != 1:
            raise NemesisError("a bridge partition has exactly one target: the bridge node")
        if not peers:
            raise NemesisError("a bridge partition needs peers: the nodes of one half")
        rest = [name for name in others if name not in peers]
        graph.remove_edges_from(_both_ways(peers, _nonempty(rest, "the bridge's other half")))
        return graph
    if topology in ("one-way", "lock-cut") and not peers:
        raise NemesisError(f"a {topology} partition needs peers (whom the targets are cut from)")
    chosen = _nonempty(list(peers) if peers else others, "the peers")
    if topology == "one-way":
        graph.remove_edges_from(
            (peer, target) if inbound else (target, peer) for target in targets for peer in chosen
        )
    else:
        graph.remove_edges_from(_both_ways(targets, chosen))
    return graph


def reachability(nodes: Iterable[str], drops: Iterable[Drop]) -> nx.DiGraph:
    """The graph of who reaches whom among ``nodes`` when ``drops`` are dropped."""
    graph = nx.complete_graph(list(dict.fromkeys(nodes)), create_using=nx.DiGraph)
    graph.remove_edges_from(drops)
    return graph


def partition_drops(
    topology: str,
    targets: Sequence[str],
    nodes: Iterable[str],
    peers: Sequence[str] | None = None,
    *,
    inbound: bool = False,
) -> frozenset[Drop]:
    """The drops of ``topology``: every pair of nodes its intended graph has no edge for."""
    everyone = list(dict.fromkeys(nodes))
    graph = intended_reachability(topology, targets, everyone, peers, inbound=inbound)
    return frozenset(nx.complement(graph).edges())


def partition_fault(
    topology: str,
    targets: Sequence[str],
    nodes: Iterable[str],
    peers: Sequence[str] | None = None,
    *,
    inbound: bool = False,
) -> Fault:
    """A partition :class:`Fault` with its drops worked out (recorded with the fault)."""
    drops = partition_drops(topology, targets, nodes, peers, inbound=inbound)
    params: dict[str, object] = {"topology": topology, "drops": sorted(map(list, drops))}
    if peers:
        params["peers"] = list(peers)
    if inbound:
        params["direction"] = "in"
    return Fault("partition", tuple(targets), params)


def _both_ways(left: Sequence[str], right: Sequence[str]) -> frozenset[Drop]:
    return frozenset(drop for a in left for b in right for drop in ((a, b), (b, a)))


def _known(everyone: list[str], names: Sequence[str], what: str) -> None:
    unknown = sorted(set(names) - set(everyone))
    if unknown:
        raise NemesisError(
            f"unknown {what} node(s) {', '.join(unknown)}; nodes: {', '.join(everyone)}"
        )


def _nonempty(names: list[str], what: str) -> list[str]:
    if not names:
        raise NemesisError(f"{what} would be empty; nothing would be partitioned")
    return names
