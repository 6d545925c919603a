"""What the report shows, read from one run directory in a single streaming pass of the history.

The history is paired into operations (an invoke and its completion), laid out into timeline
lanes, and turned into compact column arrays for the page's scripts: one array per field, strings
replaced by indexes into small tables. Nemesis events become fault windows. ``results.json`` gives
the anomalies, whose operations are found again in the history by event index (or write id).
Counts, fault latencies and throughput cover the whole history even when the timeline carries
only the first :data:`MAX_TIMELINE_OPS` operations.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from checkers.faults import FaultTimeline
from harness.record import NEMESIS, Event, HistoryError, Process, Sink, paired, read_history
from harness.record.results import StoredEvidence, StoredResults, StoredSink
from harness.record.run_record import RunRecord
from harness.record.verdict import FaultWindow, OpRef
from harness.record.vocabulary import LEASE_EXPIRED, NOT_HELD, STALE_EPOCH, TIMEOUT
from harness.run.store import RunDir
from harness.run.summary import RunSummary, flat_test, summarize
from nemeses.registry import KINDS

__all__ = [
    "MAX_TIMELINE_OPS",
    "OUTCOMES",
    "Anomaly",
    "Fault",
    "FaultStats",
    "Operation",
    "ReportData",
    "SinkRow",
    "extract",
    "natural_key",
]

MAX_TIMELINE_OPS: Final = 400_000
"""Operations embedded in the page beyond which the timeline keeps only the first ones (and
every operation an anomaly names): a browser tab stays responsive up to about this many."""

OUTCOMES: Final[tuple[str, ...]] = ("ok", "fail", "info", "open")
"""Outcome codes in the page's data: an operation still open at the end counts as ``info``
(docs/design.md §4) but is drawn apart so a cut-short run is visible as such."""

_OUTCOME_CODE: Final = {name: code for code, name in enumerate(OUTCOMES)}
_THROUGHPUT_BINS: Final = 2000
_DIGITS: Final = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that puts ``w2`` before ``w10``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(text))


@dataclass(slots=True)
class Operation:
    """An invoke paired with its completion (``outcome`` ``open`` when none was recorded)."""

    process: Process
    node: str | None
    f: str
    outcome: str
    start: int
    end: int | None
    value: dict[str, Any]
    error: str | None
    invoke_index: int
    complete_index: int | None
    entries: int | None = None  # how many entries a read returned (the entries are not kept)


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault window (paired by the checkers) with the nemesis's own timing of it.

    ``scheduled``/``confirmed`` come from the ``start-X`` event's value (ns): when the schedule
    wanted the fault and when the nemesis saw it in force; ``process`` is the daemon a pause or
    kill aimed at, ``ttl_multiple`` the fault's length in lease TTLs.
    """

    window: FaultWindow
    scheduled: int | None
    confirmed: int | None
    heal_error: str | None
    process: str | None = None
    ttl_multiple: float | None = None
    held: tuple[Mapping[str, Any], ...] = ()
    """Requests the write-path proxy held (``hold``): each ``{"s": ns, "e": ns, "what": text}``
    from its send to its delivery, on the run clock (:func:`held_requests`)."""

    @property
    def latency(self) -> int | None:
        """Nanoseconds from the scheduled time to the confirmed time of the start."""
        if self.scheduled is None or self.confirmed is None:
            return None
        return self.confirmed - self.scheduled


@dataclass(frozen=True, slots=True)
class FaultStats:
    """Faults of one kind: how many started, applied, were confirmed, failed, healed."""

    kind: str
    started: int
    applied: int
    confirmed: int
    failed: int
    healed: int
    latency_p50: int | None
    latency_max: int | None


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One piece of evidence from ``results.json``, with its operations found in the history."""

    name: str
    expected: bool
    explanation: str
    ops: tuple[OpRef, ...]
    faults: tuple[FaultWindow, ...]
    op_rows: tuple[int | None, ...]
    stale_rows: tuple[int, ...]
    sink: str | None

    @property
    def rows(self) -> tuple[int, ...]:
        """Timeline rows of the evidence operations found in the history."""
        return tuple(row for row in self.op_rows if row is not None)


@dataclass(frozen=True, slots=True)
class SinkRow:
    """A line of the write-path inventory with this run's verdict for the sink."""

    sink: str
    fenced: bool | None
    mitigation: str
    description: str
    verdict: str
    detail: str


@dataclass
class ReportData:
    """Everything the report renders; :attr:`payload` is what the page's scripts read."""

    summary: RunSummary
    spec: dict[str, Any]
    """The record's fields in one mapping (:func:`~harness.run.summary.flat_test`), for the
    spec table."""
    results: StoredResults | None
    anomalies: list[Anomaly]
    inventory: list[SinkRow]
    counts: dict[str, Counter[str]]
    faults: list[Fault]
    fault_stats: list[FaultStats]
    operations: int
    shown_operations: int
    end_time: int
    history_problem: str | None
    payload: dict[str, Any] = field(default_factory=dict)


class _Interner:
    """Strings to small integers, so the page's columns carry numbers, not repeated text."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._codes: dict[str, int] = {}

    def __call__(self, text: Any) -> int | None:
        if text is None:
            return None
        key = str(text)
        code = self._codes.get(key)
        if code is None:
            code = self._codes[key] = len(self.items)
            self.items.append(key)
        return code


def _int(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _faults(timeline: FaultTimeline, nemesis: Mapping[int, Event]) -> list[Fault]:
    faults: list[Fault] = []
    for window in timeline.windows():
        start = nemesis.get(window.start_index)
        value = start.value if start is not None else {}
        stop = nemesis.get(window.end_index) if window.end_index is not None else None
        heal_error = stop.value.get("error") if stop is not None else None
        process, multiple = value.get("process"), value.get("ttl_multiple")
        faults.append(
            Fault(
                window,
                _int(value.get("scheduled")),
                _int(value.get("confirmed")),
                str(heal_error) if heal_error else None,
                str(process) if isinstance(process, str) else None,
                float(multiple) if isinstance(multiple, int | float) else None,
                held_requests(stop.value) if stop is not None else (),
            )
        )
    return faults


def held_requests(stop: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The requests a stop's proxy report says were held, from send to delivery, in run-clock
    ns. The proxy stamps its events with its node's wall clock; the stop's ``confirmed`` (run
    clock) was read right after the proxy answered at its ``at`` (wall clock), so each time is
    moved by that pair: its error is the control call's return trip (tens of ms)."""
    confirmed = _int(stop.get("confirmed"))
    reports = stop.get("proxy")
    if confirmed is None or not isinstance(reports, dict):
        return ()
    held: list[Mapping[str, Any]] = []
    for node, report in reports.items():
        if not isinstance(report, dict) or not isinstance(report.get("at"), int | float):
            continue
        answered = float(report["at"])
        for event in report.get("events", ()):
            if not isinstance(event, dict) or event.get("what") != "held":
                continue
            if not isinstance(event.get("delivered"), int | float):
                continue
            requests = [r for r in event.get("requests", ()) if isinstance(r, dict)]
            names = [
                f"{r.get('op')} {r['id']} (epoch {r.get('epoch')})"
                if "id" in r
                else str(r.get("op"))
                for r in requests
            ]
            held.append(
                {
                    "s": confirmed - round((answered - float(event["from"])) * 1e9),
                    "e": confirmed - round((answered - float(event["delivered"])) * 1e9),
                    "what": f"{node} → {event.get('to', '?')}: {', '.join(names) or 'bytes'}",
                }
            )
    return tuple(held)


@dataclass
class _Lookups:
    """Event indexes and write ids that anomalies name, mapped to operation numbers."""

    indexes: dict[int, int | None] = field(default_factory=dict)
    ids: dict[str, int | None] = field(default_factory=dict)

    @classmethod
    def wanted_by(cls, evidence: Iterable[StoredEvidence]) -> _Lookups:
        found = cls()
        for item in evidence:
            for op in item.ops:
                for index in (op.index, op.invoke_index):
                    if index is not None:
                        found.indexes[index] = None
                if op.id is not None:
                    found.ids[op.id] = None
        return found

    def note(self, op: Operation, row: int) -> None:
        for index in (op.invoke_index, op.complete_index):
            if index is not None and index in self.indexes:
                self.indexes[index] = row
        op_id = op.value.get("id")
        if isinstance(op_id, str) and op_id in self.ids and self.ids[op_id] is None:
            self.ids[op_id] = row

    def row_of(self, op: OpRef) -> int | None:
        for index in (op.index, op.invoke_index):
            row = self.indexes.get(index) if index is not None else None
            if row is not None:
                return row
        return self.ids.get(op.id) if op.id is not None else None


def _anomalies(evidence: Iterable[StoredEvidence], lookups: _Lookups) -> list[Anomaly]:
    out: list[Anomaly] = []
    for item in evidence:
        rows = tuple(lookups.row_of(op) for op in item.ops)
        stale = tuple(
            r for op, r in zip(item.ops, rows, strict=True) if op.role == "stale" and r is not None
        )
        out.append(
            Anomaly(
                name=item.name,
                expected=item.expected,
                explanation=item.explanation,
                ops=item.ops,
                faults=item.faults,
                op_rows=rows,
                stale_rows=stale,
                sink=item.sink,
            )
        )
    return out


def _counted(counts: Mapping[str, int]) -> str:
    """``{"stale-write": 2}`` -> ``"stale-write \u00d72"`` (a multiplication sign)."""
    return ", ".join(f"{name} \u00d7{n}" for name, n in counts.items() if n)


def _sink_row(name: str, declared: Sink | None, verdict: StoredSink | None) -> SinkRow:
    fenced = declared.fenced if declared is not None else None
    if fenced is None and verdict is not None:
        fenced = verdict.fenced
    # A fenced sink needs no mitigation; the checker's default "none" would only confuse.
    mitigation = (declared.mitigation if declared is not None else None) or (
        None if fenced or verdict is None else verdict.mitigation
    )
    description = declared.description if declared is not None else ""
    shown_mitigation = str(mitigation or ("—" if fenced else "none"))
    if verdict is None:
        return SinkRow(name, fenced, shown_mitigation, description, "not checked", "")
    detail: list[str] = []
    if counted := _counted(verdict.anomalies):
        detail.append(counted)
    if expected := _counted(verdict.expected):
        detail.append(f"expected: {expected}")
    if verdict.accepted_writes is not None:
        detail.append(f"{verdict.accepted_writes} accepted writes")
    detail.extend(verdict.reasons)
    if not verdict.declared:
        description = description or "not in the inventory: checked as fenced"
    return SinkRow(name, fenced, shown_mitigation, description, verdict.verdict, "; ".join(detail))


def _inventory(record: RunRecord | None, results: StoredResults | None) -> list[SinkRow]:
    """The record's inventory, each sink with its verdict, then any sink the checker saw that
    the inventory does not declare."""
    verdicts = {sink.name: sink for sink in results.sinks} if results is not None else {}
    rows = [
        _sink_row(sink.name, sink, verdicts.pop(sink.name, None))
        for sink in (record.inventory if record is not None else ())
    ]
    rows.extend(_sink_row(name, None, verdict) for name, verdict in verdicts.items())
    return rows


def _fault_stats(faults: Sequence[Fault]) -> list[FaultStats]:
    by_kind: dict[str, list[Fault]] = defaultdict(list)
    for fault in faults:
        by_kind[fault.window.kind].append(fault)
    stats: list[FaultStats] = []
    for kind in sorted(by_kind):
        group = by_kind[kind]
        latencies = sorted(lat for f in group if (lat := f.latency) is not None)
        stats.append(
            FaultStats(
                kind=kind,
                started=len(group),
                applied=sum(1 for f in group if f.window.applied),
                confirmed=sum(1 for f in group if f.confirmed is not None),
                failed=sum(1 for f in group if not f.window.applied),
                healed=sum(1 for f in group if f.window.end is not None),
                latency_p50=latencies[(len(latencies) - 1) // 2] if latencies else None,
                latency_max=latencies[-1] if latencies else None,
            )
        )
    return stats


def _pack_lanes(ops: Sequence[Operation], end_time: int) -> tuple[list[dict[str, Any]], list[int]]:
    """Lanes for the timeline: one per node, split only where its processes overlap in time.

    A holder's processes follow each other (a new one after each ``info``), so they share a lane;
    if a node really runs two at once, the second goes to a lane of its own beneath the first.
    """
    spans: dict[Process, list[Any]] = {}
    for op in ops:
        end = op.end if op.end is not None else end_time
        span = spans.get(op.process)
        if span is None:
            spans[op.process] = [op.start, end, op.node]
        else:
            span[1] = max(span[1], end)
    by_node: dict[str, list[tuple[int, int, Process]]] = defaultdict(list)
    for process, (start, end, node) in spans.items():
        by_node[node if node is not None else f"p{process}"].append((start, end, process))
    lanes: list[dict[str, Any]] = []
    lane_of: dict[Process, int] = {}
    for node in sorted(by_node, key=natural_key):
        free_at: list[tuple[int, int]] = []  # (lane number, time it is free from)
        for start, end, process in sorted(by_node[node], key=lambda s: (s[0], str(s[2]))):
            for slot, (lane, free) in enumerate(free_at):
                if free <= start:
                    free_at[slot] = (lane, end)
                    lanes[lane]["processes"].append(process)
                    lane_of[process] = lane
                    break
            else:
                lane = len(lanes)
                label = node if not free_at else f"{node} ·{len(free_at) + 1}"
                lanes.append({"label": label, "node": node, "processes": [process]})
                free_at.append((lane, end))
                lane_of[process] = lane
    return lanes, [lane_of[op.process] for op in ops]


def _columns(
    ops: Sequence[Operation], lanes_of_ops: Sequence[int], accepted_ids: set[str]
) -> dict[str, Any]:
    tables = {name: _Interner() for name in ("node", "f", "sink", "lock", "key", "error")}
    cols: dict[str, list[Any]] = {
        name: []
        for name in ("s", "e", "lane", "p", "n", "f", "o", "ep", "sk", "lk", "k", "id", "err", "a")
    }
    cols.update(ix=[], cx=[], x=[], also=[])
    for op, lane in zip(ops, lanes_of_ops, strict=True):
        value = op.value
        cols["s"].append(op.start // 1000)
        cols["e"].append(op.end // 1000 if op.end is not None else None)
        cols["lane"].append(lane)
        cols["p"].append(op.process if isinstance(op.process, int) else -1)
        cols["n"].append(tables["node"](op.node))
        cols["f"].append(tables["f"](op.f))
        cols["o"].append(_OUTCOME_CODE[op.outcome])
        cols["ep"].append(_int(value.get("epoch")))
        cols["sk"].append(tables["sink"](value.get("sink")))
        cols["lk"].append(tables["lock"](value.get("lock")))
        cols["k"].append(tables["key"](value.get("key")))
        write_id = value.get("id")
        cols["id"].append(str(write_id) if write_id is not None else None)
        cols["err"].append(tables["error"](op.error))
        if op.f == "write":
            seen = isinstance(write_id, str) and write_id in accepted_ids
            cols["a"].append(1 if op.outcome == "ok" else 2 if seen else 0)
        else:
            cols["a"].append(None)
        cols["ix"].append(op.invoke_index)
        cols["cx"].append(op.complete_index)
        cols["x"].append(op.entries)
        cols["also"].append(_also(value, tables["key"]))
    out: dict[str, Any] = {"cols": cols}
    out.update({f"{name}s": table.items for name, table in tables.items()})
    return out


def _also(value: dict[str, Any], key_index: Callable[[Any], int | None]) -> list[Any] | None:
    """A spanning write's other keys and ids, as ``[key index, id]`` pairs (None for others): the
    details of the write show every key it wrote, not only the first."""
    also = value.get("also")
    if not isinstance(also, list):
        return None
    pairs = [
        [key_index(item["key"]), str(item.get("id"))]
        for item in also
        if isinstance(item, dict) and item.get("key") is not None
    ]
    return pairs or None


def _throughput(ops: Iterable[Operation], end_time: int) -> dict[str, Any]:
    """Completions per bin by outcome, over every operation (not only those on the timeline)."""
    width_us = max(1000, math.ceil(end_time / 1000 / _THROUGHPUT_BINS))
    bins = max(1, math.ceil(end_time / 1000 / width_us) + 1)
    series = {name: [0] * bins for name in ("ok", "fail", "info")}
    for op in ops:
        if op.end is not None:
            series[op.outcome][min(bins - 1, op.end // 1000 // width_us)] += 1
    return {"bin": width_us, **series}


class _Pairing:
    """Pairs a history into :class:`Operation` s as it streams past.

    What was read survives a :class:`HistoryError` part-way (the report then shows the history
    up to the broken line, and says so). Nemesis events go to :attr:`timeline` and, by index, to
    :attr:`nemesis` (they are few).
    """

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self.end_time = 0
        self.seen_ids: set[str] = set()
        self.timeline = FaultTimeline()
        self.nemesis: dict[int, Event] = {}
        self._open: dict[Process, Operation] = {}

    def read(self, events: Iterable[Event]) -> None:
        """Consume ``events`` in history order."""
        for event, invoke in paired(events):
            self.end_time = max(self.end_time, event.time)
            if event.process == NEMESIS:
                self.timeline.add(event)
                self.nemesis[event.index] = event
            elif invoke is None:
                op = Operation(
                    event.process,
                    event.node,
                    event.f,
                    "open",
                    event.time,
                    None,
                    dict(event.value),
                    None,
                    event.index,
                    None,
                )
                self._open[event.process] = op
                self.ops.append(op)
            else:
                self._complete(self._open.pop(event.process), event)

    def _complete(self, op: Operation, event: Event) -> None:
        op.outcome = event.type
        op.end = event.time
        op.error = event.error
        op.complete_index = event.index
        if op.node is None:
            op.node = event.node
        value = event.value
        entries = value.get("entries")
        if isinstance(entries, list):
            # A read's entries can be long; keep their count and the ids they show, not them.
            op.entries = len(entries)
            value = {k: v for k, v in value.items() if k != "entries"}
            if event.type == "ok":
                add = self.seen_ids.add
                for entry in entries:
                    if type(entry) is dict and type(entry.get("id")) is str:
                        add(entry["id"])
        op.value.update(value)


def _fault_payload(fault: Fault) -> dict[str, Any]:
    window = fault.window

    def micros(ns: int | None) -> int | None:
        return ns // 1000 if ns is not None else None

    return {
        "kind": window.kind,
        "targets": list(window.targets),
        "s": micros(window.start),
        "e": micros(window.end),
        "sched": micros(fault.scheduled),
        "conf": micros(fault.confirmed),
        "applied": window.applied,
        "error": window.error,
        "stop_error": fault.heal_error,
        "proc": fault.process,
        "mult": fault.ttl_multiple,
        "ix": window.start_index,
        "sx": window.end_index,
        "held": [
            {"s": micros(int(h["s"])), "e": micros(int(h["e"])), "what": h["what"]}
            for h in fault.held
        ],
    }


def _part_payload(fault: Fault, part: FaultWindow) -> dict[str, Any]:
    """One part of a compound fault as a band of its own (its kind shown as ``whole: part``)."""
    payload = _fault_payload(Fault(part, None, None, None))
    payload["kind"] = f"{fault.window.kind}: {part.kind}"
    return payload


def _service_nodes(record: RunRecord | None) -> list[str]:
    """The lock service's and the stores' nodes, from the run's topology: they get a row of
    their own on the timeline even when no fault was aimed at them."""
    topology = record.topology if record is not None else ()
    return [node.name for node in topology if node.role in ("lock", "store")]


def _focus(anomaly: Anomaly, ops: Sequence[Operation], end_time: int) -> list[int] | None:
    """The time span (µs) that tells an anomaly's story: its writes and grants (not the final
    read that merely revealed it) and the faults on their nodes, e.g. the pause before a stale
    write."""
    spans: list[tuple[int, int]] = []
    nodes: set[str] = set()
    for evidence, row in zip(anomaly.ops, anomaly.op_rows, strict=True):
        if row is None or (evidence.role == "read" and len(anomaly.rows) > 1):
            continue
        op = ops[row]
        spans.append((op.start, op.end if op.end is not None else end_time))
        if op.node is not None:
            nodes.add(op.node)
    for fault in anomaly.faults:
        if nodes.intersection(fault.targets):
            spans.append((fault.start, fault.end if fault.end is not None else end_time))
    if not spans:
        return None
    return [min(s for s, _ in spans) // 1000, max(e for _, e in spans) // 1000]


def extract(
    run: RunDir, max_ops: int = MAX_TIMELINE_OPS, summary: RunSummary | None = None
) -> ReportData:
    """Read ``run`` once and build everything the report shows (``summary``: the run's, when
    the caller has it, so ``test.json`` and ``results.json`` are not read again)."""
    summary = summary if summary is not None else summarize(run)
    record, results = summary.record, summary.results
    spec = flat_test(record) if record is not None else {}
    evidence = results.evidence if results is not None else ()
    lookups = _Lookups.wanted_by(evidence)
    pairing = _Pairing()
    history_problem: str | None = None
    try:
        pairing.read(read_history(run.history))
    except FileNotFoundError:
        history_problem = "history.jsonl is missing"
    except HistoryError as problem:
        history_problem = f"{problem} (shown up to there)"
    ops, end_time = pairing.ops, pairing.end_time
    for row, op in enumerate(ops):
        lookups.note(op, row)
    anomalies = _anomalies(evidence, lookups)
    faults = _faults(pairing.timeline, pairing.nemesis)
    keep = set(range(min(len(ops), max_ops)))
    for anomaly in anomalies:
        keep.update(anomaly.rows)
    shown = [ops[row] for row in sorted(keep)]
    renumber = {old: new for new, old in enumerate(sorted(keep))}
    anomalies = [
        Anomaly(
            a.name,
            a.expected,
            a.explanation,
            a.ops,
            a.faults,
            tuple(renumber[r] if r is not None else None for r in a.op_rows),
            tuple(renumber[r] for r in a.stale_rows),
            a.sink,
        )
        for a in anomalies
    ]
    lanes, lane_numbers = _pack_lanes(shown, end_time)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for op in ops:
        counts[op.f][op.outcome] += 1
    data = ReportData(
        summary=summary,
        spec=spec,
        results=results,
        anomalies=anomalies,
        inventory=_inventory(record, results),
        counts=dict(sorted(counts.items())),
        faults=faults,
        fault_stats=_fault_stats(faults),
        operations=len(ops),
        shown_operations=len(shown),
        end_time=end_time,
        history_problem=history_problem,
    )
    fault_nodes = sorted(
        {t for f in faults for w in (f.window, *f.window.parts) for t in w.targets}
        | set(_service_nodes(record)),
        key=natural_key,
    )
    data.payload = {
        "v": 1,
        "end": end_time // 1000,
        "lanes": [{"label": lane["label"], "node": lane["node"]} for lane in lanes],
        "ops": _columns(shown, lane_numbers, pairing.seen_ids),
        # A compound's parts are bands of their own, on their own nodes: the store's restart
        # inside a restart-while-paused shows on the store's row, not only in prose.
        "faults": [_fault_payload(f) for f in faults]
        + [_part_payload(f, part) for f in faults for part in f.window.parts],
        "fault_colours": {name: kind.colour for name, kind in KINDS.items()},
        # Failures that are not failures: a fence doing its job, and a holder that sent nothing
        # because its lease had gone (ordinary lease contention). The page draws them apart.
        "refusal_errors": [STALE_EPOCH],
        "contention_errors": [LEASE_EXPIRED, NOT_HELD, TIMEOUT],
        "fault_nodes": fault_nodes,
        "anomalies": [
            {
                "name": a.name,
                "expected": a.expected,
                "text": a.explanation,
                "rows": list(a.rows),
                "stale": list(a.stale_rows),
                "sink": a.sink,
                "focus": _focus(a, shown, end_time),
            }
            for a in anomalies
        ],
        "throughput": _throughput(ops, end_time),
        "total_ops": len(ops),
        "sinks": {
            row.sink: {
                "fenced": row.fenced,
                "mitigation": row.mitigation,
                "verdict": row.verdict,
                "detail": row.detail,
            }
            for row in data.inventory
        },
    }
    return data
