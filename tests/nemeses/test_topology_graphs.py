"""Partition topologies as graphs of who reaches whom: each topology's intended shape."""

from __future__ import annotations

import networkx as nx

from nemeses.topology import intended_reachability, partition_drops, reachability

NODES = ["l1", "s1", "w1", "w2", "w3"]


def test_isolate_leaves_the_target_alone_and_the_rest_whole() -> None:
    graph = intended_reachability("isolate", ["w1"], NODES)
    assert graph.degree("w1") == 0
    assert nx.is_strongly_connected(graph.subgraph(n for n in NODES if n != "w1"))


def test_halves_are_the_two_strongly_connected_components() -> None:
    graph = intended_reachability("halves", ["l1", "w1"], NODES)
    components = {frozenset(c) for c in nx.strongly_connected_components(graph)}
    assert components == {frozenset({"l1", "w1"}), frozenset({"s1", "w2", "w3"})}


def test_a_bridge_is_the_one_node_whose_loss_splits_the_cluster() -> None:
    graph = intended_reachability("bridge", ["w2"], NODES, ["l1"])
    assert set(nx.articulation_points(graph.to_undirected(reciprocal=True))) == {"w2"}
    assert not graph.has_edge("l1", "s1") and graph.has_edge("l1", "w2")


def test_one_way_is_asymmetric_in_the_direction_asked() -> None:
    outbound = intended_reachability("one-way", ["w1"], NODES, ["s1"])
    assert not outbound.has_edge("w1", "s1") and outbound.has_edge("s1", "w1")
    inbound = intended_reachability("one-way", ["w1"], NODES, ["s1"], inbound=True)
    assert inbound.has_edge("w1", "s1") and not inbound.has_edge("s1", "w1")


def test_lock_cut_keeps_the_holder_on_the_store() -> None:
    graph = intended_reachability("lock-cut", ["w2"], NODES, ["l1"])
    assert not graph.has_edge("w2", "l1") and not graph.has_edge("l1", "w2")
    assert graph.has_edge("w2", "s1") and graph.has_edge("s1", "w2")


def test_the_drops_are_exactly_the_missing_edges() -> None:
    for topology, targets, peers in (
        ("isolate", ["w1"], None),
        ("halves", ["l1", "w1"], None),
        ("bridge", ["w2"], ["l1"]),
        ("one-way", ["w1"], ["s1"]),
        ("lock-cut", ["w2"], ["l1"]),
    ):
        drops = partition_drops(topology, targets, NODES, peers)
        graph = intended_reachability(topology, targets, NODES, peers)
        assert nx.utils.graphs_equal(reachability(NODES, drops), graph), topology
