"""The shrink search over a seeded schedule, with runs judged by a rule instead of a cluster.

The rule is the one ``no-store-check`` obeys on a real cluster (a stale write needs a holder
paused longer than its lease while another worker takes over), so these tests pin down the
search itself: what it drops, shortens and lays out, what it counts, and that it stops at its
budget. The Docker test in ``test_shrink_docker.py`` runs the same search on real clusters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.matrix import entries_from
from harness.run.replay import Finding, load_run
from harness.run.shrink import Attempt, Runner, shrink
from nemeses import Schedule, generate_schedule
from tests.support.stored_runs import store_run

_ROLES = {"l1": "lock", "s1": "store", "w1": "worker", "w2": "worker", "w3": "worker"}
_TTL = 0.5


def _stored(tmp_path: Path, verdict: bool = False, **options: Any) -> Path:
    spec = RunSpec(
        **options,
        bugs=("no-store-check",),
        nemeses=("pause",),  # the rule below judges pauses
        ttl=_TTL,
        time_limit=25.0,
        seed=2,
        store=tmp_path / "store",
    )
    schedule = generate_schedule(
        spec.seed,
        _ROLES,
        lease_ttl_ns=round(_TTL * 1e9),
        duration_ns=round(spec.time_limit * 1e9),
        kinds=spec.nemeses,
        processes={"worker": "agent"},
    )
    return store_run(spec, schedule, _ROLES, [] if verdict else ["stale-write"])


class _Rule:
    """A stale write shows when some holder pause outlasts the lease and two workers remain;
    ``earliest_ttl``: only a pause that starts that many TTLs into the run (once a holder has
    its lease); ``keys``: only with at least that many keys per lock."""

    def __init__(self, tmp_path: Path, earliest_ttl: float = 0.0, keys: int = 1) -> None:
        self.folder = tmp_path / "runs"
        self.runs: list[tuple[RunSpec, Schedule]] = []
        self.earliest_ttl, self.keys = earliest_ttl, keys

    def __call__(self, spec: RunSpec, schedule: Schedule) -> Attempt:
        self.runs.append((spec, schedule))
        earliest = self.earliest_ttl * schedule.lease_ttl_ns
        shows = (
            spec.workers >= 2
            and spec.keys >= self.keys
            and any(
                w.kind == "pause"
                and w.duration_ns > schedule.lease_ttl_ns
                and w.start_ns >= earliest
                for w in schedule.windows
            )
        )
        finding = Finding("invalid", ("stale-write",)) if shows else Finding("valid", ())
        return Attempt(finding, self.folder / str(len(self.runs)))


def test_many_windows_shrink_to_one_pause_just_over_the_lease(tmp_path: Path) -> None:
    stored = load_run(_stored(tmp_path))
    assert len(stored.schedule.windows) >= 8
    rule = _Rule(tmp_path)
    result = shrink(stored, rule, budget=30)

    assert len(result.minimal.windows) == 1
    (window,) = result.minimal.windows
    assert window.kind == "pause"
    assert 1 < window.ttl_multiple < 2  # 3 or 8 TTLs halved while still past the lease
    assert result.minimal.spec.workers == 2
    assert result.minimal.spec.keys == 1
    assert result.minimal.spec.fault_lengths == (window.ttl_multiple,)
    # the window moved up to the original lead-in, then earlier still (the rule does not care
    # when it starts); the run ends a little after it
    assert window.start_ns < 0.2 * _TTL * 1e9 < stored.schedule.windows[0].start_ns
    assert result.minimal.spec.time_limit < stored.record.spec.time_limit
    assert result.minimal.spec.time_limit * 1e9 > window.end_ns
    assert result.runs == len(rule.runs) <= 30
    assert result.evidence == rule.folder / str(
        max(n for n, t in enumerate(result.trials, 1) if t.kept)
    )
    assert result.replay_command == f"fencecheck replay {result.evidence}"


def test_the_budget_bounds_the_runs_and_the_best_so_far_is_kept(tmp_path: Path) -> None:
    stored = load_run(_stored(tmp_path))
    rule = _Rule(tmp_path)
    result = shrink(stored, rule, budget=2)
    assert result.runs == len(rule.runs) == 2
    kept = [t.candidate for t in result.trials if t.kept]
    assert result.minimal == (kept[-1] if kept else result.original)
    assert len(result.minimal.windows) < len(stored.schedule.windows)


def test_a_candidate_that_cannot_start_costs_no_run(tmp_path: Path) -> None:
    stored = load_run(_stored(tmp_path))
    rule = _Rule(tmp_path)

    def refuse_short(spec: RunSpec, schedule: Schedule) -> Attempt:
        if not any(w.duration_ns > schedule.lease_ttl_ns for w in schedule.windows):
            return Attempt(None, None, "--bug no-store-check cannot show in this run")
        return rule(spec, schedule)

    runner: Runner = refuse_short
    result = shrink(stored, runner, budget=30)
    refused = [t for t in result.trials if t.attempts[0].run_dir is None]
    assert refused and not any(t.kept for t in refused)
    assert result.runs == len(rule.runs)


def test_the_matrix_row_is_a_loadable_row_expecting_the_anomaly(tmp_path: Path) -> None:
    result = shrink(load_run(_stored(tmp_path)), _Rule(tmp_path), budget=30)
    row = json.loads(json.dumps(result.matrix_row))
    (entry,) = entries_from({"runs": [row]})
    assert entry.expect.verdict == "invalid"
    assert entry.expect.anomalies == ("stale-write",)
    assert entry.spec.workers == result.minimal.spec.workers
    assert entry.spec.time_limit == result.minimal.spec.time_limit
    assert entry.spec.fault_lengths == result.minimal.spec.fault_lengths
    assert entry.spec.seed == 2
    data = result.to_json()
    assert (data["windows_before"], data["windows_after"]) == (15, 1)
    assert Schedule.from_json(data["schedule"]).windows == result.minimal.windows


def test_a_valid_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shrink needs an invalid run"):
        shrink(load_run(_stored(tmp_path, verdict=True)), _Rule(tmp_path))


def test_an_anomaly_the_run_lacks_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="an anomaly it shows"):
        shrink(load_run(_stored(tmp_path)), _Rule(tmp_path), anomaly="lost-update")


def test_a_start_moves_earlier_only_while_the_anomaly_still_shows(tmp_path: Path) -> None:
    stored = load_run(_stored(tmp_path))
    lead_in = stored.schedule.windows[0].start_ns
    earliest = 0.5 * lead_in / (_TTL * 1e9)  # in TTLs: halfway through the original lead-in
    result = shrink(stored, _Rule(tmp_path, earliest_ttl=earliest), budget=60)
    (window,) = result.minimal.windows
    assert earliest * _TTL * 1e9 <= window.start_ns < lead_in
    moves = [t for t in result.trials if "earlier" in t.step]
    assert [t.kept for t in moves][:2] == [True, False]  # half the lead-in, then a quarter


def test_keys_are_halved_down_to_what_the_anomaly_needs(tmp_path: Path) -> None:
    stored = load_run(_stored(tmp_path, keys=3))
    assert stored.record.spec.keys == 3
    result = shrink(stored, _Rule(tmp_path, keys=2), budget=60)
    assert result.minimal.spec.keys == 2
    assert result.original.spec.keys == 3
    keys = [t for t in result.trials if "per lock" in t.step]
    assert [(t.step, t.kept) for t in keys] == [
        ("2 keys per lock", True),
        ("1 key per lock", False),
    ]
    assert (result.to_json()["keys_before"], result.to_json()["keys_after"]) == (3, 2)


def test_keys_never_drop_below_what_one_write_spans(tmp_path: Path) -> None:
    stored = load_run(_stored(tmp_path, keys=4, keys_per_write=2))
    result = shrink(stored, _Rule(tmp_path, keys=1), budget=60)
    assert result.minimal.spec.keys == 2
    assert all("1 key" not in t.step for t in result.trials)


def test_the_time_budget_starts_no_candidate_after_it_runs_out(tmp_path: Path) -> None:
    rule = _Rule(tmp_path)
    now = [0.0]

    def slow(spec: RunSpec, schedule: Schedule) -> Attempt:
        now[0] += 10.0  # each candidate run takes 10 s of the clock
        return rule(spec, schedule)

    result = shrink(
        load_run(_stored(tmp_path)), slow, budget=100, time_budget=35, clock=lambda: now[0]
    )
    assert result.runs == len(rule.runs) == 4  # started at 0, 10, 20, 30 s; none at 40 s
    assert result.seconds == 40.0 and result.time_budget == 35
    assert result.to_json()["time_budget"] == 35


def test_the_matrix_row_replays_the_exact_minimal_windows(tmp_path: Path) -> None:
    result = shrink(load_run(_stored(tmp_path)), _Rule(tmp_path), budget=60)
    row = json.loads(json.dumps(result.matrix_row))
    (entry,) = entries_from({"runs": [row]}, overrides={"store": str(tmp_path / "again")})
    assert entry.schedule is not None
    assert entry.schedule.windows == result.minimal.windows
    assert entry.schedule.lease_ttl_ns == round(_TTL * 1e9)
    assert entry.schedule.duration_ns == round(result.minimal.spec.time_limit * 1e9)
    minimal = result.minimal.spec
    assert (entry.spec.nemeses, entry.spec.keys, entry.spec.bugs) == (
        minimal.nemeses,
        minimal.keys,
        minimal.bugs,
    )
    matrix = json.loads(json.dumps(result.matrix))
    assert f"in {result.runs} runs" in matrix["description"]
    (again,) = entries_from(matrix)
    assert again.schedule == entry.schedule
