"""Results people want to read: the HTML report of one run.

:func:`write_report` turns a run directory (``test.json``, ``history.jsonl``, ``results.json``)
into ``report.html``: one self-contained file with the verdict, each anomaly in words with the
operations behind it, a zoomable timeline with fault windows, accepted epochs per sink and lock,
latency, throughput, the write-path inventory and the counts.
"""

from __future__ import annotations

from pathlib import Path

from harness.report.data import ReportData, extract
from harness.report.index import write_index
from harness.report.page import write_file
from harness.report.render import render_report
from harness.run.store import RunDir
from harness.run.summary import RunSummary, summarize

__all__ = [
    "ReportData",
    "RunSummary",
    "extract",
    "publish",
    "render_report",
    "summarize",
    "write_report",
]


def write_report(run_dir: RunDir) -> Path:
    """Write ``report.html`` into ``run_dir`` (atomically) and return its path."""
    return write_file(run_dir.report, render_report(extract(run_dir)))


def publish(run_dir: RunDir) -> Path:
    """Write a checked run's ``report.html`` and refresh its store's ``index.html``."""
    report = write_report(run_dir)
    write_index(run_dir.path.parent.parent)
    return report
