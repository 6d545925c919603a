"""What holders do: fenced append, read-modify-write, multi-sink.

Workloads describe behaviour only; the runner records every operation they perform.
"""

from __future__ import annotations

from workloads.append import Append
from workloads.base import (
    Completion,
    HolderFlaws,
    Ops,
    Workload,
    WorkloadOptions,
    final_read_count,
    final_reads,
)
from workloads.rmw import ReadModifyWrite
from workloads.sinks import MultiSink

__all__ = [
    "WORKLOADS",
    "Completion",
    "HolderFlaws",
    "Ops",
    "Workload",
    "WorkloadOptions",
    "final_read_count",
    "final_reads",
    "get_workload",
]

WORKLOADS: dict[str, Workload] = {w.name: w for w in (Append(), ReadModifyWrite(), MultiSink())}


def get_workload(name: str) -> Workload:
    """The workload called ``name``; a ``KeyError`` naming the choices otherwise."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(
            f"unknown workload {name!r}; choose one of {', '.join(sorted(WORKLOADS))}"
        ) from None
