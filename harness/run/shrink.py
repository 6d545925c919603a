"""Shrinking a failing run to the few faults that matter (delta debugging over its schedule).

A red run's schedule is data, so fencecheck can do what a person otherwise does by luck: run
smaller variants of it and keep each one that still shows the anomaly. The steps, each a series
of candidates, each candidate one real run (a replay with a modified schedule or spec):

1. drop groups (a base window with the overlays on it, :mod:`nemeses.schedule`): keep either
   half while one still fails, then try without each group in turn;
2. split each pair: drop the overlay (the base alone), else the base (the overlay alone, at the
   moment it had); a pair that needs both stays a pair, the smallest reproduction there is;
3. shorten each window, halving its length while the anomaly still shows;
4. move each window's start earlier, halving the quiet time before it (the lead-in for the
   first group, the recovery gap after the previous group for the others; for an overlay, its
   offset into its base) while the anomaly still shows, and when not even the first move kept it,
   once later (half as much quiet time again; for an overlay, half of what is left of its base);
5. reduce the workers one at a time;
6. reduce the keys per lock, by a binary search down towards one (fewer keys make the history
   shorter to read; an anomaly that needs a stale holder to find a key untouched keeps them).

In every candidate the remaining groups move up to close the gaps that dropped or shortened ones
leave (each keeps the recovery gap it had before it, or the one step 4 gave it; an overlay keeps
its offset into its base, within the base), and the run ends a little after the last window: the
time after it only costs run time, and shorter candidates make the search cheaper. A failure that
needs a window at its original moment therefore resists dropping what precedes it; the search then
keeps those windows rather than claim a smaller reproduction.

Most failures need three events or fewer (Yuan et al., OSDI '14), so the result is usually one
or two windows. A candidate is kept when at least one of its ``tries`` runs shows the anomaly
type; timing on a real cluster varies, so a candidate that fails once may be a false negative and
the result is a local minimum, not a proof. The run budget and the wall-clock budget (whichever
runs out first) bound the whole search: no candidate starts after either is spent.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from rich.console import Console

from harness.record.spec import TestSpec
from harness.run.plan import RunError
from harness.run.replay import Finding, StoredRun, finding_of
from harness.run.runner import run_test
from harness.run.store import RunDir
from nemeses import Schedule, Window
from nemeses.schedule import (
    ANCHOR,
    COMPOUND,
    OVERLAPS,
    RELEASE_WITH,
    RESUMES_BASE,
    START_AFTER_WRITES,
)
from systems import AdapterError, load_system, topology

__all__ = [
    "Attempt",
    "Candidate",
    "Runner",
    "Shrunk",
    "Trial",
    "cluster_runner",
    "shrink",
]

_SHORTEST_TTL: Final = 0.1
"""Windows are not halved below this many TTLs: a shorter fault tests nothing a lease notices."""
_SMALLEST_MOVE_TTL: Final = 0.1
"""A start is not moved by less than this many TTLs: a smaller move changes nothing a lease sees."""
_TAIL_TTL: Final = 2.0
"""A candidate ends this many TTLs after its last window (the stale write comes on resuming)..."""
_TAIL_S: Final = 1.0
"""...plus this many seconds, for the write the resumed holder was about to make."""
_DEFAULT_BUDGET: Final = 20
_OVERLAY_KEYS: Final = (OVERLAPS, ANCHOR, START_AFTER_WRITES, RELEASE_WITH, RESUMES_BASE)
"""What ties an overlay to its base: gone with the base, the overlay stands alone."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A spec and the windows to play over it (a shrink's unit of search)."""

    spec: TestSpec
    windows: tuple[Window, ...]

    def schedule(self, lease_ttl_ns: int) -> Schedule:
        """The schedule to play: the windows over the spec's time limit."""
        return Schedule(
            self.spec.seed, lease_ttl_ns, round(self.spec.time_limit * 1e9), self.windows
        )


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of a candidate: what it found, or why it could not run (nothing started then)."""

    finding: Finding | None
    run_dir: Path | None
    problem: str | None = None
    interrupted: bool = False


Runner = Callable[[TestSpec, Schedule], Attempt]
"""Runs a spec with a given schedule: :func:`cluster_runner` in real use."""


@dataclass(frozen=True, slots=True)
class Trial:
    """A candidate tried during a shrink: which step, what it was, and whether it was kept."""

    step: str
    candidate: Candidate
    attempts: tuple[Attempt, ...]
    kept: bool


@dataclass(frozen=True, slots=True)
class Shrunk:
    """A shrink's result: the smallest candidate that still showed ``anomaly``, the run that
    showed it (``evidence``; the original run when nothing smaller did) and what it cost."""

    anomaly: str
    original: Candidate
    minimal: Candidate
    evidence: Path
    original_run: Path
    command: str
    """The minimal spec as a ``fencecheck run`` command line (its seed draws its own windows)."""
    runs: int
    trials: tuple[Trial, ...]
    budget: int
    interrupted: bool = False
    seconds: float = 0.0
    """Wall-clock time the search took."""
    time_budget: float | None = None
    """The wall-clock budget in seconds, if one was given."""

    @property
    def replay_command(self) -> str:
        """The one-line reproduction: a replay of the run that showed the minimal candidate."""
        return f"fencecheck replay {self.evidence}"

    @property
    def matrix_row(self) -> dict[str, Any]:
        """The minimal candidate as a ``run-all`` matrix row expecting the anomaly: its spec
        (the fields that differ from the defaults, the seed and the nemeses) and its exact
        ``windows``, which ``run-all`` plays instead of drawing a schedule from the seed."""
        spec, default = self.minimal.spec.to_json(), TestSpec(seed=0).to_json()
        row = {
            key: value
            for key, value in spec.items()
            if key not in ("store", "name", "test_name") and value != default[key]
        }
        row["seed"] = self.minimal.spec.seed
        row["nemeses"] = list(self.minimal.spec.nemeses)
        return {
            **row,
            "windows": [window.to_json() for window in self.minimal.windows],
            "expect": "invalid",
            "expect_anomalies": [self.anomaly],
        }

    @property
    def matrix(self) -> dict[str, Any]:
        """A whole matrix file holding :attr:`matrix_row`, saying where it came from."""
        return {
            "description": f"shrunk from {self.original_run} in {self.runs} runs: "
            f"{len(self.original.windows)} windows to {len(self.minimal.windows)}",
            "runs": [self.matrix_row],
        }

    def to_json(self) -> dict[str, Any]:
        """What ``shrunk.json`` holds."""
        ttl_ns = round(self.minimal.spec.ttl * 1e9)
        return {
            "anomaly": self.anomaly,
            "runs": self.runs,
            "budget": self.budget,
            "interrupted": self.interrupted,
            "seconds": round(self.seconds, 1),
            "time_budget": self.time_budget,
            "windows_before": len(self.original.windows),
            "windows_after": len(self.minimal.windows),
            "workers_before": self.original.spec.workers,
            "workers_after": self.minimal.spec.workers,
            "keys_before": self.original.spec.keys,
            "keys_after": self.minimal.spec.keys,
            "time_limit_before": self.original.spec.time_limit,
            "time_limit_after": self.minimal.spec.time_limit,
            "replay": self.replay_command,
            "command": self.command,
            "evidence": str(self.evidence),
            "spec": self.minimal.spec.to_json(),
            "schedule": self.minimal.schedule(ttl_ns).to_json(),
            "matrix_row": self.matrix_row,
            "matrix": self.matrix,
            "trials": [
                {
                    "step": trial.step,
                    "windows": [w.index for w in trial.candidate.windows],
                    "kept": trial.kept,
                    "runs": [str(a.run_dir) if a.run_dir else a.problem for a in trial.attempts],
                }
                for trial in self.trials
            ],
        }


def cluster_runner(console: Console, store: Path) -> Runner:
    """Run candidates on fresh clusters, storing them under ``store``."""

    def run(spec: TestSpec, schedule: Schedule) -> Attempt:
        try:
            outcome = run_test(
                replace(spec, store=store), console=console, progress=False, schedule=schedule
            )
        except RunError as problem:
            return Attempt(None, None, str(problem))
        return Attempt(
            finding_of(outcome.run_dir), outcome.run_dir.path, interrupted=outcome.interrupted
        )

    return run


def shrink(
    stored: StoredRun,
    runner: Runner,
    *,
    anomaly: str | None = None,
    budget: int = _DEFAULT_BUDGET,
    time_budget: float | None = None,
    tries: int = 1,
    on_trial: Callable[[Trial, int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Shrunk:
    """Shrink ``stored`` (an invalid run) to the smallest candidate that still shows ``anomaly``
    (default: its first anomaly type), running at most ``budget`` candidates, each up to
    ``tries`` times, and starting none after ``time_budget`` seconds (by ``clock``).
    ``on_trial(trial, runs so far)`` follows the progress. Raises ``ValueError`` when the run
    shows no such anomaly."""
    found = stored.finding.anomaly_types
    target = anomaly or (found[0] if found else None)
    if target is None or target not in found:
        raise ValueError(
            f"{stored.run.path} shows {stored.finding}; shrink needs an invalid run and an "
            f"anomaly it shows ({', '.join(found) or 'none'})"
        )
    began = clock()
    deadline = None if time_budget is None else began + time_budget
    search = _Search(stored, runner, target, budget, tries, on_trial, deadline, clock)
    search.run()
    return Shrunk(
        anomaly=target,
        original=search.original,
        minimal=search.best,
        evidence=search.evidence,
        original_run=stored.run.path,
        command=_command_of(search.evidence),
        runs=search.runs,
        trials=tuple(search.trials),
        budget=budget,
        interrupted=search.interrupted,
        seconds=clock() - began,
        time_budget=time_budget,
    )


class _Search:
    """The state of one shrink: the best candidate so far and the runs spent."""

    def __init__(
        self,
        stored: StoredRun,
        runner: Runner,
        anomaly: str,
        budget: int,
        tries: int,
        on_trial: Callable[[Trial, int], None] | None,
        deadline: float | None,
        clock: Callable[[], float],
    ) -> None:
        self.original = Candidate(stored.record.spec, stored.schedule.windows)
        self.best = self.original
        self.evidence = stored.run.path
        self.ttl_ns = stored.schedule.lease_ttl_ns
        windows = stored.schedule.windows
        self.lead_in_ns = windows[0].start_ns if windows else 0
        by_index = {window.index: window for window in windows}
        # An overlay's offset into its base; a base's quiet time after the previous group (an
        # overlay's, once its base is dropped: its base's plus its offset).
        self.offsets = {
            w.index: w.start_ns - by_index[w.params[OVERLAPS]].start_ns
            for w in windows
            if w.params.get(OVERLAPS) in by_index
        }
        heads = [group[0] for group in _groups(windows)]
        self.gaps = {
            later.index: later.start_ns - _group_end(windows, earlier)
            for earlier, later in itertools.pairwise(heads)
        }
        for index, offset in self.offsets.items():
            base = by_index[by_index[index].params[OVERLAPS]]
            self.gaps[index] = self.gaps.get(base.index, self.lead_in_ns) + offset
        self.runner, self.anomaly, self.budget, self.tries = runner, anomaly, budget, max(1, tries)
        self.on_trial = on_trial
        self.deadline, self.clock = deadline, clock
        self.runs = 0
        self.trials: list[Trial] = []
        self.interrupted = False

    @property
    def spent(self) -> bool:
        """No runs or time left, or the user stopped the shrink."""
        out_of_time = self.deadline is not None and self.clock() >= self.deadline
        return self.runs >= self.budget or self.interrupted or out_of_time

    def run(self) -> None:
        """The steps of the module documentation, in order, until the budget is spent."""
        self._drop_halves()
        self._drop_each()
        self._split_pairs()
        self._shorten()
        self._move()
        self._fewer_workers()
        self._fewer_keys()

    def attempt(self, step: str, candidate: Candidate) -> bool:
        """Run ``candidate``; make it the best when it shows the anomaly."""
        if self.spent:
            return False
        attempts: list[Attempt] = []
        kept = False
        for _ in range(self.tries):
            if self.spent:
                break
            attempt = self.runner(candidate.spec, candidate.schedule(self.ttl_ns))
            attempts.append(attempt)
            if attempt.run_dir is not None:
                self.runs += 1
            if attempt.interrupted:
                self.interrupted = True
            finding = attempt.finding
            if finding is not None and self.anomaly in finding.anomaly_types:
                kept = True
                self.best = candidate
                assert attempt.run_dir is not None
                self.evidence = attempt.run_dir
                break
            if attempt.run_dir is None:
                break  # it could not start: another try would not either
        trial = Trial(step, candidate, tuple(attempts), kept)
        self.trials.append(trial)
        if self.on_trial is not None:
            self.on_trial(trial, self.runs)
        return kept

    def layout(
        self, spec: TestSpec, windows: Sequence[Window], moved: tuple[int, int] | None = None
    ) -> Candidate:
        """``windows`` (in schedule order) moved up to close the gaps dropped windows leave: each
        group after the recovery gap it had (the first after the lead-in), each overlay at its
        offset into its base (within it), an overlay whose base is gone standing alone, and the
        run ended a little after the last window. ``moved`` (window index, quiet time before
        it or an overlay's offset) tries a new place."""
        placed: list[Window] = []
        for group in _groups(windows):
            head = group[0]
            gap = self.gaps[head.index] if placed else self.lead_in_ns
            if moved is not None and moved[0] == head.index:
                gap = moved[1]
            previous_end = max((w.end_ns for w in placed), default=0)
            at = previous_end + gap if placed else gap
            # A compound's half left alone is a plain fault: it no longer says it is a pair's.
            ties = (*_OVERLAY_KEYS, COMPOUND) if len(group) == 1 else _OVERLAY_KEYS
            alone = {k: v for k, v in head.params.items() if k not in ties}
            placed.append(replace(head, start_ns=at, params=alone))
            for overlay in group[1:]:
                offset = self.offsets[overlay.index]
                if moved is not None and moved[0] == overlay.index:
                    offset = moved[1]
                offset = min(offset, head.duration_ns)
                placed.append(replace(overlay, start_ns=at + offset))
        last = max((w.end_ns for w in placed), default=0)
        end = last / 1e9 + _TAIL_TTL * spec.ttl + _TAIL_S
        limit = min(self.original.spec.time_limit, max(spec.ttl, math.ceil(end * 10) / 10))
        lengths = tuple(sorted({w.ttl_multiple for w in placed})) or spec.fault_lengths
        return Candidate(replace(spec, time_limit=limit, fault_lengths=lengths), tuple(placed))

    def _drop_halves(self) -> None:
        while len(groups := _groups(self.best.windows)) > 1 and not self.spent:
            middle = len(groups) // 2
            halves = (groups[:middle], groups[middle:])
            spec = self.best.spec
            if not any(self.attempt("drop half", self.layout(spec, _flat(h))) for h in halves):
                return

    def _drop_each(self) -> None:
        for group in _groups(self.best.windows):
            if self.spent:
                return
            gone = {w.index for w in group}
            rest = [w for w in self.best.windows if w.index not in gone]
            if rest:
                step = f"drop window{'s' if len(gone) > 1 else ''} {', '.join(map(str, gone))}"
                self.attempt(step, self.layout(self.best.spec, rest))

    def _split_pairs(self) -> None:
        for group in _groups(self.best.windows):
            for window in reversed(group) if len(group) > 1 else ():
                if self.spent or len(self.best.windows) <= 1:
                    return
                rest = [w for w in self.best.windows if w.index != window.index]
                if self.attempt(
                    f"drop window {window.index} of a pair", self.layout(self.best.spec, rest)
                ):
                    break

    def _shorten(self) -> None:
        for index in [w.index for w in self.best.windows]:
            while not self.spent:
                current = next(w for w in self.best.windows if w.index == index)
                multiple = current.ttl_multiple / 2
                if multiple < _SHORTEST_TTL:
                    break
                shorter = replace(
                    current, ttl_multiple=multiple, duration_ns=round(multiple * self.ttl_ns)
                )
                windows = [shorter if w.index == index else w for w in self.best.windows]
                step = f"window {index} at {multiple:g} x TTL"
                if not self.attempt(step, self.layout(self.best.spec, windows)):
                    break

    def _move(self) -> None:
        for index in [w.index for w in self.best.windows]:
            moved = False
            while not self.spent:
                quiet = self._quiet(index)
                earlier = quiet // 2
                if quiet - earlier < _SMALLEST_MOVE_TTL * self.ttl_ns:
                    break
                if not self._try_place(index, earlier, f"{(quiet - earlier) / 1e9:.3g} s earlier"):
                    break
                moved = True
            if not moved and not self.spent:
                quiet, room = self._quiet(index), self._room(index)
                later = quiet + room // 2
                if room // 2 >= _SMALLEST_MOVE_TTL * self.ttl_ns:
                    self._try_place(index, later, f"{(later - quiet) / 1e9:.3g} s later")

    def _quiet(self, index: int) -> int:
        """How long before window ``index`` starts: its offset into its base (an overlay), the
        lead-in (the first group) or the recovery gap after the previous group."""
        window = next(w for w in self.best.windows if w.index == index)
        if OVERLAPS in window.params:
            return self.offsets[index]
        first = self.best.windows[0].index == index
        return self.lead_in_ns if first else self.gaps[index]

    def _room(self, index: int) -> int:
        """How much later window ``index`` may move: the rest of its base for an overlay, as
        much quiet time again for the others."""
        window = next(w for w in self.best.windows if w.index == index)
        base = [w for w in self.best.windows if w.index == window.params.get(OVERLAPS)]
        if base:
            return max(0, base[0].duration_ns - self.offsets[index])
        return self._quiet(index)

    def _try_place(self, index: int, quiet: int, how: str) -> bool:
        """Try window ``index`` with ``quiet`` time before it; keep the place when it fails."""
        candidate = self.layout(self.best.spec, self.best.windows, (index, quiet))
        if not self.attempt(f"window {index} {how}", candidate):
            return False
        window = next(w for w in self.best.windows if w.index == index)
        if OVERLAPS in window.params:
            self.offsets[index] = quiet
        elif self.best.windows[0].index == index:
            self.lead_in_ns = quiet
        else:
            self.gaps[index] = quiet
        return True

    def _fewer_keys(self) -> None:
        # A binary search between the fewest keys a write can span (one, or --keys-per-write)
        # and the count known to fail: 1,000 keys take ten runs.
        fewest = self.best.spec.keys_per_write
        while fewest < self.best.spec.keys and not self.spent:
            keys = (fewest + self.best.spec.keys) // 2
            fewer = replace(self.best.spec, keys=keys)
            step = f"{keys} key{'' if keys == 1 else 's'} per lock"
            if not self.attempt(step, Candidate(fewer, self.best.windows)):
                fewest = keys + 1

    def _fewer_workers(self) -> None:
        while self.best.spec.workers > 1 and not self.spent:
            fewer = _with_workers(self.best, self.best.spec.workers - 1)
            step = f"{fewer.spec.workers} worker(s)" if fewer else ""
            if fewer is None or not self.attempt(step, fewer):
                return


def _groups(windows: Sequence[Window]) -> list[list[Window]]:
    """``windows`` as groups, in order: each base with the overlays on it (an overlay whose base
    is not among them is a group of its own)."""
    present = {window.index for window in windows}
    groups: list[list[Window]] = []
    heads: dict[int, list[Window]] = {}
    for window in windows:
        base = window.params.get(OVERLAPS)
        if base in present and base in heads:
            heads[base].append(window)
            continue
        groups.append([window])
        heads[window.index] = groups[-1]
    return groups


def _flat(groups: Sequence[Sequence[Window]]) -> list[Window]:
    return [window for group in groups for window in group]


def _group_end(windows: Sequence[Window], head: Window) -> int:
    """When the group ``head`` leads ends: its last window's end."""
    return max(
        w.end_ns for w in windows if w.index == head.index or w.params.get(OVERLAPS) == head.index
    )


def _with_workers(candidate: Candidate, workers: int) -> Candidate | None:
    """``candidate`` on ``workers`` workers, or ``None`` when a window names a node that goes
    (a holder window's fallback moves to a worker that stays)."""
    spec = candidate.spec
    try:
        roles = load_system(spec.system).roles()
        before = {name for name, role in topology(roles, spec.workers) if role == "worker"}
        after = sorted(name for name, role in topology(roles, workers) if role == "worker")
    except (LookupError, ValueError, AdapterError):
        return None
    gone = before - set(after)
    if not gone:
        return None
    windows = []
    for window in candidate.windows:
        peers = window.params.get("peers") or ()
        if gone & set(window.targets) or gone & set(peers):
            return None
        if window.fallback in gone:
            window = replace(window, fallback=after[0])
        windows.append(window)
    return Candidate(replace(spec, workers=workers), tuple(windows))


def _command_of(run: Path) -> str:
    """The ``fencecheck run`` command line a run's ``test.json`` records."""
    try:
        return RunDir(run).read_record().command
    except (OSError, ValueError):
        return ""
