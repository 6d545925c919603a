"""Judging a run: its history checked once (the verdict and the coverage in one pass), then
concluded with the run's own story (an interruption, an error, parts lost) and written to
``results.json``.

Judging is apart from carrying out (:mod:`harness.run.runner`) so that a stored run is judged
again (``fencecheck analyze``) exactly as it was the first time, and a signal that arrives after
the check concludes the verdict again without a second check.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from checkers import check_file
from checkers.check import FINAL_READ_ADVICE
from harness.node.interrupts import Interrupted
from harness.record.results import results_json
from harness.record.run_record import Interruption, RunRecord
from harness.record.verdict import Verdict
from harness.run.plan import RunError
from harness.run.store import RunDir, why_unwritable

__all__ = [
    "Judged",
    "RunOutcome",
    "check_run",
    "conclude_run",
    "judge_recorded",
    "judge_run",
    "note_late_signal",
    "write_results",
]


@dataclass(frozen=True)
class Judged:
    """What the checker found in a run's history, before the run's own story (an interruption,
    an error) is added to it: judged once, concluded again if a signal comes later."""

    result: Verdict
    """The verdict, its coverage inside."""
    notes: tuple[str, ...] = ()
    """What reading the history found beside the events (a torn last line)."""


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: where it is stored and what the checker decided."""

    run_dir: RunDir
    result: Verdict
    interrupted: bool
    error: str | None = None
    """Why the run broke off (setup failed, the engine went away…); its history is still checked."""
    record: RunRecord | None = None
    """The run's ``test.json``, as the runner left it (read back from it when absent)."""
    judged: Judged | None = None
    """What the checker found, to conclude again if a signal comes while the report is written
    (judged again when absent)."""


def judge_recorded(run_dir: RunDir, record: RunRecord) -> Judged:
    """:func:`judge_run` on the run the runner just carried out: a history it cannot read (the
    folder deleted under the run, a permission changed) is a :class:`RunError` naming the fix."""
    try:
        return judge_run(run_dir, record)
    except FileNotFoundError:
        raise RunError(
            f"the run folder {run_dir.path} was deleted while the run wrote to it, and "
            "its history with it: nothing is left to check (faults healed, cluster "
            "removed); leave the store in place while a run writes to it"
        ) from None
    except OSError as problem:
        raise RunError(
            f"cannot read the run's history {run_dir.history}: {why_unwritable(problem)}"
            "; fix the store's permissions, then `fencecheck analyze` the run folder"
        ) from None


def note_late_signal(outcome: RunOutcome, signal: Interrupted, phase: str) -> RunOutcome:
    """A finished run interrupted afterwards (while its report was written): the signal goes
    into ``test.json`` and ``results.json`` like any other, and the verdict is concluded again
    (without checking the history again)."""
    run_dir = outcome.run_dir
    record = outcome.record or run_dir.read_record()
    judged = outcome.judged or judge_run(run_dir, record)
    record.interrupted = Interruption(signal.signal, signal.at.isoformat(), phase)
    run_dir.write_json(run_dir.test_json, record.to_json())
    result = conclude_run(run_dir, record, judged)
    return replace(outcome, result=result, interrupted=True, record=record, judged=judged)


def judge_run(run_dir: RunDir, record: RunRecord) -> Judged:
    """Check a run directory's history with its inventory, TTL and roles: one read of the history
    gives the verdict and its coverage."""
    notes: list[str] = []
    result = check_file(
        run_dir.history,
        inventory=record.sinks,
        lease_ttl=record.lease_ttl,
        roles=record.roles,
        notes=notes,
    )
    return Judged(result, tuple(notes))


_NEVER_FINISHED: Final = (
    "the run never finished: its process died (SIGKILL, a crash or a power loss) before it "
    "checked its history (test.json records no end); judged on what was recorded"
)


def conclude_run(
    run_dir: RunDir, record: RunRecord, judged: Judged, *, write: bool = True
) -> Verdict:
    """The run's verdict from what the checker found and how the run ended, written to
    ``results.json`` unless ``write`` is false.

    A run cut short (interrupted: which signal, when, in which phase; or broken off by an error)
    says so first among the unknown reasons, and is never valid: it is unknown, or invalid when
    what was recorded already shows an anomaly.
    """
    result = judged.result
    cut_short = None
    if not record.finished:
        cut_short = _NEVER_FINISHED
    elif record.interrupted is not None:
        cut_short = f"the run was {record.interrupted.describe()}"
    elif record.error:
        cut_short = f"the run broke off: {record.error}"
    if cut_short is not None:
        result = replace(
            result,
            valid="unknown" if result.valid is True else result.valid,
            unknown_reasons=_cut_short_reasons(
                cut_short, result, ": the run ended before its final reads"
            ),
        )
    elif record.lost:
        lost = "; ".join(record.lost)
        result = replace(
            result,
            unknown_reasons=_cut_short_reasons(
                f"lost during the final reads: {lost}", result, ": the final reads were lost"
            ),
        )
    if write:
        write_results(run_dir, record, judged, result)
    return result


def write_results(run_dir: RunDir, record: RunRecord, judged: Judged, result: Verdict) -> None:
    """Write ``results.json`` from ``result`` (what :func:`conclude_run` concluded) and how
    ``record``'s run ended: the one write of a run's results."""
    run_dir.write_json(
        run_dir.results,
        results_json(
            result,
            notes=judged.notes,
            finished=record.finished,
            interrupted=record.interrupted,
            run_error=record.error,
            lost=record.lost,
            control=record.unexposed,
        ),
    )


def check_run(run_dir: RunDir, record: RunRecord | None = None, *, write: bool = True) -> Verdict:
    """Check a run directory's history and write ``results.json`` (unless ``write`` is false);
    ``record`` is the run's, read from ``test.json`` when absent (:func:`judge_run`, then
    :func:`conclude_run`). The report and the store's index are the caller's to write
    (:func:`harness.report.publish`).
    """
    record = record if record is not None else run_dir.read_record()
    return conclude_run(run_dir, record, judge_run(run_dir, record), write=write)


def _cut_short_reasons(note: str, result: Verdict, instead: str) -> tuple[str, ...]:
    """The unknown reasons of a run that could not finish its final reads: why first, and
    ``instead`` of the advice to add a final read (the workload has one; it could not run)."""
    reasons = [
        reason.removesuffix(FINAL_READ_ADVICE) + instead
        if reason.endswith(FINAL_READ_ADVICE)
        else reason
        for reason in result.unknown_reasons
    ]
    return (note, *reasons)
