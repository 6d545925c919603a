"""Pure functions from a history to a verdict: no network, no containers, no clocks.

``check(events)`` / ``check_file(path)`` return one :class:`~harness.record.verdict.Verdict`:
``valid`` (true, false or "unknown"), the anomalies of docs/design.md §5 with their evidence and
explanations, per-sink verdicts, counts and the run's coverage, all from one pass over the
history, and ``to_json()`` for ``results.json``. The verdict's types live in the record layer
(:mod:`harness.record.verdict`), which owns ``results.json``'s schema; the checkers build them.
"""

from checkers.check import check, check_file
from checkers.findings import DEFAULT_MAX_EVIDENCE
from checkers.registry import ANOMALY_NAMES
from harness.record.verdict import (
    Anomaly,
    Counts,
    Coverage,
    FaultWindow,
    OpRef,
    SinkVerdict,
    Validity,
    Verdict,
)

__all__ = [
    "ANOMALY_NAMES",
    "DEFAULT_MAX_EVIDENCE",
    "Anomaly",
    "Counts",
    "Coverage",
    "FaultWindow",
    "OpRef",
    "SinkVerdict",
    "Validity",
    "Verdict",
    "check",
    "check_file",
]
