"""The coverage section: what a run exercised, computed from the history alone (docs/design.md
§10)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from checkers.coverage import Coverage, coverage_of
from harness.record import Event
from harness.report import publish
from harness.run.judge import check_run
from harness.run.store import open_run_dir

S = 1_000_000_000
ROLES = {"l1": "lock", "s1": "store", "w1": "worker", "w2": "worker"}


class History:
    """Builds a well-formed history: each holder node has its own process."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.process = {"w1": 0, "w2": 1}

    def op(
        self,
        at: float,
        node: str,
        f: str,
        value: dict[str, Any],
        outcome: str = "ok",
        error: str | None = None,
        done: dict[str, Any] | None = None,
    ) -> History:
        process = self.process[node]
        self._add(at, process, "invoke", f, value, node)
        self._add(at + 0.01, process, outcome, f, {**value, **(done or {})}, node, error)
        return self

    def fault(self, start: float, stop: float, kind: str, **value: Any) -> History:
        fid = len(self.events)
        self._add(start, "nemesis", "info", f"start-{kind}", {"id": fid, **value, "applied": True})
        self._add(stop, "nemesis", "info", f"stop-{kind}", {"id": fid, **value, "applied": True})
        return self

    def _add(
        self,
        at: float,
        process: int | str,
        etype: Any,
        f: str,
        value: dict[str, Any],
        node: str | None = None,
        error: str | None = None,
    ) -> None:
        self.events.append(
            Event(len(self.events), round(at * S), process, etype, f, value, node, error)
        )

    def coverage(self, **options: Any) -> Coverage:
        events = sorted(self.events, key=lambda e: (e.time, e.index))
        return coverage_of(events, **{"lease_ttl": 1.0, "roles": ROLES, **options})


def _write(epoch: int, key: str = "k1", sink: str = "store") -> dict[str, Any]:
    return {"lock": "L0", "sink": sink, "key": key, "id": f"{sink}-{key}-{epoch}", "epoch": epoch}


def _grant(history: History, at: float, node: str, epoch: int) -> History:
    return history.op(at, node, "acquire", {"lock": "L0"}, done={"epoch": epoch})


def test_a_write_sent_after_a_newer_grant_is_a_stale_attempt_on_its_sink() -> None:
    history = _grant(History(), 0.0, "w1", 1).op(0.1, "w1", "write", _write(1))
    _grant(history, 1.0, "w2", 2).op(1.1, "w2", "write", _write(2))
    history.op(1.2, "w1", "write", _write(1, "k2"), "fail", "stale-epoch")
    history.op(1.3, "w1", "write", _write(1, "k3", "audit"))
    coverage = history.coverage(sinks=["store", "audit", "store-batch"])
    assert coverage.stale_attempts == 2
    assert coverage.to_json()["stale_attempts_per_sink"] == {
        "audit": 1,
        "store": 1,
        "store-batch": 0,
    }
    assert coverage.epochs_granted == 2
    assert coverage.keys_written == 3  # store k1, k2; audit k3
    assert coverage.sinks["store"].writes == 3
    assert coverage.sinks["store"].accepted == 2
    assert coverage.sinks["store-batch"].writes == 0
    assert "no stale write" not in " ".join(coverage.gaps())


def test_a_refusal_proves_a_stale_attempt_even_when_the_write_was_sent_before_the_grant() -> None:
    history = _grant(History(), 0.0, "w1", 1)
    history._add(0.5, 0, "invoke", "write", _write(1), "w1")
    _grant(history, 2.0, "w2", 2)
    history._add(3.0, 0, "fail", "write", _write(1), "w1", "stale-epoch")
    assert history.coverage().stale_attempts == 1


def test_a_run_without_stale_attempts_says_so() -> None:
    history = _grant(History(), 0.0, "w1", 1).op(0.1, "w1", "write", _write(1))
    history.op(0.5, "w1", "release", {"lock": "L0"})
    _grant(history, 1.0, "w2", 2).op(1.1, "w2", "write", _write(2))
    coverage = history.coverage(sinks=["store"])
    assert coverage.stale_attempts == 0
    assert coverage.to_json()["gaps"] == [
        "no stale write was even attempted, so no fence was tested",
        "no holder was stopped past its lease while holding it",
    ]


def test_stops_past_the_lease_count_only_long_stops_of_a_holder_per_kind() -> None:
    history = _grant(History(), 0.0, "w1", 1)
    history.fault(0.5, 3.5, "pause", targets=["w1"])  # holding, 3 TTLs: counts
    history.fault(4.0, 4.2, "pause", targets=["w1"])  # holding, shorter than the lease
    history.fault(5.0, 9.0, "freeze", targets=["w2"])  # w2 holds nothing
    history.op(9.5, "w1", "release", {"lock": "L0"})
    history.fault(10.0, 14.0, "partition", targets=["w1"])  # released before
    _grant(history, 15.0, "w2", 2).fault(15.5, 19.0, "throttle", targets=["w2"])
    assert history.coverage().stops_past_lease == {"pause": 1, "throttle": 1}
    assert history.coverage(lease_ttl=None).stops_past_lease == {}


def test_restarts_are_counted_per_role() -> None:
    history = History()
    history.fault(1.0, 2.0, "kill", targets=["l1"])
    history.fault(3.0, 4.0, "kill", targets=["w1"])
    history.fault(5.0, 9.0, "restart-while-paused", targets=["w2"], restart="s1")
    assert history.coverage().restarts == {"lock": 1, "worker": 1, "store": 1}


def test_a_holder_node_unreachable_for_most_of_the_run_is_named() -> None:
    history = _grant(History(), 0.0, "w1", 1)
    for second in range(1, 10):
        history.op(float(second), "w2", "acquire", {"lock": "L0"}, "fail", "unreachable")
        history.op(second + 0.5, "w1", "write", _write(1, f"k{second}"))
    coverage = history.coverage()
    assert set(coverage.unreachable_nodes) == {"w2"}
    assert any("w2 was unreachable" in gap for gap in coverage.gaps())


def test_a_worker_that_never_answered_counts_as_unreachable_all_run() -> None:
    history = _grant(History(), 0.0, "w1", 1).op(5.0, "w1", "write", _write(1))
    assert history.coverage().unreachable_nodes == {"w2": 1.0}


def test_a_node_that_came_back_is_not_named() -> None:
    history = _grant(History(), 0.0, "w1", 1)
    history.op(0.5, "w2", "acquire", {"lock": "L0"}, "fail", "unreachable")
    history.op(1.5, "w2", "acquire", {"lock": "L0"}, "fail", "timeout")
    history.op(9.0, "w1", "write", _write(1))
    assert history.coverage().unreachable_nodes == {}


def _stored_run(tmp_path: Path) -> Path:
    """A checkable run directory: one grant, one accepted write, a final read; no faults."""
    run = tmp_path / "run"
    run.mkdir()
    history = _grant(History(), 0.0, "w1", 1).op(0.1, "w1", "write", _write(1))
    entries = [{"id": "store-k1-1", "epoch": 1}]
    history.op(0.5, "w1", "read", {"sink": "store", "key": "k1"}, done={"entries": entries})
    lines = [
        {
            "index": e.index,
            "time": e.time,
            "process": e.process,
            "node": e.node,
            "type": e.type,
            "f": e.f,
            "value": e.value,
            **({"error": e.error} if e.error else {}),
        }
        for e in history.events
    ]
    (run / "history.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    test = {
        "spec": {"system": "reference", "workload": "append", "nemeses": [], "bugs": []},
        "lease_ttl": 1.0,
        "inventory": [{"sink": "store", "fenced": True, "mitigation": "none", "description": ""}],
        "topology": [{"name": n, "role": r} for n, r in ROLES.items() if n != "w2"],
    }
    (run / "test.json").write_text(json.dumps(test))
    return run


def test_check_run_and_analyze_write_and_print_the_coverage(tmp_path: Path) -> None:
    run = _stored_run(tmp_path)
    shown = subprocess.run(
        [sys.executable, "-m", "harness", "analyze", str(run)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert first.startswith("VALID, but weak: no stale write was even attempted")
    coverage = json.loads((run / "results.json").read_text())["coverage"]
    assert coverage["stale_attempts"] == 0
    assert coverage["epochs_granted"] == 1
    as_json = subprocess.run(
        [sys.executable, "-m", "harness", "analyze", str(run), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(as_json.stdout)["coverage"] == coverage


def test_the_report_has_a_coverage_section_and_a_weak_pass_says_so(tmp_path: Path) -> None:
    run = open_run_dir(_stored_run(tmp_path))
    check_run(run)
    publish(run)
    page = run.report.read_text()
    section = page[page.index('<section id="coverage"') :]
    section = section[: section.index("</section>")]
    assert "stale writes attempted" in section
    assert "no stale write was even attempted, so no fence was tested" in section
    verdict = page[page.index('id="verdict"') :]
    assert "But: no stale write was even attempted" in verdict[: verdict.index("</div></div>")]


def test_clock_windows_count_those_that_moved_a_held_lease_across_its_expiry() -> None:
    history = _grant(History(), 0.0, "w1", 1)
    history.fault(0.5, 3.5, "clock-step", targets=["l1"], by_s=-3.0)  # the lock's, 3 TTL: counts
    history.fault(4.0, 7.0, "clock-rate", targets=["w1"], rate=0.5)  # loses 1.5 s: counts
    history.fault(8.0, 8.5, "clock-rate", targets=["w1"], rate=0.5)  # loses 0.25 s: too little
    history.fault(9.0, 12.0, "clock-step", targets=["s1"], by_s=3.0)  # a store keeps no lease
    history.fault(13.0, 16.0, "clock-step", targets=["w2"], by_s=3.0)  # w2 holds nothing
    coverage = history.coverage()
    assert (coverage.clock_windows, coverage.clock_across_expiry) == (5, 2)
    assert coverage.stops_past_lease == {}  # a clock fault stops nobody
    assert not [gap for gap in coverage.gaps() if "clock" in gap]
    assert coverage.to_json()["clock_across_expiry"] == 2


def test_a_run_whose_clock_faults_never_moved_a_lease_across_its_expiry_says_so() -> None:
    history = _grant(History(), 0.0, "w1", 1)
    history.op(0.2, "w1", "release", {"lock": "L0"})
    history.fault(0.5, 3.5, "clock-step", targets=["l1"], by_s=3.0)  # no lease held then
    history.fault(4.0, 4.5, "clock-step", targets=["l1"], by_s=0.5)
    assert "no clock fault moved a lease across its expiry (2 clock windows" in " ".join(
        history.coverage().gaps()
    )


def test_pairs_of_kinds_in_force_together_are_counted_with_their_shared_time() -> None:
    history = History()
    history.fault(1.0, 5.0, "pause", targets=["w1"])
    history.fault(2.0, 3.5, "kill", targets=["s1"])
    history.fault(4.0, 6.0, "throttle", targets=["l1"])
    history.fault(8.0, 9.0, "pause", targets=["w2"])
    coverage = history.coverage()
    assert set(coverage.overlaps) == {"kill+pause", "pause+throttle"}
    assert coverage.overlaps["kill+pause"][0] == 1
    assert abs(coverage.overlaps["kill+pause"][1] - 1.5) < 1e-6
    assert abs(coverage.overlaps["pause+throttle"][1] - 1.0) < 1e-6
    shown = coverage.to_json()["overlaps"]
    assert shown["kill+pause"] == {"count": 1, "seconds": 1.5}
    assert not History().fault(1.0, 2.0, "pause", targets=["w1"]).coverage().overlaps
