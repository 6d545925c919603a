"""What the report reads from a run: summary, operations, lanes, faults, anomalies, inventory."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.record import HistoryWriter
from harness.report import extract, summarize, write_report
from harness.report.data import held_requests
from harness.run.store import RunDir

RunFactory = Callable[..., RunDir]


def _rows(data: dict[str, list[object]], name: str) -> list[object]:
    return data[name]


def test_summary_of_an_invalid_run(make_run: RunFactory) -> None:
    summary = summarize(make_run(stale=True))
    assert summary.verdict == "invalid"
    assert summary.anomaly_types == ("stale-write",)
    assert summary.expected_types == ("stale-write",)
    assert summary.system == "reference"
    assert summary.bugs == ("store-skips-check",)
    assert summary.nemeses == ("pause",)
    assert summary.seed == 11
    assert any("was accepted by fenced store" in line for line in summary.explanations)
    assert summary.operations is not None and summary.operations > 100
    assert summary.started is not None and summary.started.year == 2024


def test_summary_of_a_valid_run(make_run: RunFactory) -> None:
    summary = summarize(make_run(stale=False))
    assert summary.verdict == "valid"
    assert summary.anomaly_types == ()
    assert summary.explanations == ()
    assert summary.problem is None


def test_summary_of_an_unchecked_run(make_run: RunFactory) -> None:
    summary = summarize(make_run(stale=False, checked=False))
    assert summary.verdict == "unchecked"


def test_summary_of_unreadable_results_is_unknown_with_the_problem(make_run: RunFactory) -> None:
    run = make_run(stale=False, checked=False)
    run.results.write_text("{not json")
    summary = summarize(run)
    assert summary.verdict == "unknown"
    assert summary.problem is not None and "results.json" in summary.problem


def test_summary_survives_a_missing_spec(make_run: RunFactory) -> None:
    run = make_run(stale=False)
    run.test_json.unlink()
    summary = summarize(run)
    assert summary.system == "?"
    assert summary.test == "reference-pause"
    assert summary.verdict == "valid"


def test_a_record_lacking_a_field_is_listed_with_the_field_named(make_run: RunFactory) -> None:
    run = make_run(stale=False)
    test = json.loads(run.test_json.read_text())
    del test["lease_ttl"]
    run.test_json.write_text(json.dumps(test))
    summary = summarize(run)
    assert summary.record is None and summary.system == "?" and summary.verdict == "valid"
    assert summary.problem is not None and "'lease_ttl'" in summary.problem


def test_a_summary_takes_the_files_already_read(make_run: RunFactory) -> None:
    run = make_run(stale=True)
    record, results = run.read_record(), run.read_results()
    run.test_json.unlink()
    run.results.unlink()
    summary = summarize(run, record, results)
    assert summary.record is record and summary.results is results
    assert summary.verdict == "invalid" and summary.bugs == ("store-skips-check",)
    assert extract(run, summary=summary).inventory  # the report too reads neither file again


def test_operations_are_paired_and_laid_out_one_lane_per_node(make_run: RunFactory) -> None:
    data = extract(make_run(stale=True))
    cols = data.payload["ops"]["cols"]
    assert data.operations == data.shown_operations == len(cols["s"])
    assert [lane["label"] for lane in data.payload["lanes"]] == ["w1", "w2", "w3"]
    nodes = data.payload["ops"]["nodes"]
    for n, lane in zip(cols["n"], cols["lane"], strict=True):
        assert data.payload["lanes"][lane]["node"] == nodes[n]
    assert all(e is not None and e >= s for s, e in zip(cols["s"], cols["e"], strict=True))
    assert sum(sum(c.values()) for c in data.counts.values()) == data.operations


def test_the_stale_write_is_found_on_the_timeline(make_run: RunFactory) -> None:
    data = extract(make_run(stale=True))
    counted = [a for a in data.anomalies if not a.expected]
    assert [a.name for a in counted] == ["stale-write"]
    stale = counted[0]
    assert len(stale.stale_rows) == 1
    row = stale.stale_rows[0]
    cols = data.payload["ops"]["cols"]
    stale_op = next(op for op in stale.ops if op.role == "stale")
    assert cols["id"][row] == stale_op.id
    assert cols["ep"][row] == stale_op.epoch
    assert cols["a"][row] == 1  # accepted (acknowledged ok)
    payload = data.payload["anomalies"][data.anomalies.index(stale)]
    assert payload["stale"] == [row]
    focus = payload["focus"]
    # The story's span covers the pause before the stale write, not just the write itself.
    pause = next(f for f in data.payload["faults"] if f["kind"] == "pause")
    assert focus[0] <= pause["s"] and focus[1] >= cols["e"][row]
    assert any(a.expected and a.sink == "journal" for a in data.anomalies)


def test_fault_windows_carry_the_nemesis_timing(make_run: RunFactory) -> None:
    data = extract(make_run(stale=False, failed_fault=True))
    kinds = [(f.window.kind, f.window.targets, f.window.applied) for f in data.faults]
    assert kinds == [("pause", ("w2",), True), ("pause", ("l1",), False)]
    healed, failed = data.faults
    assert healed.window.end is not None and healed.window.end > healed.window.start
    assert healed.latency is not None and healed.latency > 0
    assert failed.window.error == "no such process"
    (stats,) = data.fault_stats
    assert (stats.started, stats.applied, stats.failed, stats.healed) == (2, 1, 1, 1)
    # The lock service's and the store's nodes have rows whether or not a fault hit them.
    assert data.payload["fault_nodes"] == ["l1", "s1", "w2"]


def test_inventory_rows_carry_the_sink_verdicts(make_run: RunFactory) -> None:
    data = extract(make_run(stale=True))
    rows = {row.sink: row for row in data.inventory}
    assert rows["store"].fenced is True and rows["store"].verdict == "invalid"
    assert "stale-write" in rows["store"].detail
    assert rows["journal"].fenced is False and rows["journal"].mitigation == "none"
    assert "expected: stale-write" in rows["journal"].detail


def test_an_unchecked_run_still_has_a_timeline(make_run: RunFactory) -> None:
    data = extract(make_run(stale=True, checked=False))
    assert data.summary.verdict == "unchecked"
    assert data.anomalies == []
    assert data.operations > 0
    assert {row.verdict for row in data.inventory} == {"not checked"}


def _write(run: RunDir, events: list[dict[str, object]]) -> None:
    with HistoryWriter(run.history) as writer:
        for event in events:
            writer.append(**event)  # type: ignore[arg-type]


def test_open_operations_and_writes_seen_only_in_a_read(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.test_json.write_text(json.dumps({"system": "reference"}))
    write = {"lock": "L", "sink": "store", "key": "k", "id": "w1-1", "epoch": 3}
    _write(
        run,
        [
            dict(time=1, process=0, node="w1", type="invoke", f="write", value=write),
            dict(time=5, process=0, node="w1", type="info", f="write", value=write),
            dict(time=6, process=3, node="w1", type="invoke", f="acquire", value={"lock": "L"}),
            dict(time=7, process=1, node="w2", type="invoke", f="read", value={"sink": "store"}),
            dict(
                time=9,
                process=1,
                node="w2",
                type="ok",
                f="read",
                value={"sink": "store", "key": "k", "entries": [{"id": "w1-1", "epoch": 3}]},
            ),
        ],
    )
    data = extract(run)
    cols = data.payload["ops"]["cols"]
    assert cols["o"] == [2, 3, 0]  # info, open, ok
    assert cols["a"] == [2, None, None]  # the info write landed: a read saw it
    assert cols["e"][1] is None
    assert cols["x"][2] == 1
    assert data.counts["acquire"]["open"] == 1
    # w1's processes 0 and 3 follow each other, so they share one lane.
    assert [lane["label"] for lane in data.payload["lanes"]] == ["w1", "w2"]


def test_a_spanning_write_shows_every_key_it_wrote(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.test_json.write_text(json.dumps({"system": "reference"}))
    also = [{"key": "k2", "id": "w1-2"}, {"key": "k3", "id": "w1-3"}]
    write = {"lock": "L", "sink": "store", "key": "k1", "id": "w1-1", "epoch": 3, "also": also}
    plain = {"lock": "L", "sink": "store", "key": "k2", "id": "w1-4", "epoch": 3}
    _write(
        run,
        [
            dict(time=1, process=0, node="w1", type="invoke", f="write", value=write),
            dict(time=2, process=0, node="w1", type="ok", f="write", value=write),
            dict(time=3, process=0, node="w1", type="invoke", f="write", value=plain),
            dict(time=4, process=0, node="w1", type="ok", f="write", value=plain),
        ],
    )
    ops = extract(run).payload["ops"]
    keys = ops["keys"]
    spanning, single = ops["cols"]["also"]
    assert [[keys[k], write_id] for k, write_id in spanning] == [["k2", "w1-2"], ["k3", "w1-3"]]
    assert single is None


def test_a_broken_history_is_shown_up_to_the_broken_line(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    _write(
        run,
        [
            dict(time=1, process=0, node="w1", type="invoke", f="acquire", value={"lock": "L"}),
            dict(time=2, process=0, node="w1", type="ok", f="acquire", value={"epoch": 1}),
        ],
    )
    with run.history.open("ab") as stream:
        stream.write(b'{"index": 2, "time": 3, "process": 0, "type": "ok", "f": "write"}\n')
    data = extract(run)
    assert data.operations == 1
    assert data.history_problem is not None and "line 3" in data.history_problem


def test_the_timeline_keeps_anomaly_operations_beyond_its_limit(make_run: RunFactory) -> None:
    run = make_run(stale=True)
    data = extract(run, max_ops=10)
    assert data.shown_operations < data.operations
    (stale,) = [a for a in data.anomalies if not a.expected]
    cols = data.payload["ops"]["cols"]
    row = stale.stale_rows[0]
    assert row >= 10 and cols["id"][row] == next(o.id for o in stale.ops if o.role == "stale")
    assert data.payload["total_ops"] == data.operations
    # Throughput still counts every completion, not only the operations on the timeline.
    throughput = data.payload["throughput"]
    completed = sum(throughput["ok"]) + sum(throughput["fail"]) + sum(throughput["info"])
    assert completed == data.operations


_NODES = st.sampled_from(["w1", "w2", "w3"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_NODES, st.integers(1, 50), st.integers(0, 40), st.sampled_from(["ok", "info"])),
        max_size=40,
    )
)
def test_no_two_operations_overlap_in_a_lane(ops: list[tuple[str, int, int, str]]) -> None:
    """Lanes pack a node's processes together only where they never overlap in time."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        run = RunDir(Path(folder))
        events: list[dict[str, object]] = []
        time = 0
        process_of = {"w1": 0, "w2": 1, "w3": 2}
        open_ops: list[tuple[int, str, int, str]] = []  # (end time, node, process, outcome)
        next_process = 3
        for node, gap, length, outcome in ops:
            time += gap
            for pending in sorted(o for o in open_ops if o[0] <= time):
                end, onode, oprocess, ooutcome = pending
                events.append(
                    dict(time=end, process=oprocess, node=onode, type=ooutcome, f="write")
                )
                open_ops.remove(pending)
                if ooutcome == "info":
                    process_of[onode] = next_process
                    next_process += 1
            if any(o[1] == node for o in open_ops):
                continue
            process = process_of[node]
            events.append(dict(time=time, process=process, node=node, type="invoke", f="write"))
            open_ops.append((time + length, node, process, outcome))
        events.sort(key=lambda e: e["time"])  # type: ignore[arg-type, return-value]
        _write(run, events)
        data = extract(run)
        cols = data.payload["ops"]["cols"]
        end = data.payload["end"]
        by_lane: dict[int, list[tuple[int, int]]] = {}
        for s, e, lane in zip(cols["s"], cols["e"], cols["lane"], strict=True):
            by_lane.setdefault(lane, []).append((s, e if e is not None else end))
        for spans in by_lane.values():
            spans.sort()
            for (_, first_end), (second_start, _) in itertools.pairwise(spans):
                assert first_end <= second_start


def test_the_report_links_each_nodes_logs(make_run: RunFactory) -> None:
    run = make_run(stale=False)
    (run.path / "logs" / "s1").mkdir(parents=True)
    (run.path / "logs" / "s1" / "ref-store.log").write_text("started\n")
    page = write_report(run).read_text()
    assert '<a href="logs/s1/ref-store.log">ref-store.log</a>' in page
    assert 'href="#logs"' in page


def test_a_held_request_is_drawn_from_its_send_to_its_delivery_on_the_run_clock() -> None:
    stop = {
        "confirmed": 2_500_000_000,
        "proxy": {
            "w2": {
                "at": 1000.5,  # the proxy's wall clock when it answered the stop
                "events": [
                    {
                        "what": "held",
                        "to": "store",
                        "from": 999.0,
                        "delivered": 1000.4,
                        "requests": [{"op": "write", "id": "w2-13", "epoch": 2}],
                    },
                    {"what": "held", "from": 999.5},  # never delivered: not drawn
                ],
            }
        },
    }
    (held,) = held_requests(stop)
    assert held == {
        "s": 1_000_000_000,
        "e": 2_400_000_000,
        "what": "w2 → store: write w2-13 (epoch 2)",
    }
    assert held_requests({"confirmed": 1}) == ()
