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


def write_report(run_dir: RunDir, summary: RunSummary | None = None) -> Path:
    """Write ``report.html`` into ``run_dir`` (atomically) and return its path; ``summary`` is
    the run's when the caller has it (its files are not read again)."""
    return write_file(run_dir.report, render_report(extract(run_dir, summary=summary)))


def publish(run_dir: RunDir, summary: RunSummary | None = None) -> RunSummary:
    """Write a checked run's ``report.html`` and refresh its store's ``index.html``; returns the
    run's summary (``summary`` when given, else read once here), for the caller's verdict and
    JUnit case, so ``test.json`` and ``results.json`` are read once per run."""
    summary = summary if summary is not None else summarize(run_dir)
    write_report(run_dir, summary)
    write_index(run_dir.path.parent.parent, fresh=(summary,))
    return summary
