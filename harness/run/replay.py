"""Replaying a stored run: the same spec, seed and fault schedule, on a fresh cluster.

The seed fixes the holders' operation choices and the recorded schedule fixes the fault windows
(start, length, kind, targets); a symbolic ``holder`` target still lands on whoever holds the
lease when the window opens, as it did the first time. :func:`pinned` instead aims each window
at the very nodes it landed on in the original run, read from its history. Timing on a real
cluster is not deterministic, so a replay says whether the verdict and the anomaly types came
back rather than assuming they will. :mod:`harness.run.shrink` replays modified schedules the
same way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console

from harness.record import NEMESIS, HistoryError, read_history
from harness.record.run_record import RunRecord
from harness.record.schedule import Schedule
from harness.run.judge import RunOutcome
from harness.run.runner import run_test
from harness.run.store import RunDir, open_run_dir
from harness.run.summary import Verdict, summarize

__all__ = [
    "Finding",
    "Replay",
    "ReplayError",
    "StoredRun",
    "WindowLanding",
    "differences",
    "finding_of",
    "landings",
    "load_run",
    "pinned",
    "replay",
]


class ReplayError(ValueError):
    """A run that cannot be replayed; the message names the problem and the fix."""


@dataclass(frozen=True, slots=True)
class Finding:
    """What the checker said about one run: its verdict and the anomaly types that decided it."""

    verdict: Verdict
    anomaly_types: tuple[str, ...]

    def __str__(self) -> str:
        found = f" ({', '.join(self.anomaly_types)})" if self.anomaly_types else ""
        return f"{self.verdict}{found}"


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A stored run read back for replaying: its folder, record, schedule and finding."""

    run: RunDir
    record: RunRecord
    schedule: Schedule
    finding: Finding

    @property
    def store(self) -> Path:
        """The store the run lives in (``<store>/<test>/<timestamp>``): replays go there too."""
        return self.run.path.parent.parent


@dataclass(frozen=True, slots=True)
class Replay:
    """A replay's outcome beside the original run's finding."""

    original: Finding
    again: Finding
    outcome: RunOutcome
    why: tuple[str, ...] = ()
    """For a replay that did not reproduce: the windows that landed otherwise (see
    :func:`differences`)."""

    @property
    def verdict_reproduced(self) -> bool:
        """The replay reached the original verdict."""
        return self.again.verdict == self.original.verdict

    @property
    def anomalies_reproduced(self) -> bool:
        """The replay found exactly the original anomaly types."""
        return set(self.again.anomaly_types) == set(self.original.anomaly_types)

    @property
    def reproduced(self) -> bool:
        """Both the verdict and the anomaly types came back (and the replay did not break off)."""
        return (
            self.outcome.error is None
            and not self.outcome.interrupted
            and self.verdict_reproduced
            and self.anomalies_reproduced
        )


@dataclass(frozen=True, slots=True)
class WindowLanding:
    """How one fault window landed in a run, as its ``start-<kind>`` event records it."""

    kind: str
    targets: tuple[str, ...]
    applied: bool
    mid_write: bool | None
    """Whether a holder-aimed window began inside a write (``None``: not recorded)."""


def landings(run: RunDir) -> dict[int, WindowLanding]:
    """Window index -> how it landed in ``run`` (windows that never started are absent)."""
    found: dict[int, WindowLanding] = {}
    try:
        for event in read_history(run.history):
            value = event.value
            window = value.get("id")
            if event.process != NEMESIS or not isinstance(window, int) or window in found:
                continue
            if not str(event.f).startswith("start-"):
                continue
            targets = value.get("targets")
            mid = value.get("mid_write")
            found[window] = WindowLanding(
                kind=str(event.f).removeprefix("start-"),
                targets=tuple(str(t) for t in targets) if isinstance(targets, list) else (),
                applied=value.get("applied") is not False and not value.get("error"),
                mid_write=mid if isinstance(mid, bool) else None,
            )
    except (OSError, HistoryError):
        return found
    return found


def differences(first: RunDir, again: RunDir) -> list[str]:
    """Why a replay may have come out otherwise: each window that landed differently (another
    node, between writes instead of inside one, not applied, never started), in words."""
    before, after = landings(first), landings(again)
    said: list[str] = []
    for index in sorted(before):
        was, now = before[index], after.get(index)
        name = f"window {index} ({was.kind})"
        if now is None:
            said.append(f"{name} started the first time, not in the replay")
            continue
        if was.targets != now.targets:
            said.append(
                f"{name} landed on {', '.join(was.targets) or '?'} the first time, on "
                f"{', '.join(now.targets) or '?'} in the replay (pin it with --pin)"
            )
        if was.applied != now.applied:
            said.append(
                f"{name} was {'applied' if was.applied else 'not applied'} the first time, "
                f"{'applied' if now.applied else 'not applied'} in the replay"
            )
        if (
            was.mid_write is not None
            and now.mid_write is not None
            and was.mid_write != now.mid_write
        ):
            where = {True: "inside a write", False: "between writes"}
            said.append(
                f"{name} began {where[was.mid_write]} the first time, {where[now.mid_write]} in "
                "the replay (a pause between writes only delays a holder that checks its lease)"
            )
    for index in sorted(set(after) - set(before)):
        said.append(f"window {index} ({after[index].kind}) started only in the replay")
    return said


def finding_of(run: RunDir) -> Finding:
    """The verdict and anomaly types ``results.json`` of ``run`` records."""
    summary = summarize(run)
    return Finding(summary.verdict, summary.anomaly_types)


def load_run(path: str | Path) -> StoredRun:
    """Read a run directory for replaying; raises :class:`ReplayError` naming what is missing."""
    try:
        run = open_run_dir(path)
        record = run.read_record()
    except (OSError, ValueError) as problem:
        raise ReplayError(f"cannot read the run {path}: {problem}") from None
    schedule = record.schedule
    if schedule is None:
        raise ReplayError(
            f"{run.test_json} records no fault schedule (the run broke off before it was drawn); "
            "rerun its command instead: " + record.command
        )
    finding = finding_of(run)
    if finding.verdict == "unchecked":
        raise ReplayError(
            f"{path} was never checked, so there is nothing to compare a replay with; "
            f"run `fencecheck analyze {path}` first"
        )
    return StoredRun(run, record, schedule, finding)


def pinned(stored: StoredRun) -> Schedule:
    """``stored``'s schedule with each window aimed at the nodes it landed on in the original run
    (the holder or lock leader of that moment), as its history's ``start-<kind>`` event records.

    Partitions keep their symbolic targets (their drops are worked out from them), and so does a
    window that never started or whose fault was not applied.
    """
    landed: dict[int, tuple[str, ...]] = {}
    try:
        for event in read_history(stored.run.history):
            value = event.value
            if event.process != NEMESIS or value.get("applied") is False:
                continue
            window, targets = value.get("id"), value.get("targets")
            if isinstance(window, int) and isinstance(targets, list):
                landed.setdefault(window, tuple(str(t) for t in targets))
    except (OSError, HistoryError) as problem:
        raise ReplayError(f"cannot read {stored.run.history}: {problem}") from None
    windows = tuple(
        replace(w, targets=landed[w.index])
        if w.symbolic and w.kind != "partition" and w.index in landed
        else w
        for w in stored.schedule.windows
    )
    return replace(stored.schedule, windows=windows)


def replay(
    stored: StoredRun,
    *,
    console: Console | None = None,
    progress: bool = False,
    store: Path | None = None,
    pin: bool = False,
) -> Replay:
    """Run ``stored``'s spec again with its seed and recorded schedule (into ``store``, by
    default the original's store; with ``pin``, each window on the nodes it landed on, see
    :func:`pinned`) and compare the findings. Raises :class:`harness.run.plan.RunError` when
    the run cannot start."""
    spec = replace(stored.record.spec, store=store or stored.store)
    outcome = run_test(
        spec,
        console=console,
        progress=progress,
        command=["fencecheck", "replay", *(["--pin"] if pin else []), str(stored.run.path)],
        schedule=pinned(stored) if pin else stored.schedule,
    )
    done = Replay(stored.finding, finding_of(outcome.run_dir), outcome)
    if not done.reproduced:
        done = replace(done, why=tuple(differences(stored.run, outcome.run_dir)))
    # Kept beside the replay, for its report: whether it reproduced, and if not, why it may not.
    outcome.run_dir.write_json(
        outcome.run_dir.replay,
        {
            "of": str(stored.run.path),
            "original": str(done.original),
            "again": str(done.again),
            "reproduced": done.reproduced,
            "differences": list(done.why),
        },
    )
    return done
