"""Order cycles as evidence: two orders that must agree, and the cycle that shows they do not.

A stale write is a cycle between the sink's order and the epoch order; a real-time violation is a
cycle between the sink's order and real time. The graph is built only for an anomaly already
found, from its two or three operations, so it costs nothing on the main path.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["order_cycle"]


def order_cycle(edges: Iterable[tuple[str, str, str]]) -> list[list[str]]:
    """The cycle through ``(before, after, relation)`` edges, as ``[before, after, relation]``.

    Returns an empty list when the edges make no cycle.
    """
    import networkx as nx  # deferred: only histories with anomalies pay for the import

    graph = nx.MultiDiGraph()
    for before, after, relation in edges:
        graph.add_edge(before, after, relation=relation)
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return []
    return [
        [before, after, graph.edges[before, after, key]["relation"]] for before, after, key in cycle
    ]
