"""The report page: static HTML for what reads as text, canvases that the page's script draws.

Verdict, anomalies, inventory, counts and spec are rendered here, so they read the same with
scripts off and are plain DOM for tests. The timeline, the epoch plot, latency and throughput are
drawn by ``assets/report.js`` from the embedded data (:attr:`ReportData.payload`).
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, Final

from checkers.registry import REGISTRY
from harness.record.results import StoredOverlap, StoredResults
from harness.record.spec import SPEC_FIELDS, SpecField, TestSpec
from harness.record.verdict import seq_warning
from harness.report.data import OUTCOMES, Anomaly, ReportData, SinkRow, natural_key
from harness.report.page import page

__all__ = ["render_report"]


_VERDICT_WORDS: Final = {
    "valid": "Valid",
    "invalid": "Invalid",
    "unknown": "Unknown",
    "unchecked": "Not checked",
}
_OP_FIELDS: Final = (
    "role",
    "node",
    "process",
    "f",
    "type",
    "lock",
    "epoch",
    "id",
    "sink",
    "key",
    "position",
    "error",
    "time",
    "index",
)
_OPEN_CARDS: Final = 3
_OP_HEADINGS: Final = {"time": "completed", "index": "event", "position": "place in sink"}
_SPEC_EXTRAS: Final = {
    "lease_ttl": SpecField("duration", "", label="lease TTL", unit="s"),
    "topology": SpecField("text", ""),
    "run_id": SpecField("text", "", label="run id"),
    "started": SpecField("text", ""),
}
"""The rows of the spec table that are no spec field: what the run found out (the lease TTL the
holders used goes just before the TTL asked for)."""


def _spec_rows() -> dict[str, SpecField]:
    rows: dict[str, SpecField] = {}
    for name, spec_field in SPEC_FIELDS.items():
        if name == "ttl":
            rows["lease_ttl"] = _SPEC_EXTRAS["lease_ttl"]
        rows[name] = spec_field
    return {**rows, **_SPEC_EXTRAS}


_SPEC_ROWS: Final = _spec_rows()
"""How each row of the report's spec table is shown, in its order (the spec-field table's)."""
_SPEC_DEFAULTS: Final = TestSpec(seed=0).to_json()
"""A field equal to its default is marked so: a reader tells what was asked from what was not."""
_SPEC_ELSEWHERE: Final = frozenset(
    (
        *("inventory", "schedule", "versions", "command", "name", "test_name", "error", "store"),
        "unexposed",  # a control run's reason: the verdict says it (results.json's control)
    )
)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _seconds(ns: int | None) -> str:
    return "—" if ns is None else f"{ns / 1e9:.3f} s"


def _millis(ns: int | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:.2f} ms"


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        on = [str(k) for k, v in value.items() if v is True]
        if on and all(isinstance(v, bool) for v in value.values()):
            return ", ".join(on)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value) if value else "none"
    if isinstance(value, list) and all(isinstance(v, Mapping) and "name" in v for v in value):
        # A topology: [{"name": "l1", "role": "lock"}, ...]
        return ", ".join(
            f"{v['name']} ({v['role']})" if "role" in v else str(v["name"]) for v in value
        )
    return json.dumps(value, default=str)


def _section(anchor: str, title: str, body: str, intro: str = "") -> str:
    lead = f'<p class="intro">{intro}</p>' if intro else ""
    return f'<section id="{anchor}" class="card"><h2>{_e(title)}</h2>{lead}{body}</section>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """A table whose cells are already HTML."""
    head_html = "".join(f"<th>{_e(h)}</th>" for h in head)
    thead = f"<thead><tr>{head_html}</tr></thead>" if any(head) else ""
    body_html = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}>{thead}<tbody>{body_html}</tbody></table>"


def _verdict(data: ReportData) -> str:
    summary = data.summary
    verdict = summary.verdict
    unexpected = [a for a in data.anomalies if not a.expected]
    expected = [a for a in data.anomalies if a.expected]
    if verdict == "valid":
        line = "No accepted write carried an epoch lower than an earlier accepted one."
    elif verdict == "invalid":
        kinds = Counter(a.name for a in unexpected)
        named = ", ".join(f"{_e(name)} &times;{n}" for name, n in kinds.items())
        line = f"{_plural(len(unexpected), 'anomaly', 'anomalies')} decided the verdict: {named}."
    elif verdict == "unknown":
        line = "Too little evidence to decide."
    else:
        line = "results.json is missing: check the run with <code>fencecheck analyze</code>."
    details: list[str] = []
    if expected:
        details.append(
            f"{_plural(len(expected), 'expected anomaly', 'expected anomalies')} on sinks that "
            "cannot check epochs (listed below, not counted against the verdict)."
        )
    details.extend(_e(reason) for reason in summary.unknown_reasons)
    control = data.results.control if data.results is not None else None
    if control is not None:
        details.append(f'<span class="control-run">{_e(control)}.</span>')
    if verdict == "valid":
        # A pass that exercised nothing must not read as a plain pass (docs/design.md §10).
        details.extend(
            f'<span class="coverage-gap">But: {_e(gap)}.</span>' for gap in _gaps(data.results)
        )
    details.extend(
        f'<span class="coverage-gap">Warning: {_e(name)}: {_e(warning)}.</span>'
        for name, warning in _seq_warnings(data.results)
    )
    if summary.problem:
        details.append(_e(summary.problem))
    if data.history_problem:
        details.append(f"History: {_e(data.history_problem)}")
    if unexpected:
        details.append(f'<span class="lead-anomaly">{_e(unexpected[0].explanation)}</span>')
    extra = "".join(f"<li>{d}</li>" for d in details)
    body = (
        f'<div class="verdict verdict-{verdict}" id="verdict" data-verdict="{verdict}">'
        f'<div class="verdict-word">{_VERDICT_WORDS[verdict]}</div>'
        f'<div class="verdict-text"><p>{line}</p>{f"<ul>{extra}</ul>" if extra else ""}</div>'
        "</div>"
    )
    return body + _story(data)


def _seq_warnings(results: StoredResults | None) -> list[tuple[str, str]]:
    """Per sink, what its verdict could not judge (a fenced sink without seq), from results."""
    found = []
    for sink in sorted(results.sinks if results is not None else (), key=lambda s: s.name):
        warning = seq_warning(sink.fenced, sink.seq_observable, sink.accepted_writes or 0)
        if warning:
            found.append((sink.name, warning))
    return found


def _gaps(results: StoredResults | None) -> tuple[str, ...]:
    return results.gaps if results is not None else ()


def _coverage(data: ReportData) -> str:
    coverage = data.results.coverage if data.results is not None else None
    if coverage is None or not coverage.numbers:
        return _section(
            "coverage",
            "Coverage",
            "<p>No coverage in results.json: re-check with <code>fencecheck analyze</code>.</p>",
        )

    def per(counts: Mapping[str, object]) -> str:
        if not counts:
            return "none"
        return ", ".join(f"{_e(name)} {_e(count)}" for name, count in counts.items())

    def cell(value: int | None) -> str:
        return _e(value) if value is not None else ""

    sink_rows = [
        [_e(name), *map(cell, (row.writes, row.accepted, row.keys, row.stale_attempts))]
        for name, row in coverage.sinks.items()
    ]
    facts = _table(
        ("", ""),
        [
            ["holders stopped past their lease", per(coverage.stops_past_lease)],
            ["stale writes attempted", _e(coverage.stale_attempts)],
            ["restarts", per(coverage.restarts)],
            [
                "power losses (those that dropped data, what they dropped)",
                per(coverage.power_losses),
            ],
            ["epochs granted", _e(coverage.epochs_granted)],
            ["keys written", _e(coverage.keys_written)],
            ["unreachable most of the run", per(coverage.unreachable_nodes)],
            [
                "clock windows (across a lease's expiry)",
                f"{_e(coverage.clock_windows)} ({_e(coverage.clock_across_expiry)})",
            ],
            ["faults in force together", _overlap_cell(coverage.overlaps)],
        ],
        "coverage-facts",
    )
    gaps = "".join(f"<li>{_e(gap)}</li>" for gap in coverage.gaps)
    return _section(
        "coverage",
        "Coverage",
        facts
        + _table(("sink", "writes", "accepted", "keys", "stale attempts"), sink_rows)
        + (f'<ul class="coverage-gaps">{gaps}</ul>' if gaps else ""),
        "What this run exercised: a verdict is only as strong as the danger the run created.",
    )


def _overlap_cell(overlaps: Mapping[str, StoredOverlap]) -> str:
    """``kill+pause 2 times (3.1 s)``, one per pair of kinds that overlapped, or ``none``."""
    cells = [
        f"{_e(pair)} {_e(row.count)} times ({_e(row.seconds)} s)" for pair, row in overlaps.items()
    ]
    return ", ".join(cells) or "none"


def _story(data: ReportData) -> str:
    spec = data.spec
    summary = data.summary
    outcomes: Counter[str] = Counter()
    for by_outcome in data.counts.values():
        outcomes.update(by_outcome)
    parts = [f"<b>{_e(summary.system)}</b>"]
    if summary.bugs:
        parts.append(f" with bug switches <b>{_e(', '.join(summary.bugs))}</b>")
    else:
        parts.append(" with no bug switches")
    if summary.workload:
        parts.append(f", workload <b>{_e(summary.workload)}</b>")
    workers = spec.get("workers")
    if isinstance(workers, int):
        parts.append(f", {_plural(workers, 'worker')}")
    parts.append(f", for {_seconds(data.end_time)}.")
    ops = ", ".join(f"{outcomes[o]} {o}" for o in OUTCOMES if outcomes[o])
    parts.append(f" {_plural(data.operations, 'operation')} ({ops or 'none'})")
    if data.faults:
        kinds = ", ".join(
            f"{_e(s.kind)} &times;{s.started}" + (f" ({s.failed} failed)" if s.failed else "")
            for s in data.fault_stats
        )
        parts.append(f"; faults: {kinds}.")
    else:
        parts.append("; no faults injected.")
    stats = [
        ("operations", str(data.operations)),
        ("duration", _seconds(data.end_time)),
        ("faults", str(len(data.faults))),
        ("anomalies", str(sum(1 for a in data.anomalies if not a.expected))),
    ]
    tiles = "".join(
        f'<div class="stat"><div class="stat-value">{_e(v)}</div>'
        f'<div class="stat-label">{_e(k)}</div></div>'
        for k, v in stats
    )
    return f'<p class="story">{"".join(parts)}</p><div class="stats">{tiles}</div>'


def _op_cell(key: str, value: Any) -> str:
    if value is None:
        return ""
    if key == "time" and isinstance(value, int):
        return _seconds(value)
    return _e(value)


def _anomaly_card(number: int, anomaly: Anomaly) -> str:
    # The anomaly registry is the one table of meanings (a copy here drifted from it).
    kind = REGISTRY.get(anomaly.name)
    meaning = kind.meaning if kind is not None else ""
    stale = set(anomaly.stale_rows)
    rows: list[str] = []
    shown_fields = [f for f in _OP_FIELDS if any(getattr(op, f) is not None for op in anomaly.ops)]
    for op, row in zip(anomaly.ops, anomaly.op_rows, strict=True):
        cells = "".join(f"<td>{_op_cell(key, getattr(op, key))}</td>" for key in shown_fields)
        attrs = ""
        if row is not None:
            mark = " stale" if row in stale else ""
            attrs = f' class="op-link{mark}" data-row="{row}" tabindex="0" title="show on timeline"'
        rows.append(f"<tr{attrs}>{cells}</tr>")
    ops_table = ""
    if rows:
        head = "".join(f"<th>{_e(_OP_HEADINGS.get(f, f))}</th>" for f in shown_fields)
        ops_table = (
            f'<table class="ops"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table>"
        )
    faults = ""
    if anomaly.faults:
        items = []
        for fault in anomaly.faults:
            start, end = fault.start, fault.end
            span = f"{_seconds(start)} to " + (_seconds(end) if end is not None else "the end")
            stop = end if end is not None else start
            attrs = f' class="fault-link" data-t0="{start // 1000}" data-t1="{stop // 1000}"'
            items.append(
                f"<li{attrs}><b>{_e(fault.kind)}</b> {_e(', '.join(fault.targets))}: {span}</li>"
            )
        faults = (
            '<div class="faults-near"><span>Faults around it:</span>'
            f"<ul>{''.join(items)}</ul></div>"
        )
    tag = '<span class="tag expected">expected</span>' if anomaly.expected else ""
    sink = f'<span class="tag">sink {_e(anomaly.sink)}</span>' if anomaly.sink else ""
    klass = "anomaly expected" if anomaly.expected else "anomaly"
    return (
        f'<article class="{klass}" id="anomaly-{number}" data-anomaly="{number}">'
        f'<header><span class="anomaly-name">{_e(anomaly.name)}</span>{tag}{sink}'
        f'<button class="show-anomaly" data-anomaly="{number}">show on timeline</button></header>'
        f'<p class="meaning">{_e(meaning)}</p>'
        f'<p class="explanation">{_e(anomaly.explanation)}</p>'
        f"{ops_table}{faults}</article>"
    )


def _beyond_evidence(data: ReportData, counted: bool, shown: Iterable[Anomaly]) -> str:
    """A note for each anomaly name found more often than the evidence kept for it."""
    counts = (
        {}
        if data.results is None
        else data.results.anomaly_counts
        if counted
        else data.results.expected_counts
    )
    kept = Counter(a.name for a in shown)
    notes = [
        f"{_e(name)}: {total} found, the first {kept[name]} shown"
        for name, total in counts.items()
        if total > kept[name]
    ]
    return f'<p class="note">{"; ".join(notes)}.</p>' if notes else ""


def _cards(numbered: list[tuple[int, Anomaly]]) -> str:
    """Cards grouped by name: the first few of each open, the rest folded away."""
    by_name: dict[str, list[tuple[int, Anomaly]]] = {}
    for number, anomaly in numbered:
        by_name.setdefault(anomaly.name, []).append((number, anomaly))
    parts: list[str] = []
    for name, group in by_name.items():
        parts.extend(_anomaly_card(n, a) for n, a in group[:_OPEN_CARDS])
        rest = group[_OPEN_CARDS:]
        if rest:
            parts.append(
                f"<details><summary>{len(rest)} more {_e(name)}</summary>"
                + "".join(_anomaly_card(n, a) for n, a in rest)
                + "</details>"
            )
    return "".join(parts)


def _anomalies(data: ReportData) -> str:
    numbered = list(enumerate(data.anomalies))
    counted = [(n, a) for n, a in numbered if not a.expected]
    expected = [(n, a) for n, a in numbered if a.expected]
    if data.summary.verdict == "unchecked":
        body = '<p class="none">Not checked yet.</p>'
    elif counted:
        body = _cards(counted)
        body += _beyond_evidence(data, True, (a for _, a in counted))
    else:
        body = '<p class="none" id="no-anomalies">No anomalies count against this run.</p>'
    if expected:
        body += (
            f"<details><summary>{_plural(len(expected), 'expected anomaly', 'expected anomalies')}"
            " on sinks that cannot check epochs (mitigation <i>none</i> or <i>idempotent</i>)"
            "</summary>"
            + "".join(_anomaly_card(n, a) for n, a in expected)
            + _beyond_evidence(data, False, (a for _, a in expected))
            + "</details>"
        )
    return _section(
        "anomalies",
        "Anomalies",
        body,
        "Each anomaly is explained in words, with the operations behind it. Click an operation "
        "(or <i>show on timeline</i>) to find it in the timeline and the epoch plot.",
    )


def _timeline(data: ReportData) -> str:
    tools = (
        '<div class="toolbar" id="timeline-tools">'
        '<button data-zoom="in" title="zoom in (+)">+</button>'
        '<button data-zoom="out" title="zoom out (-)">&minus;</button>'
        '<button data-zoom="reset" title="whole run (0)">whole run</button>'
        '<span class="legend" id="legend"></span>'
        '<span class="range" id="view-range"></span></div>'
    )
    if data.shown_operations < data.operations:
        tools += (
            f'<p class="note">The timeline, latency and epoch plots carry the first '
            f"{data.shown_operations} of {data.operations} operations (and every operation an "
            "anomaly names); throughput and the counts cover all of them.</p>"
        )
    body = (
        f"{tools}"
        '<div class="overview-wrap"><canvas id="overview-canvas" height="44"></canvas></div>'
        '<div class="timeline-wrap" id="timeline-wrap"><canvas id="timeline-canvas"></canvas></div>'
        '<div class="selected" id="selected" hidden></div>'
    )
    return _section(
        "timeline",
        "Timeline",
        body,
        "One lane per worker node; each bar is one operation from its invoke to its completion, "
        "coloured by outcome. Shaded bands are faults on that node (the rows at the top show "
        "faults on every node, the lock service and store included). Drag to pan, "
        "Ctrl+scroll or the buttons to zoom, drag on the strip above to pick a range, hover "
        "for details, click to select.",
    )


def _epochs() -> str:
    return _section(
        "epochs",
        "Accepted epochs",
        '<div id="epoch-plots" class="plots"></div>',
        "Per sink and lock: each dot is an accepted write at the time it was acknowledged, at "
        "the height of its epoch, coloured by holder. The dark step is the highest epoch "
        "accepted so far and the grey step the latest epoch granted. A dot below the dark step "
        "is a write with an older epoch accepted after a newer one: the offending writes are "
        "ringed in red. Crosses are writes refused.",
    )


def _performance() -> str:
    return _section(
        "performance",
        "Latency and throughput",
        '<h3>Latency</h3><div class="chart-wrap"><canvas id="latency-canvas"></canvas></div>'
        '<h3>Throughput</h3><div class="chart-wrap"><canvas id="throughput-canvas"></canvas></div>',
        "Latency of each operation (completion &minus; invoke, log scale) at its completion time, "
        "and completions per second by outcome. Fault windows are shaded.",
    )


def _sink_verdict_cell(row: SinkRow) -> str:
    word = row.verdict
    klass = {
        "valid": "ok",
        "invalid": "bad",
        "unknown": "warn",
        "expected": "muted",
    }.get(word, "muted")
    detail = f'<div class="detail">{_e(row.detail)}</div>' if row.detail else ""
    return f'<span class="pill {klass}">{_e(word)}</span>{detail}'


def _fenced_cell(fenced: bool | None) -> str:
    if fenced is None:
        return "?"
    return '<span class="pill ok">yes</span>' if fenced else '<span class="pill bad">no</span>'


def _inventory(data: ReportData) -> str:
    if not data.inventory:
        body = '<p class="none">The system declared no write paths (no <code>inventory</code>).</p>'
    else:
        rows = [
            (
                f"<b>{_e(row.sink)}</b>",
                _fenced_cell(row.fenced),
                _e(row.mitigation),
                _e(row.description),
                _sink_verdict_cell(row),
            )
            for row in data.inventory
        ]
        body = _table(
            ("sink", "checks epochs?", "mitigation", "description", "verdict in this run"),
            rows,
            "inventory",
        )
    return _section(
        "inventory",
        "Write-path inventory",
        body,
        "Every place a holder writes to, whether it refuses stale epochs itself, and what "
        "protects it if not. A stale write on an unfenced sink with mitigation <i>none</i> is "
        "expected; anywhere else it makes the run invalid.",
    )


def _counts(data: ReportData) -> str:
    rows = []
    totals: Counter[str] = Counter()
    for f, by_outcome in data.counts.items():
        totals.update(by_outcome)
        rows.append(
            (
                f"<b>{_e(f)}</b>",
                *(str(by_outcome.get(o, 0)) for o in OUTCOMES),
                str(sum(by_outcome.values())),
            )
        )
    rows.append(("total", *(str(totals.get(o, 0)) for o in OUTCOMES), str(data.operations)))
    ops_table = _table(("operation", *OUTCOMES, "all"), rows, "counts")
    if data.shown_operations < data.operations:
        ops_table += (
            f'<p class="note">The timeline carries the first {data.shown_operations} of '
            f"{data.operations} operations (and every operation an anomaly names); counts and "
            "throughput cover all of them.</p>"
        )
    if data.fault_stats:
        fault_rows = [
            (
                f"<b>{_e(s.kind)}</b>",
                str(s.started),
                str(s.applied),
                str(s.confirmed),
                f'<span class="{"bad" if s.failed else ""}">{s.failed}</span>',
                str(s.healed),
                _millis(s.latency_p50),
                _millis(s.latency_max),
            )
            for s in data.fault_stats
        ]
        faults = _table(
            (
                "fault",
                "started",
                "applied",
                "confirmed",
                "failed",
                "healed",
                "latency p50",
                "latency max",
            ),
            fault_rows,
            "counts",
        )
        every = [
            (
                _e(f.window.kind) + (f" ({_e(f.process)})" if f.process else ""),
                _e(", ".join(f.window.targets)),
                f"{f.ttl_multiple:g}&times;" if f.ttl_multiple is not None else "",
                _seconds(f.scheduled),
                _seconds(f.confirmed),
                _millis(f.latency),
                _seconds(f.window.end) if f.window.end is not None else "never healed",
                "yes" if f.window.applied else '<span class="bad">no</span>',
                _e(" / ".join(x for x in (f.window.error, f.heal_error) if x)),
            )
            for f in data.faults
        ]
        faults += (
            f"<details><summary>every fault ({len(every)})</summary>"
            + _table(
                (
                    "fault",
                    "targets",
                    "TTLs",
                    "scheduled",
                    "confirmed",
                    "latency",
                    "healed at",
                    "applied",
                    "error",
                ),
                every,
                "faults-all",
            )
            + "</details>"
        )
    else:
        faults = '<p class="none">No faults were injected.</p>'
    return _section(
        "counts",
        "Counts",
        f"<h3>Operations by outcome</h3>{ops_table}<h3>Faults</h3>{faults}",
        "Fault latency is the time from when a fault was scheduled to when it was confirmed "
        "in force (a process seen stopped, a rule seen installed).",
    )


def _schedule(schedule: Any) -> str:
    """The nemesis schedule as a table (the runner's form), else as JSON."""
    windows = schedule.get("windows") if isinstance(schedule, Mapping) else None
    if not isinstance(windows, list) or not all(isinstance(w, Mapping) for w in windows):
        return f"<pre>{_e(json.dumps(schedule, indent=1, default=str))}</pre>"
    rows = []
    for window in windows:
        start, duration = window.get("start_ns"), window.get("duration_ns")
        targets = window.get("targets")
        multiple = window.get("ttl_multiple")
        rows.append(
            (
                _e(window.get("index", "")),
                f"<b>{_e(window.get('kind', '?'))}</b>",
                _e(", ".join(str(t) for t in targets) if isinstance(targets, list) else ""),
                _seconds(start) if isinstance(start, int) else "",
                _seconds(duration) if isinstance(duration, int) else "",
                f"{multiple:g}&times; TTL" if isinstance(multiple, int | float) else "",
                _e(window.get("fallback") or ""),
            )
        )
    return _table(
        ("#", "fault", "targets", "at", "for", "lease multiple", "fallback"), rows, "schedule"
    )


def _spec(data: ReportData) -> str:
    spec = data.spec
    keys: list[str] = [k for k in _SPEC_ROWS if k in spec and k not in _SPEC_ELSEWHERE]
    keys += [
        k
        for k in spec
        if k not in keys
        and k not in _SPEC_ELSEWHERE
        and isinstance(spec[k], str | int | float | bool | list)
    ]
    rows = []
    for key in keys:
        value = spec[key]
        row = _SPEC_ROWS.get(key)
        text = _value_text(value)
        if row is not None and row.zero and value == 0:
            text = row.zero
        elif row is not None and row.empty and value == []:
            text = row.empty
        elif row and row.unit and isinstance(value, int | float) and not isinstance(value, bool):
            text = f"{value:g} {row.unit}"
        if key != "seed" and key in _SPEC_DEFAULTS and value == _SPEC_DEFAULTS[key]:
            text += " (default)"
        title = (row.label if row else "") or key.replace("_", " ")
        rows.append((_e(title), _e(text)))
    parts = [_table(("", ""), rows, "spec")] if rows else []
    command = spec.get("command")
    if command:
        text = command if isinstance(command, str) else " ".join(str(c) for c in command)
        parts.append(
            '<h3>Run it again</h3><div class="command"><pre id="rerun">'
            f'{_e(text)}</pre><button id="copy-command">copy</button></div>'
        )
    versions = spec.get("versions")
    if isinstance(versions, Mapping) and versions:
        parts.append(
            "<h3>Versions</h3>"
            + _table(("", ""), [(_e(k), _e(_value_text(v))) for k, v in versions.items()], "spec")
        )
    schedule = spec.get("schedule")
    if schedule:
        parts.append(f"<h3>Nemesis schedule</h3>{_schedule(schedule)}")
    parts.append(
        "<details><summary>everything in test.json</summary>"
        f"<pre>{_e(json.dumps(spec, indent=2, default=str))}</pre></details>"
    )
    return _section("spec", "Test", "".join(parts))


def _replay_note(data: ReportData) -> str:
    """For a replay: what it replayed, whether it reproduced, and the windows that landed
    otherwise when it did not (so a replay that came out differently says why)."""
    replayed = data.summary.run.read_replay()
    if replayed is None:
        return ""
    head = (
        f"Replay of <code>{_e(replayed.get('of', '?'))}</code>: original "
        f"{_e(replayed.get('original', '?'))}, this run {_e(replayed.get('again', '?'))}"
    )
    if replayed.get("reproduced"):
        return f'<p class="replay" id="replay">{head}: reproduced.</p>'
    why = [str(w) for w in replayed.get("differences") or []]
    items = "".join(f"<li>{_e(w)}</li>" for w in why) or (
        "<li>every window landed as the first time: the holders' timing differed (a real "
        "cluster is not deterministic); try --pin or several replays</li>"
    )
    return (
        f'<div class="replay" id="replay"><p>{head}: not reproduced. Why it may not:</p>'
        f"<ul>{items}</ul></div>"
    )


def _logs(data: ReportData) -> str:
    """Links to each node's logs (the run folder's ``logs/NODE/``), relative to the report."""
    folder = data.summary.run.path / "logs"
    try:
        nodes = sorted(
            (p for p in folder.iterdir() if p.is_dir()), key=lambda p: natural_key(p.name)
        )
    except OSError:
        nodes = []
    rows = []
    for node in nodes:
        files = sorted(f.name for f in node.iterdir() if f.is_file())
        links = " · ".join(
            f'<a href="logs/{_e(node.name)}/{_e(name)}">{_e(name)}</a>' for name in files
        )
        rows.append((_e(node.name), links or "(empty)"))
    if not rows:
        return _section("logs", "Node logs", '<p class="note">No node logs were kept.</p>')
    return _section(
        "logs",
        "Node logs",
        _table(("node", "logs"), rows, "logs"),
        "What each node's daemons and agent wrote, collected when the cluster came down.",
    )


def render_report(data: ReportData) -> str:
    """The whole report page for ``data``."""
    summary = data.summary
    try:
        version = metadata.version("fencecheck")
    except metadata.PackageNotFoundError:
        version = "?"
    started = summary.started.strftime("%Y-%m-%d %H:%M:%S UTC") if summary.started else ""
    nav = "".join(
        f'<a href="#{anchor}">{label}</a>'
        for anchor, label in (
            ("anomalies", "Anomalies"),
            ("timeline", "Timeline"),
            ("epochs", "Epochs"),
            ("performance", "Latency"),
            ("inventory", "Inventory"),
            ("coverage", "Coverage"),
            ("counts", "Counts"),
            ("logs", "Logs"),
            ("spec", "Test"),
        )
    )
    body = (
        '<header class="top"><div class="brand">fencecheck</div>'
        f'<div class="run-title"><h1>{_e(summary.test)}</h1>'
        f'<span class="run-meta">{_e(summary.stamp)} · {_e(started)}</span></div>'
        f"<nav>{nav}</nav></header>"
        '<main id="main">'
        f'<section class="card summary" id="summary">{_verdict(data)}{_replay_note(data)}'
        "</section>"
        f"{_anomalies(data)}{_timeline(data)}{_epochs()}{_performance()}"
        f"{_inventory(data)}{_coverage(data)}{_counts(data)}{_logs(data)}{_spec(data)}"
        "</main>"
        '<div class="tooltip" id="tooltip" hidden></div>'
        f"<footer>fencecheck {_e(version)} · report written "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}</footer>"
    )
    return page(
        f"{_VERDICT_WORDS[summary.verdict]}: {summary.title}",
        body,
        styles=("base.css", "report.css"),
        scripts=("report.js",),
        data=data.payload,
    )
