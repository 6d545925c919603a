"""Heal a cluster without knowing which faults are in force: for a controller that did not apply
them (``fencecheck nemesis heal`` in a new process), or after one that crashed.

Per node, each fault kind's recovery in the registry's healing order (thaw a node known to be
frozen, remove any CPU quota, remove our iptables chain, continue every stopped process, restart
the daemons known to be killed: each step needs the previous one). Every step of every node is
tried; the report lists what failed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from harness.node import Node
from nemeses._fanout import on_each
from nemeses.kinds import Leftovers
from nemeses.processes import ProcessImage
from nemeses.protocol import HealReport
from nemeses.registry import healing_order

__all__ = ["heal_nodes"]


def heal_nodes(
    nodes: Mapping[str, Node],
    *,
    frozen: Collection[str] = (),
    killed: Mapping[str, Sequence[ProcessImage]] | None = None,
) -> HealReport:
    """Undo every fault that can be found on ``nodes``, plus the freezes and kills named.

    ``frozen`` names the nodes to thaw (whether a node is frozen cannot be asked of every
    backend); ``killed`` gives, by node, the daemons to start again.
    """
    reports, failures = on_each(
        list(nodes.values()),
        lambda node: _heal_node(node, node.name in frozen, (killed or {}).get(node.name, ())),
    )
    report = HealReport()
    for one in reports:
        report.merge(one)
    report.errors.extend(f"{node.name}: {error}" for node, error in failures)
    return report


def _heal_node(node: Node, frozen: bool, killed: Sequence[ProcessImage]) -> HealReport:
    leftovers = Leftovers(frozen, tuple(killed))
    report = HealReport()
    for kind in healing_order():
        if kind.recover is None:
            continue
        try:
            outcome = kind.recover(node, leftovers)
        except Exception as problem:  # every kind is tried; the report lists failures
            report.errors.append(f"{node.name}: cannot undo {kind.name}: {problem}")
            continue
        # False / [] mean there was nothing to undo.
        if outcome is not False and outcome != []:
            report.healed.append(f"{node.name}: undo {kind.name}: done")
    return report
