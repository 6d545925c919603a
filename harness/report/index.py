"""The run browser: ``store/index.html``, one row per run with its verdict and links.

The runner rewrites it after every run; ``fencecheck serve`` shows it. Like the reports, it is one
self-contained page (filtering and sorting are a few lines of inline script), and its links are
relative, so the store can be copied, zipped or uploaded as a CI artifact and still browse.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from harness.report.page import page, write_file
from harness.run.store import find_runs
from harness.run.summary import VERDICTS, RunSummary, summarize

__all__ = ["INDEX_NAME", "write_index"]

INDEX_NAME: Final = "index.html"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _link(root: Path, target: Path, label: str) -> str:
    if not target.exists():
        return f'<span class="missing">{_e(label)}</span>'
    href = target.relative_to(root).as_posix()
    return f'<a href="{_e(href)}">{_e(label)}</a>'


def _row(root: Path, summary: RunSummary) -> str:
    run = summary.run
    started = summary.started.strftime("%Y-%m-%d %H:%M:%S") if summary.started else summary.stamp
    sort_time = summary.started.isoformat() if summary.started else summary.stamp
    anomalies = ", ".join(summary.anomaly_types)
    if summary.expected_types:
        anomalies += (" · " if anomalies else "") + "expected: " + ", ".join(summary.expected_types)
    notes = summary.problem or "; ".join(summary.unknown_reasons)
    note_html = f'<div class="detail">{_e(notes)}</div>' if notes else ""
    links = " ".join(
        _link(root, path, label)
        for path, label in (
            (run.report, "report"),
            (run.results, "results"),
            (run.history, "history"),
            (run.test_json, "test"),
        )
    )
    title = _link(root, run.report, summary.test) if run.report.exists() else _e(summary.test)
    cells = (
        f'<td data-sort="{_e(sort_time)}">{_e(started)}</td>',
        f"<td>{title}</td>",
        f"<td>{_e(summary.system)}</td>",
        f"<td>{_e(', '.join(summary.bugs) or '—')}</td>",
        f"<td>{_e(', '.join(summary.nemeses) or '—')}</td>",
        f"<td>{_e(summary.workload or '—')}</td>",
        f'<td data-sort="{_e(summary.seed if summary.seed is not None else "")}">'
        f"{_e(summary.seed if summary.seed is not None else '—')}</td>",
        f'<td data-sort="{VERDICTS.index(summary.verdict)}">'
        f'<span class="pill {summary.verdict}">{_e(summary.verdict)}</span></td>',
        f"<td>{_e(anomalies or '—')}{note_html}</td>",
        f'<td class="links">{links}</td>',
    )
    return f'<tr data-verdict="{summary.verdict}">{"".join(cells)}</tr>'


def write_index(root: Path, fresh: Sequence[RunSummary] = ()) -> Path:
    """Write ``root/index.html`` listing every run under ``root``, newest first; ``fresh`` are
    summaries the caller already has (the run just checked), used instead of reading again."""
    root = Path(root)
    known = {summary.run.path.resolve(): summary for summary in fresh}
    summaries = [
        known.get(run.path.resolve()) or summarize(run) for run in reversed(find_runs(root))
    ]
    counts = {verdict: 0 for verdict in VERDICTS}
    for summary in summaries:
        counts[summary.verdict] += 1
    filters = "".join(
        f'<button class="filter" data-verdict="{v}">{v} <b>{counts[v]}</b></button>'
        for v in VERDICTS
        if counts[v]
    )
    head = "".join(
        f'<th data-col="{n}">{_e(h)}</th>'
        for n, h in enumerate(
            (
                "started (UTC)",
                "test",
                "system",
                "bug switches",
                "nemeses",
                "workload",
                "seed",
                "verdict",
                "anomalies",
                "files",
            )
        )
    )
    rows = "".join(_row(root, s) for s in summaries)
    if summaries:
        table = f'<table id="runs"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    else:
        table = '<p class="none">No runs yet. Start one with <code>fencecheck run</code>.</p>'
    latest = _link(root, root / "latest" / "report.html", "latest report")
    body = (
        '<header class="top"><div class="brand">fencecheck</div><h1>Runs</h1></header>'
        '<main><section class="card">'
        f'<div class="index-tools"><input id="search" type="search" '
        f'placeholder="filter: system, bug, nemesis, anomaly…" aria-label="filter runs">'
        f'<button class="filter active" data-verdict="">all <b>{len(summaries)}</b></button>'
        f'{filters}<span class="latest">{latest}</span></div>'
        f"{table}</section></main>"
    )
    text = page("fencecheck runs", body, styles=("base.css", "index.css"), scripts=("index.js",))
    return write_file(root / INDEX_NAME, text)
