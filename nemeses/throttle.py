"""Throttle: cap a node's CPU with a cgroup CFS quota, "throttled to a crawl" (docs/design.md §7).

The kernel refuses quotas under 1 ms, so a small share needs a long enough period: 2 % is 1 ms of
every 50 ms. :func:`cfs_quota` picks the shortest period, from 10 ms up, at which the quota reaches
1 ms: the shorter the period, the more evenly the crawl is spread (a keepalive waits at most one
period, not seconds). Restoring removes the quota and goes back to the kernel's 100 ms period.
Confirmed by the backend: :meth:`harness.node.Throttleable.set_cpu_quota` returns once the cgroup
holds the new values.
"""

from __future__ import annotations

import math
from typing import Any, Final

from harness.node import Node, Throttleable
from nemeses._base import ToggleNemesis
from nemeses.kinds import Draw, FaultKind, Leftovers, ManualCommand, ManualOption
from nemeses.protocol import Fault, NemesisError

__all__ = ["DEFAULT_CPU", "KIND", "ThrottleNemesis", "cfs_quota"]

DEFAULT_CPU: Final = 0.02
"""The default CPU share of a throttled node: 2 % of one CPU."""

_MIN_QUOTA_US: Final = 1_000
_MIN_PERIOD_US: Final = 10_000
_MAX_PERIOD_US: Final = 1_000_000
_DEFAULT_PERIOD_US: Final = 100_000


def cfs_quota(cpu: float) -> tuple[int, int]:
    """``(quota_us, period_us)`` giving ``cpu`` of one CPU (0 < cpu), shortest period first."""
    if not cpu > 0:
        raise NemesisError(f"CPU share {cpu!r} must be above 0 (e.g. 0.02 for 2 % of one CPU)")
    period = max(_MIN_PERIOD_US, math.ceil(_MIN_QUOTA_US / cpu))
    if period > _MAX_PERIOD_US:
        raise NemesisError(
            f"CPU share {cpu:g} is below what the kernel can enforce "
            f"({_MIN_QUOTA_US / _MAX_PERIOD_US:g}: 1 ms per 1 s period); choose a larger share"
        )
    return max(_MIN_QUOTA_US, round(cpu * period)), period


class ThrottleNemesis(ToggleNemesis):
    """Caps the targets to ``params["cpu"]`` of one CPU (default 2 %) until ``stop-throttle``."""

    kind = "throttle"

    def apply(self, node: Node, fault: Fault) -> dict[str, Any]:
        """Set the quota for the fault's CPU share on ``node``."""
        quota, period = cfs_quota(float(fault.params.get("cpu", DEFAULT_CPU)))
        _throttleable(node).set_cpu_quota(quota, period)
        return {"quota_us": quota, "period_us": period}

    def undo(self, node: Node) -> None:
        """Remove ``node``'s quota."""
        _throttleable(node).set_cpu_quota(None, _DEFAULT_PERIOD_US)


def _throttleable(node: Node) -> Throttleable:
    if isinstance(node, Throttleable):
        return node
    raise NemesisError(f"{node.name}: this backend cannot cap a node's CPU; use pause instead")


def _draw(draw: Draw) -> tuple[tuple[str, ...], dict[str, Any]]:
    return (draw.target,), {"cpu": draw.cpu}


def _recover(node: Node, leftovers: Leftovers) -> bool:
    if not isinstance(node, Throttleable):
        return False
    ThrottleNemesis().undo(node)
    return True


KIND = FaultKind(
    name="throttle",
    summary="cap a node to a sliver of one CPU (CFS quota): keepalives starve, leases lapse",
    verb="throttled",
    colour="#f08c2e",
    heal_rank=2,
    holds="cpu",
    stops_holder=True,
    build=lambda locate, restarter: ThrottleNemesis(),
    draw=_draw,
    recover=_recover,
    manual=ManualCommand(
        help="Cap NODES to a small share of a CPU (CFS quota); remove the cap after --for.",
        fault=lambda nodes, values, roles: Fault(
            "throttle", nodes, {"cpu": values.get("cpu", DEFAULT_CPU)}
        ),
        options=(ManualOption("cpu", "Share of one CPU left to each node.", "cpu", DEFAULT_CPU),),
    ),
)
"""The throttle fault kind's registry entry."""
