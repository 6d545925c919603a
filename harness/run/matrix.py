"""A test matrix: many runs (systems, bug switches, nemeses...), each with what it should find.

``fencecheck run-all`` carries out a matrix and fails only on what was *unexpected*: a planted bug
is supposed to make its run invalid, so that run passes when it is invalid with the anomaly the
switch plants, and fails when it comes out valid. A matrix file is JSON or TOML::

    {
      "defaults": {"time_limit": 30, "ttl": 1.0},
      "runs": [
        {"system": "reference", "nemeses": ["pause"], "expect": "valid"},
        {"system": "reference", "bugs": ["no-store-check"], "nemeses": ["pause"],
         "expect": "invalid", "expect_anomalies": ["stale-write"]}
      ],
      "cross": {"system": ["reference"], "nemeses": [["pause"], ["kill"]], "expect": "valid"}
    }

Every key of a run other than ``expect``/``expect_anomalies``/``min_coverage``/``strict`` is a
field of
:class:`~harness.record.spec.TestSpec` (``bugs``, ``nemeses`` and ``targets`` take a list or a
comma-separated string). A run that plants bugs gets every field of their exposure it does not
set itself (the faults that expose them, their lengths, keys...), as ``fencecheck run`` does.
``"min_coverage": {"stale_attempts": 1}`` makes a run
that exercised less than that (see :data:`COVERAGE_METRICS`) a surprise whatever its verdict:
a valid run that attempted no stale write proves nothing. ``"strict": true`` (or ``run-all
--strict``) makes a valid run whose coverage names any gap ("VALID, but weak") a surprise with
exit code 2. ``defaults`` apply to every run.
``cross`` adds one run per combination of its list-valued keys. A run with no ``expect`` is
expected to be valid, as in Jepsen's ``test-all``; ``"any"`` accepts every verdict (only a crash
fails it).

A run may carry its exact fault schedule: ``"windows"`` is a list of windows as a run's
``test.json`` records them (``schedule.windows``, and ``fencecheck shrink`` prints them in its
matrix row), each ``{"index", "start_ns", "duration_ns", "kind", "targets", "ttl_multiple",
"fallback", "params"}``. Such a run plays those windows, as ``replay`` does, instead of drawing
a schedule from its seed; its ``nemeses`` default to the windows' kinds. Each window must be of a
kind the run's nemeses include, aim at ``holder``, ``lock-leader`` or a node of the run's cluster,
and end within its ``time_limit``; ``cross`` keeps ``windows`` whole (it is no axis).
"""

from __future__ import annotations

import itertools
import json
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal, cast

from checkers import ANOMALY_NAMES
from checkers.exit_codes import EXIT_ERROR, EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID
from harness.record.results import StoredCoverage
from harness.record.schedule import HOLDER, LOCK_LEADER, Schedule, ScheduleError, Window
from harness.record.spec import (
    SPEC_FIELDS,
    SpecError,
    TestSpec,
    spec_from_dict,
    split_names,
    store_path,
)
from harness.run.exposure import planted_fields
from harness.run.summary import RunSummary
from nemeses import NemesisError, fault_kind
from systems import AdapterError, load_system, topology

__all__ = [
    "COVERAGE_METRICS",
    "EXPECTABLE",
    "Expectation",
    "MatrixEntry",
    "MatrixError",
    "MatrixResult",
    "entries_from",
    "load_matrix",
    "parse_shard",
    "shard",
    "tally",
]

Expected = Literal["valid", "invalid", "unknown", "any"]
EXPECTABLE: Final[tuple[Expected, ...]] = ("valid", "invalid", "unknown", "any")
_EXPECT_KEYS: Final = frozenset(("expect", "expect_anomalies", "min_coverage", "strict"))
_WINDOWS: Final = "windows"
_ROW_KEYS: Final = _EXPECT_KEYS | {_WINDOWS}
"""A row's keys that are not spec fields."""
COVERAGE_METRICS: Final = (
    "stale_attempts",
    "stops_past_lease",
    "restarts",
    "epochs_granted",
    "keys_written",
)
"""Headline numbers of ``results.json``'s ``coverage`` that ``min_coverage`` may require
(a per-kind or per-role count is summed)."""


class MatrixError(ValueError):
    """A matrix that cannot be run; the message names the entry, the problem and the fix."""


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a run should come out as: a verdict, and anomalies it must report (if any)."""

    verdict: Expected = "valid"
    anomalies: tuple[str, ...] = ()
    min_coverage: tuple[tuple[str, int], ...] = ()
    strict: bool = False
    """A valid run whose coverage names gaps (it tested less than it claims) is a surprise."""

    def __str__(self) -> str:
        if self.anomalies:
            return f"{self.verdict} ({', '.join(self.anomalies)})"
        return self.verdict

    def mismatch(self, summary: RunSummary) -> str | None:
        """What about ``summary`` is not as expected, or ``None`` when it is."""
        got = summary.verdict
        if self.verdict != "any" and got != self.verdict:
            found = f" ({', '.join(summary.anomaly_types)})" if summary.anomaly_types else ""
            return f"expected {self}, got {got}{found}"
        missing = [name for name in self.anomalies if name not in summary.anomaly_types]
        if missing:
            return f"expected {', '.join(missing)} among the anomalies, got " + (
                ", ".join(summary.anomaly_types) or "none"
            )
        weak = self.weakness(summary)
        if weak is not None:
            return weak
        return self._short_coverage(summary) if self.min_coverage else None

    def weakness(self, summary: RunSummary) -> str | None:
        """Why a strict expectation refuses a valid run as weak (``None``: not strict, not
        valid, or nothing weakens it)."""
        if not self.strict or summary.verdict != "valid":
            return None
        coverage = _coverage(summary)
        if coverage is None:
            return "weak (strict): results.json has no coverage section"
        if coverage.gaps:
            return "weak (strict): " + "; ".join(coverage.gaps)
        return None

    def _short_coverage(self, summary: RunSummary) -> str | None:
        coverage = _coverage(summary)
        if coverage is None:
            return "min_coverage asked for, but results.json has no coverage section"
        short = []
        for name, minimum in self.min_coverage:
            got = coverage.count(name) or 0
            if got < minimum:
                short.append(f"{name} {got} < {minimum}")
        return "too little coverage: " + ", ".join(short) if short else None


def _coverage(summary: RunSummary) -> StoredCoverage | None:
    """The ``coverage`` section of the run's ``results.json``, or ``None`` when it has none."""
    return summary.results.coverage if summary.results is not None else None


@dataclass(frozen=True, slots=True)
class MatrixEntry:
    """One run of a matrix: its spec, what it should find, its row number in the matrix
    (1-based, in the order runs then cross; a shard keeps the numbers of the whole matrix) and,
    for a row with ``windows``, the exact schedule to play (``None``: drawn from the seed)."""

    spec: TestSpec
    expect: Expectation
    number: int = 0
    schedule: Schedule | None = None

    @property
    def label(self) -> str:
        """``system [bugs] nemeses`` and the workload options that differ from the defaults
        (``(1000 keys, 4 locks)``), for tables and test names."""
        bugs = "+".join(self.spec.bugs) or "no bugs"
        faults = "+".join(self.spec.nemeses) or "no faults"
        if self.schedule is not None:
            count = len(self.schedule.windows)
            faults += f" ({count} fixed window{'' if count == 1 else 's'})"
        label = f"{self.spec.system} [{bugs}] {faults}"
        shape = self.spec.workload_shape
        return f"{label} ({shape})" if shape else label

    @property
    def case_name(self) -> str:
        """The row's name in test reports: its number and label, the same from night to night
        (no seed, no time), so CI can follow one row across runs."""
        return f"row {self.number:02d}: {self.label}"


@dataclass(frozen=True, slots=True)
class MatrixResult:
    """How one entry went: its summary, or the error that stopped it before a verdict."""

    entry: MatrixEntry
    summary: RunSummary | None
    error: str | None = None

    @property
    def verdict(self) -> str:
        """``valid``, ``invalid``, ``unknown``, ``unchecked``, or ``error`` (it crashed)."""
        return self.summary.verdict if self.summary is not None else "error"

    @property
    def mismatch(self) -> str | None:
        """Why the result is unexpected, or ``None`` when it is as expected."""
        if self.summary is None:
            return f"crashed: {self.error or 'no run directory'}"
        if self.summary.verdict == "unchecked":
            return f"never checked: {self.summary.problem or 'no results.json'}"
        return self.entry.expect.mismatch(self.summary)

    @property
    def exit_code(self) -> int:
        """0 when as expected; else 3 crashed, 2 unknown, 1 any other surprise."""
        if self.mismatch is None:
            return EXIT_VALID
        if self.summary is None or self.summary.verdict == "unchecked":
            return EXIT_ERROR
        if self.summary.verdict == "unknown" or self.entry.expect.weakness(self.summary):
            return EXIT_UNKNOWN  # a weak run under --strict is as undecided as an unknown one
        return EXIT_INVALID


def _names(raw: Any, where: str, key: str) -> tuple[str, ...]:
    if isinstance(raw, str):
        return split_names(raw)
    if isinstance(raw, list) and all(isinstance(p, str) for p in raw):
        return tuple(raw)
    raise MatrixError(f"{where}: {key} must be a list of names or a comma-separated string")


def _check_value(key: str, value: Any, where: str) -> Any:
    """A row's ``value`` of spec field ``key``, as its kind in the spec-field table reads it."""
    kind = SPEC_FIELDS[key].kind
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if kind in ("names", "bugs"):
        return list(_names(value, where, key))
    if kind in ("float", "duration") and number:
        return float(value)
    if kind == "lengths" and isinstance(value, list):
        return [_check_value_float(key, item, where) for item in value]
    if kind == "int" and number and isinstance(value, int):
        return value
    if kind == "path" and isinstance(value, str):
        try:
            return str(store_path(value))
        except SpecError as problem:
            raise MatrixError(f"{where}: {key}: {problem}") from None
    if kind in ("text", "choice") and isinstance(value, str):
        return value
    if kind == "flag" and isinstance(value, bool):
        return value
    raise MatrixError(f"{where}: {key} must be {_KIND_WORDS[kind]}, not {value!r}")


_KIND_WORDS: Final = {
    "text": "a string",
    "choice": "a string",
    "names": "a list of names or a comma-separated string",
    "bugs": "a list of names or a comma-separated string",
    "lengths": "a list of numbers",
    "int": "a whole number",
    "float": "a float (a number)",
    "duration": "a float (seconds)",
    "path": "a folder name",
    "flag": "true or false",
}
"""How a matrix error names what each kind of field takes."""


def _check_value_float(key: str, value: Any, where: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise MatrixError(f"{where}: {key} must be a list of numbers, not {value!r}")


def _expectation(raw: Mapping[str, Any], where: str) -> Expectation:
    verdict = raw.get("expect", "valid")
    if verdict is True or verdict is False:
        verdict = "valid" if verdict else "invalid"
    if verdict not in EXPECTABLE:
        raise MatrixError(
            f"{where}: expect must be one of {', '.join(EXPECTABLE)}, not {verdict!r}"
        )
    anomalies = _names(raw.get("expect_anomalies", []), where, "expect_anomalies")
    unknown = [name for name in anomalies if name not in ANOMALY_NAMES]
    if unknown:
        raise MatrixError(
            f"{where}: unknown anomaly {', '.join(unknown)}; known: {', '.join(ANOMALY_NAMES)}"
        )
    if anomalies and verdict == "valid":
        raise MatrixError(f"{where}: a valid run reports no anomalies; expect invalid or any")
    strict = raw.get("strict", False)
    if not isinstance(strict, bool):
        raise MatrixError(f"{where}: strict must be true or false, not {strict!r}")
    return Expectation(cast(Expected, verdict), anomalies, _min_coverage(raw, where), strict)


def _min_coverage(raw: Mapping[str, Any], where: str) -> tuple[tuple[str, int], ...]:
    wanted = raw.get("min_coverage", {})
    if not isinstance(wanted, Mapping):
        raise MatrixError(
            f'{where}: min_coverage must be an object such as {{"stale_attempts": 1}}'
        )
    pairs = []
    for name, minimum in wanted.items():
        if name not in COVERAGE_METRICS:
            raise MatrixError(
                f"{where}: unknown coverage metric {name!r} in min_coverage; "
                f"known: {', '.join(COVERAGE_METRICS)}"
            )
        if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum < 0:
            raise MatrixError(f"{where}: min_coverage {name} must be a whole number >= 0")
        pairs.append((str(name), minimum))
    return tuple(pairs)


def _entry(
    raw: Mapping[str, Any], defaults: Mapping[str, Any], overrides: Mapping[str, Any], where: str
) -> MatrixEntry:
    if not isinstance(raw, Mapping):
        raise MatrixError(f"{where}: each run must be an object of spec fields")
    merged = {**defaults, **raw, **overrides}
    unknown = sorted(set(merged) - set(SPEC_FIELDS) - _ROW_KEYS)
    if unknown:
        raise MatrixError(
            f"{where}: unknown key(s) {', '.join(unknown)}; use spec fields "
            f"({', '.join(SPEC_FIELDS)}) and expect, expect_anomalies, min_coverage, windows"
        )
    values = {k: _check_value(k, v, where) for k, v in merged.items() if k not in _ROW_KEYS}
    windows = _windows(merged[_WINDOWS], where) if _WINDOWS in merged else None
    if windows is not None and "nemeses" not in values:
        values["nemeses"] = list(dict.fromkeys(w.kind for w in windows))
    exposed = _exposed(values)
    if "bugs" in exposed:
        values["bugs"] = exposed.pop("bugs")
    spec = spec_from_dict({**exposed, **values})
    try:
        spec.check()
    except SpecError as problem:
        raise MatrixError(f"{where}: {problem}") from None
    schedule = _schedule(spec, windows, where) if windows is not None else None
    return MatrixEntry(spec, _expectation(merged, where), schedule=schedule)


def _windows(raw: Any, where: str) -> tuple[Window, ...]:
    """A row's ``windows``, decoded and ordered by start (see the module docstring)."""
    if not isinstance(raw, list) or not raw or not all(isinstance(w, Mapping) for w in raw):
        raise MatrixError(
            f"{where}: windows must be a non-empty list of window objects, as a run's "
            "test.json records them under schedule.windows"
        )
    windows = []
    for number, item in enumerate(raw, 1):
        try:
            window = Window.from_json(item)
            fault_kind(window.kind)
        except (ScheduleError, NemesisError) as problem:
            raise MatrixError(f"{where}: window {number}: {problem}") from None
        if window.start_ns < 0 or window.duration_ns <= 0 or not window.targets:
            raise MatrixError(
                f"{where}: window {number}: give start_ns >= 0, duration_ns > 0 and at least "
                "one target"
            )
        windows.append(window)
    indexes = [w.index for w in windows]
    if len(set(indexes)) != len(indexes):
        raise MatrixError(f"{where}: windows repeat an index ({indexes}); give each its own")
    return tuple(sorted(windows, key=lambda w: (w.start_ns, w.index)))


def _schedule(spec: TestSpec, windows: tuple[Window, ...], where: str) -> Schedule:
    """The schedule a row's windows make over its spec; a window the run cannot play is an
    error naming it."""
    limit_ns = round(spec.time_limit * 1e9)
    nodes = _node_names(spec)
    for window in windows:
        label = f"{where}: window {window.index}"
        if window.kind not in spec.nemeses:
            raise MatrixError(
                f"{label} is a {window.kind} fault but the row's nemeses are "
                f"{', '.join(spec.nemeses) or 'none'}; add {window.kind} to nemeses"
            )
        if window.end_ns > limit_ns:
            raise MatrixError(
                f"{label} ends at {window.end_ns / 1e9:g} s, after the time_limit of "
                f"{spec.time_limit:g} s; raise time_limit or move the window"
            )
        strangers = [t for t in window.targets if nodes and t not in nodes]
        if strangers:
            raise MatrixError(
                f"{label} aims at {', '.join(strangers)}, not a node of this run "
                f"({', '.join(sorted(nodes - {HOLDER, LOCK_LEADER}))}) nor holder or lock-leader"
            )
    return Schedule(spec.seed, round(spec.ttl * 1e9), limit_ns, windows)


def _node_names(spec: TestSpec) -> set[str]:
    """The targets a window of ``spec`` may name (empty: unknown system, the runner says so)."""
    try:
        roles = load_system(spec.system).roles()
        names = {name for name, _ in topology(roles, spec.workers)}
    except (LookupError, ValueError, AdapterError):
        return set()
    return names | {HOLDER, LOCK_LEADER}


def _exposed(values: Mapping[str, Any]) -> dict[str, Any]:
    """What a row's planted switches set (:func:`planted_fields`; the row's own fields win,
    but its ``bugs`` gain the switches they need beside them)."""
    exposed = planted_fields(str(values.get("system", "reference")), values.get("bugs", ()))
    return {k: list(v) if isinstance(v, tuple) else v for k, v in exposed.items()}


def entries_from(
    data: Any, source: str = "matrix", overrides: Mapping[str, Any] | None = None
) -> list[MatrixEntry]:
    """The runs of a decoded matrix (see the module docstring).

    ``overrides`` (spec fields, e.g. from command-line flags) win over every run's own values.
    """
    if not isinstance(data, Mapping):
        raise MatrixError(f"{source}: expected an object with 'runs' and/or 'cross'")
    unknown = sorted(set(data) - {"defaults", "runs", "cross", "description"})
    if unknown:
        raise MatrixError(
            f"{source}: unknown key(s) {', '.join(unknown)}; use defaults, runs, cross"
        )
    defaults = data.get("defaults", {})
    if not isinstance(defaults, Mapping):
        raise MatrixError(f"{source}: 'defaults' must be an object of spec fields")
    overrides = overrides or {}
    runs = data.get("runs") or []
    if not isinstance(runs, list):
        raise MatrixError(f"{source}: 'runs' must be a list of objects")
    entries = [
        _entry(raw, defaults, overrides, f"{source} run {n + 1}") for n, raw in enumerate(runs)
    ]
    cross = data.get("cross")
    if cross is not None:
        entries.extend(_crossed(cross, defaults, overrides, f"{source} cross"))
    if not entries:
        raise MatrixError(f"{source}: no runs; add a 'runs' list or a 'cross' object")
    return [replace(entry, number=n) for n, entry in enumerate(entries, 1)]


def _crossed(
    cross: Any, defaults: Mapping[str, Any], overrides: Mapping[str, Any], where: str
) -> Iterable[MatrixEntry]:
    if not isinstance(cross, Mapping):
        raise MatrixError(f"{where}: 'cross' must be an object of lists")
    axes = {k: v for k, v in cross.items() if isinstance(v, list) and k not in _ROW_KEYS}
    fixed = {k: v for k, v in cross.items() if k not in axes}
    keys = list(axes)
    for n, combination in enumerate(itertools.product(*(axes[k] for k in keys))):
        raw = {**fixed, **dict(zip(keys, combination, strict=True))}
        yield _entry(raw, defaults, overrides, f"{where} #{n + 1}")


def load_matrix(
    path: str | os.PathLike[str], overrides: Mapping[str, Any] | None = None
) -> list[MatrixEntry]:
    """Read a matrix file (``.toml``, else JSON) into its runs (see :func:`entries_from`)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as problem:
        raise MatrixError(f"cannot read matrix {file}: {problem.strerror}") from None
    except UnicodeDecodeError as problem:
        raise MatrixError(
            f"matrix {file} is not UTF-8 text ({problem.reason} at byte {problem.start}); "
            "save it as UTF-8"
        ) from None
    try:
        data = tomllib.loads(text) if file.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as problem:
        kind = "TOML" if file.suffix == ".toml" else "JSON"
        raise MatrixError(f"matrix {file} is not valid {kind}: {problem}") from None
    except RecursionError:
        # The parsers recurse per nesting level: a matrix nested thousands deep is no matrix.
        raise MatrixError(
            f"matrix {file} nests too deep to read; a matrix is an object of runs, a few levels "
            "deep (see matrices/etcd.json)"
        ) from None
    return entries_from(data, str(file), overrides)


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``: the second of four shards; raises :class:`MatrixError` otherwise."""
    index, slash, count = text.partition("/")
    try:
        shard_index, shard_count = int(index), int(count)
    except ValueError:
        shard_index = shard_count = 0
    if not slash or not 1 <= shard_index <= shard_count:
        raise MatrixError(
            f"--shard {text!r}: give I/N with 1 <= I <= N, e.g. --shard 2/4 (the second of four)"
        )
    return shard_index, shard_count


def shard(entries: Sequence[MatrixEntry], index: int, count: int) -> list[MatrixEntry]:
    """Shard ``index`` of ``count`` (1-based): the rows whose number, less one, is ``index - 1``
    modulo ``count``. Dealt round-robin by row number, so the split depends only on the matrix,
    the shards together hold every row exactly once, and neighbouring rows (often one system's
    slow runs) land on different machines."""
    return [entry for entry in entries if (entry.number - 1) % count == index - 1]


def tally(results: Sequence[MatrixResult]) -> tuple[int, int, int]:
    """(runs, as expected, exit code): the exit code is the worst among the surprises."""
    surprises = [r.exit_code for r in results if r.mismatch is not None]
    return len(results), len(results) - len(surprises), max(surprises, default=EXIT_VALID)
