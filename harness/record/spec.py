"""The test spec: everything that defines a run, so that the same spec and seed replay it.

:class:`TestSpec` and its one table of fields (:data:`SPEC_FIELDS`, each a :class:`SpecField`
with its :class:`Limit`) are the schema of ``test.json``'s ``spec``: this module writes it
(:meth:`TestSpec.to_json`) and reads it back (:func:`spec_from_dict`). It knows no fault kind:
what needs the registry (the kinds' summaries in ``--nemesis``'s help, a kind's name checked)
lives above, in :mod:`harness.record.spec` and :mod:`harness.run.plan`.
"""

from __future__ import annotations

import math
import os
import secrets
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, cast

from harness.record.schedule import DEFAULT_OVERLAP, DEFAULT_TTL_MULTIPLES, TOPOLOGIES

__all__ = [
    "ACQUIRE_MODES",
    "DEFAULT_NEMESES",
    "LIMITS",
    "MAX_FINAL_READS",
    "SPANNING_WORKLOADS",
    "SPEC_FIELDS",
    "Limit",
    "SpecError",
    "SpecField",
    "SpecKind",
    "TestSpec",
    "folder_name_problem",
    "spec_from_dict",
    "split_names",
    "store_path",
]


class SpecError(ValueError):
    """A spec value out of bounds; the message names the option, the limit and an example."""


@dataclass(frozen=True, slots=True)
class Limit:
    """The accepted range of one numeric spec field, and the command-line option that sets it."""

    low: float
    high: float
    example: str
    low_open: bool = False
    """True when ``low`` itself is refused (a TTL of 0 means nothing)."""
    option: str = ""
    """The option named in the message (filled in from the field's :class:`SpecField`)."""

    def problem(self, value: float) -> str | None:
        """Why ``value`` is refused, or ``None`` when it is within the limit."""
        too_low = value <= self.low if self.low_open else value < self.low
        if math.isfinite(value) and not too_low and value <= self.high:
            return None
        low = f"above {self.low:g}" if self.low_open else f"at least {self.low:g}"
        return (
            f"{self.option} must be a finite number {low} and at most {self.high:g}, "
            f"not {value:g}; e.g. {self.option} {self.example}"
        )


DEFAULT_NEMESES: Final[tuple[str, ...]] = ("pause", "restart-while-paused")
"""The fault kinds of a run that names none: holder pauses, and pauses overlapped by a store or
lock-service restart (inside the pause, right after the takeover, or as the holder resumes).
:mod:`nemeses.registry` re-exports it; a test checks each is a registered kind."""

MAX_FINAL_READS: Final = 300_000
"""At most this many final reads (keys x locks x sinks read) in one run: every key of every
lock of every sink read after healing. The checker keeps about 1.6 KB per key it saw read
(bench/work_bound.py: 1,000,000 final reads peaked at 1.6 GB), and each read is one request
(about 3,000 a second), so this keeps a run's last phases within a few hundred MB and a few
minutes; within the per-option limits the product alone could reach 300 million. It admits every
key count with one lock on a system of up to three sinks."""

SPANNING_WORKLOADS: Final = ("append",)
"""The workloads that send writes spanning several keys (``--keys-per-write`` above 1)."""

ACQUIRE_MODES: Final = ("wait", "try")
"""How a holder asks for a lease (``--acquire``): ``wait``, one acquire that waits for the lock
(the service's waiting path is exercised; grants are ordered by ``grant_seq`` or ``waited``), or
``try``, an acquire per attempt that does not wait, repeated until one is granted (each grant is
short in real time, so real-time order judges grants even without ``grant_seq``; nobody waits, so
a service's mistakes with its waiters cannot show). docs/design.md §4 weighs the two."""

SpecKind = Literal[
    "text", "choice", "names", "bugs", "lengths", "int", "float", "duration", "path", "flag"
]
"""How a spec field is written on the command line and in a matrix row: ``text`` and ``choice``
a string (``choice`` one of :attr:`SpecField.choices`), ``names`` a comma-separated list
(``none`` for none; a list in a matrix row), ``bugs`` a repeated option, ``lengths`` numbers
separated by commas, ``int``/``float`` a number, ``duration`` seconds (``500ms``, ``2m``),
``path`` a folder, ``flag`` an option without a value (true when given)."""


@dataclass(frozen=True, slots=True)
class SpecField:
    """One field of :class:`TestSpec`, declared once (in the dataclass, through :func:`_field`):
    how it is written, its default, its limit, its command-line option and help, and how the
    report shows it. The ``run`` options, the matrix parser, the rerun command and the report's
    spec table all derive from :data:`SPEC_FIELDS`."""

    kind: SpecKind
    option: str
    """The ``fencecheck run`` option that sets it, e.g. ``--keys``."""
    help: str = ""
    limit: Limit | None = None
    choices: tuple[str, ...] = ()
    label: str = ""
    """Its name in the report's spec table (default: the field name in words)."""
    unit: str = ""
    zero: str = ""
    """What a value of 0 means, shown instead of it (``unthrottled``)."""
    empty: str = ""
    """What an empty list means, where it means "the defaults" rather than "none"."""
    exposable: bool = False
    """A bug switch's :class:`systems.Exposure` may set it (``run --bug`` applies it)."""
    pinned: bool = False
    """The rerun command names it even at its default (the fields that say what a run is)."""
    name: str = ""
    """The field's name in :class:`TestSpec` (filled in from the dataclass)."""
    default: Any = None
    """Its default (filled in from the dataclass; ``None`` for the seed, drawn per run)."""

    def argv(self, value: Any) -> list[str]:
        """The command-line words that set ``value`` (the inverse of the ``run`` option)."""
        if self.kind == "bugs":
            return [word for bug in value for word in (self.option, bug)]
        if self.kind == "flag":
            return [self.option] if value else []
        if self.kind == "names":
            return [self.option, ",".join(value) or "none"]
        if self.kind == "lengths":
            return [self.option, ",".join(f"{number:g}" for number in value)]
        if isinstance(value, float):
            return [self.option, f"{value:g}"]
        return [self.option, str(value)]


def _field(default: _T, meta: SpecField) -> _T:
    """A :class:`TestSpec` field: its default and its :class:`SpecField` (typed as the default
    for the dataclass, a :func:`dataclasses.field` at run time)."""
    made: Any = field(default=default, metadata={_META: meta})
    return cast(_T, made)


_META: Final = "spec"
_T = TypeVar("_T")
_DEFAULT_KEYS: Final = 100
"""More keys than one lease writes (20): the next holder leaves most keys unwritten, so a store
whose mark is kept per key instead of per lock accepts a stale write there (reference switch
``mark-per-key``; bench/per_key_mark.py measures it). With 3 (the default before) every holder
wrote every key before a stale write arrived, and such a store never misbehaved."""
_STORE: Final = Path("store")
_DEFAULT_WRITES_PER_LEASE: Final = 20
_MAX_TTLS_PER_RUN: Final = 100_000
"""At most this many TTLs in one run: it bounds the fault schedule (a window per ~4 TTLs)."""
_KEYS_HELP: Final = (
    "Keys per lock, 1 to 100,000; each holder deals them from a shuffled deck, so with "
    "more than a lease writes (the default) a stale write usually lands on a key the new "
    "holder has not touched: only a store whose mark covers every key of the lock refuses it."
)


@dataclass(frozen=True)
class TestSpec:
    """One fencing test. Times are in seconds; ``seed`` fixes the fault schedule and op choices.

    Each field is declared once, with its :class:`SpecField` (see :data:`SPEC_FIELDS`).
    """

    __test__ = False  # a spec, not a pytest test class, despite the name

    system: str = _field(
        "reference", SpecField("text", "--system", "System under test.", pinned=True)
    )
    bugs: tuple[str, ...] = _field(
        (), SpecField("bugs", "--bug", "Plant a bug switch (repeatable).", label="bug switches")
    )
    workload: str = _field(
        "append",
        SpecField(
            "choice",
            "--workload",
            "What holders do: append, rmw (read-modify-write) or sinks (every sink).",
            choices=("append", "rmw", "sinks"),
            exposable=True,
            pinned=True,
        ),
    )
    nemeses: tuple[str, ...] = _field(
        DEFAULT_NEMESES,
        SpecField(
            "names",
            "--nemesis",
            "Fault kinds, comma-separated ('none' for none); default: "
            + ",".join(DEFAULT_NEMESES)
            + ", or the faults that expose the planted --bug.",
            exposable=True,
            pinned=True,
        ),
    )
    targets: tuple[str, ...] = _field(
        ("holder",),
        SpecField(
            "names",
            "--target",
            "Fault targets, comma-separated: holder, waiter, lock-leader, lock-follower, "
            "holder-member, a role (lock, store, worker), a group of a role's nodes at once "
            "(lock-majority, lock-all; power-loss only) or a node name. Default: holder, or "
            "what the planted --bug needs.",
            exposable=True,
            pinned=True,
        ),
    )
    fault_lengths: tuple[float, ...] = _field(
        (),
        SpecField(
            "lengths",
            "--fault-lengths",
            "Fault durations as multiples of the lease TTL, comma-separated (default: "
            + ",".join(f"{multiple:g}" for multiple in DEFAULT_TTL_MULTIPLES)
            + ", or the planted --bug's).",
            limit=Limit(0.0, 1000.0, "0.8,1.1,3,8", low_open=True),
            empty="the default table: "
            + ", ".join(f"{m:g}" for m in DEFAULT_TTL_MULTIPLES)
            + " TTLs",
            exposable=True,
        ),
    )
    """Fault durations as TTL multiples; () = the default table."""
    overlap: float = _field(
        DEFAULT_OVERLAP,
        SpecField(
            "float",
            "--overlap",
            "Share of fault windows that get an overlapping window of another of the --nemesis "
            "kinds, aimed inside it, at the takeover or grant, or at its restart (0: none).",
            Limit(0.0, 1.0, "0.3"),
            zero="none",
            exposable=True,
        ),
    )
    """The share of fault windows overlapped by a window of another kind."""
    partitions: tuple[str, ...] = _field(
        TOPOLOGIES,
        SpecField(
            "names",
            "--partitions",
            "Partition topologies a partition window is drawn among, comma-separated: "
            + ", ".join(TOPOLOGIES)
            + " (lock-cut: the holder cut from the lock service, not from its sinks). Default: "
            "every one the cluster and the target allow, or what the planted --bug needs.",
            label="partition topologies",
            exposable=True,
        ),
    )
    """The partition topologies drawn among (each where the cluster and the target allow it)."""
    ttl: float = _field(
        1.0,
        SpecField(
            "duration",
            "--ttl",
            "Lease TTL (1, 1s, 500ms).",
            Limit(0.05, 3600.0, "1"),
            label="lease TTL asked for",
            unit="s",
            pinned=True,
        ),
    )
    lock_delay: float = _field(
        0.0,
        SpecField(
            "duration",
            "--lock-delay",
            "How long the lock stays unavailable after a lease lapses (0: none).",
            Limit(0.0, 3600.0, "0.5"),
            label="lock-delay",
            unit="s",
            zero="none",
            exposable=True,
        ),
    )
    time_limit: float = _field(
        30.0,
        SpecField(
            "duration",
            "--time-limit",
            "Run length (30, 2m).",
            Limit(0.0, 86400.0, "30", low_open=True),
            unit="s",
            pinned=True,
        ),
    )
    workers: int = _field(
        3, SpecField("int", "--workers", "Lock holders, 1 to 16.", Limit(1, 16, "3"), pinned=True)
    )
    keys: int = _field(
        _DEFAULT_KEYS,
        SpecField("int", "--keys", _KEYS_HELP, Limit(1, 100_000, "3"), exposable=True, pinned=True),
    )
    locks: int = _field(
        1,
        SpecField(
            "int",
            "--locks",
            "Locks sharing each sink (each with its own keys); judged per sink and lock.",
            Limit(1, 1000, "1"),
            exposable=True,
            pinned=True,
        ),
    )
    rate: float = _field(
        0.0,
        SpecField(
            "float",
            "--rate",
            "Ops/s per holder; 0 = unthrottled.",
            Limit(0.0, 100_000.0, "50"),
            unit="ops/s per holder",
            zero="unthrottled",
        ),
    )
    work_ms: int = _field(
        50,
        SpecField(
            "int",
            "--work-ms",
            "Critical-section time between the lease check and the write.",
            Limit(0, 60_000, "50"),
            label="critical section",
            unit="ms",
            exposable=True,
            pinned=True,
        ),
    )
    read_ratio: float = _field(
        0.1,
        SpecField(
            "float",
            "--read-ratio",
            "Share of a holder's operations that are reads (0 to 1).",
            Limit(0.0, 1.0, "0.1"),
        ),
    )
    writes_per_lease: int = _field(
        _DEFAULT_WRITES_PER_LEASE,
        SpecField(
            "int",
            "--writes-per-lease",
            "Units of work per lease before the holder releases it: 1 or 2 give hundreds of "
            "grants (epochs) per run.",
            Limit(1, 1_000_000, "2"),
            exposable=True,
        ),
    )
    keys_per_write: int = _field(
        1,
        SpecField(
            "int",
            "--keys-per-write",
            "Keys one write spans, all accepted or none (append workload; the system must "
            "support it, e.g. the reference system).",
            Limit(1, 64, "4"),
        ),
    )
    acquire: str = _field(
        "wait",
        SpecField(
            "choice",
            "--acquire",
            "wait: one acquire waits for the lock; try: one acquire per attempt, none waiting, "
            "so a grant is short in real time even without the service's grant_seq.",
            choices=ACQUIRE_MODES,
        ),
    )
    op_timeout: float = _field(
        0.0,
        SpecField(
            "duration",
            "--op-timeout",
            "Seconds an operation may take before it is recorded as unknown; 0 = long enough "
            "to outlast every scheduled fault.",
            Limit(0.0, 3600.0, "10"),
            label="operation timeout",
            unit="s",
            zero="long enough to outlast every fault",
        ),
    )
    seed: int = field(
        default_factory=lambda: secrets.randbelow(2**31),
        metadata={
            _META: SpecField("int", "--seed", "Same seed, same faults and choices.", pinned=True)
        },
    )
    name: str = _field(
        "", SpecField("text", "--name", "The run's folder name in the store (default: derived).")
    )
    proxy: bool = _field(
        False,
        SpecField(
            "flag",
            "--proxy",
            "Put the write-path proxy between the holders and the system even without a proxy "
            "fault (hold, delay, loss, reset, replay insert it anyway): to measure what it costs.",
            label="write-path proxy",
        ),
    )
    control: bool = _field(
        False,
        SpecField(
            "flag",
            "--control",
            "A control run: go ahead although a planted --bug cannot show in it (the exposure "
            "check would refuse it: its fault is missing, say), to show the bug needs what the "
            "run lacks. Warns, and the verdict says the run could not have exposed the bug. "
            "Refused when the run could show every bug it plants.",
            label="control run",
        ),
    )
    store: Path = _field(  # noqa: RUF009 (_field makes a dataclasses.field, not a shared default)
        _STORE,
        SpecField(
            "path", "--store", "Folder of stored runs (checked writable before anything starts)."
        ),
    )

    @property
    def test_name(self) -> str:
        """The store folder name: given, or ``system-workload-nemeses[-bugs]``."""
        if self.name:
            return self.name
        parts = [self.system, self.workload, "+".join(self.nemeses) or "no-faults"]
        if self.bugs:
            parts.append("+".join(self.bugs))
        return "-".join(parts)

    @property
    def workload_shape(self) -> str:
        """The workload options that differ from the defaults, e.g. ``1000 keys, 4 locks``
        (empty for the defaults), to tell matrix rows apart."""
        shown = (
            (self.keys, _DEFAULT_KEYS, "keys"),
            (self.keys_per_write, 1, "keys/write"),
            (self.locks, 1, "locks"),
            (self.writes_per_lease, _DEFAULT_WRITES_PER_LEASE, "writes/lease"),
        )
        return ", ".join(f"{value} {unit}" for value, default, unit in shown if value != default)

    def check(self) -> None:
        """Raise :class:`SpecError` naming the first value out of :data:`LIMITS`.

        The command line and matrix files both pass through here, so a matrix row is held to the
        same bounds as ``fencecheck run``'s options.
        """
        folder_problem = folder_name_problem(self.test_name)
        if folder_problem is not None:
            given = f"name {self.name!r}" if self.name else f"the test name {self.test_name!r}"
            raise SpecError(
                f"{given} cannot be a folder of the store: {folder_problem}; use letters, "
                "digits, '-', '_' and '+' (e.g. --name etcd-pause)"
            )
        for name, limit in LIMITS.items():
            raw = getattr(self, name)
            for value in raw if isinstance(raw, tuple) else (raw,):
                problem = limit.problem(float(value))
                if problem is not None:
                    raise SpecError(problem)
        if self.ttl > self.time_limit:
            raise SpecError(
                f"--ttl {self.ttl:g} is longer than --time-limit {self.time_limit:g}: no lease "
                "could ever lapse; give a --time-limit of several TTLs (e.g. 30 with --ttl 1)"
            )
        if self.acquire not in ACQUIRE_MODES:
            raise SpecError(
                f"--acquire {self.acquire!r} is not a way to ask for a lease; use "
                f"{' or '.join(ACQUIRE_MODES)}"
            )
        if self.keys_per_write > 1:
            self._check_spanning()
        # One sink at least: the runner checks again with the workload's sinks once known.
        too_much = self.final_reads_problem(1)
        if too_much is not None:
            raise SpecError(too_much)
        if self.time_limit / self.ttl > _MAX_TTLS_PER_RUN:
            raise SpecError(
                f"--time-limit {self.time_limit:g} is more than {_MAX_TTLS_PER_RUN:,} TTLs of "
                f"{self.ttl:g} s; raise --ttl or lower --time-limit (or run several shorter runs)"
            )

    def final_reads_problem(self, sinks: int) -> str | None:
        """Why the final reads of this spec reading ``sinks`` sinks are too many (keys x locks x
        sinks above :data:`MAX_FINAL_READS`), naming the product and a fix; ``None`` if not."""
        total = self.keys * self.locks * sinks
        if total <= MAX_FINAL_READS:
            return None
        keys = max(1, MAX_FINAL_READS // (self.locks * sinks))
        fix = f"e.g. --keys {keys:,}"
        if self.keys * sinks <= MAX_FINAL_READS:
            fix += f" or --locks {MAX_FINAL_READS // (self.keys * sinks):,}"
        if sinks > 1:
            fix += ", or a workload that reads one sink (--workload append)"
        return (
            f"--keys {self.keys:,} x --locks {self.locks:,} x {sinks} sink(s) read = {total:,} "
            f"final reads, more than the {MAX_FINAL_READS:,} one run may make; lower --keys or "
            f"--locks ({fix})"
        )

    def _check_spanning(self) -> None:
        """A write spanning keys needs that many distinct keys, and a workload that sends it."""
        if self.keys_per_write > self.keys:
            raise SpecError(
                f"--keys-per-write {self.keys_per_write} is more than --keys {self.keys}: a "
                "write spans distinct keys of its lock; raise --keys (e.g. --keys 1000)"
            )
        if self.workload not in SPANNING_WORKLOADS:
            raise SpecError(
                f"--keys-per-write {self.keys_per_write} needs --workload "
                f"{' or '.join(SPANNING_WORKLOADS)}: the {self.workload} workload writes one key "
                "per operation"
            )

    def to_json(self) -> dict[str, Any]:
        """The spec as plain JSON data (tuples become lists, paths strings)."""
        # Lists, as test.json holds them once read back: the report compares a stored spec's
        # values with the defaults' JSON, and ("holder",) never equals ["holder"].
        data = {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in asdict(self).items()
        }
        data["store"] = str(self.store)
        data["test_name"] = self.test_name
        return data


def _declared() -> dict[str, SpecField]:
    """Each field's :class:`SpecField` with its name, default and limit's option filled in."""
    table: dict[str, SpecField] = {}
    for spec_field in fields(TestSpec):
        meta: SpecField = spec_field.metadata[_META]
        default = None if spec_field.name == "seed" else spec_field.default
        limit = meta.limit and replace(meta.limit, option=meta.option)
        table[spec_field.name] = replace(meta, name=spec_field.name, default=default, limit=limit)
    return table


SPEC_FIELDS: Final[dict[str, SpecField]] = _declared()
"""Every field of :class:`TestSpec` by name, in its order: the one table of spec fields."""

LIMITS: Final[dict[str, Limit]] = {
    name: spec_field.limit for name, spec_field in SPEC_FIELDS.items() if spec_field.limit
}
"""Bounds of the numeric spec fields (README "Limits"): beyond them a run hangs, exhausts memory
or cannot mean anything (a lease longer than the run never lapses)."""

_TUPLE_KINDS: Final = frozenset(("names", "bugs", "lengths"))


def folder_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one folder inside the store (``.``, ``..``, a leading dot, a
    separator or NUL would put a run elsewhere or hide it); ``None`` when it can."""
    if name in (".", ".."):
        return f"{name!r} names a folder that is already there (the store or its parent)"
    if name.startswith("."):
        return "it begins with a dot (a hidden folder, or a way out of the store)"
    separators = {"/", "\\", "\0", os.sep, *((os.altsep,) if os.altsep else ())}
    found = sorted(repr(c) for c in separators if c in name)
    if found:
        return f"it contains {', '.join(found)} (a path separator or NUL)"
    return None


def split_names(text: str) -> tuple[str, ...]:
    """``"pause, kill"`` -> ``("pause", "kill")``; blanks and ``none`` (no faults) drop out."""
    parts = (part.strip() for part in text.split(","))
    return tuple(part for part in parts if part and part != "none")


def store_path(text: str) -> Path:
    """The store folder named by ``text``; an empty name (which would mean the current
    directory) is refused."""
    if not text.strip():
        raise SpecError("--store must name a folder, not an empty string; e.g. --store store")
    return Path(text)


def spec_from_dict(data: dict[str, Any]) -> TestSpec:
    """Rebuild a spec from :meth:`TestSpec.to_json` output (unknown keys are an error)."""
    known = {f.name: f for f in fields(TestSpec)}
    extra = set(data) - set(known) - {"test_name"}
    if extra:
        raise ValueError(
            f"unknown spec field(s) {', '.join(sorted(extra))}; known: {', '.join(sorted(known))}"
        )
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name == "test_name":
            continue
        kind = SPEC_FIELDS[name].kind
        if kind in _TUPLE_KINDS:
            value = tuple(value)
        elif kind == "path":
            value = Path(value)
        values[name] = value
    return TestSpec(**values)
