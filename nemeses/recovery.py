"""Heal a cluster without knowing which faults are in force: for a controller that did not apply
them (``fencecheck nemesis heal`` in a new process), or after one that crashed.

Per node, in this order (each step needs the previous one): thaw it if it is known to be frozen,
remove any CPU quota, remove our iptables chain, continue every stopped process, restart the daemons
known to be killed. Every step of every node is tried; the report lists what failed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial

from harness.node import Freezable, Node, Throttleable
from nemeses._fanout import on_each
from nemeses.freeze import FreezeNemesis
from nemeses.partition import remove_rules
from nemeses.processes import ProcessImage, continue_stopped, restart
from nemeses.protocol import HealReport
from nemeses.throttle import ThrottleNemesis

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
    steps: list[tuple[str, Callable[[], object]]] = []
    if frozen and isinstance(node, Freezable):
        steps.append(("thaw", partial(FreezeNemesis().undo, node)))
    if isinstance(node, Throttleable):
        steps.append(("remove the CPU quota", partial(ThrottleNemesis().undo, node)))
    steps.append(("remove our iptables rules", partial(remove_rules, node)))
    steps.append(("continue stopped processes", partial(continue_stopped, node)))
    steps.extend((f"restart {image.name}", partial(restart, node, image)) for image in killed)
    report = HealReport()
    for what, step in steps:
        try:
            outcome = step()
        except Exception as problem:  # every step is tried; the report lists failures
            report.errors.append(f"{node.name}: cannot {what}: {problem}")
            continue
        # False / [] mean there was nothing to undo.
        if outcome is not False and outcome != []:
            report.healed.append(f"{node.name}: {what}: done")
    return report
