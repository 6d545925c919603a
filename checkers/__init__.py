"""Pure functions from a history to a verdict: no network, no containers, no clocks.

``check(events)`` / ``check_file(path)`` return a :class:`CheckResult`: ``valid`` (true, false or
"unknown"), the anomalies of docs/design.md §5 with their evidence and explanations, per-sink
verdicts and ``to_json()`` for ``results.json``.
"""

from checkers.check import check, check_file
from checkers.evidence import ANOMALY_NAMES, Anomaly, FaultWindow, OpRef
from checkers.findings import DEFAULT_MAX_EVIDENCE
from checkers.result import CheckResult, Counts, SinkVerdict, Verdict

__all__ = [
    "ANOMALY_NAMES",
    "DEFAULT_MAX_EVIDENCE",
    "Anomaly",
    "CheckResult",
    "Counts",
    "FaultWindow",
    "OpRef",
    "SinkVerdict",
    "Verdict",
    "check",
    "check_file",
]
