"""The test spec: everything that defines a run, so that the same spec and seed replay it."""

from __future__ import annotations

import math
import os
import secrets
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from nemeses import DEFAULT_NEMESES

__all__ = [
    "LIMITS",
    "MAX_FINAL_READS",
    "SPANNING_WORKLOADS",
    "Limit",
    "SpecError",
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

    option: str
    low: float
    high: float
    example: str
    low_open: bool = False
    """True when ``low`` itself is refused (a TTL of 0 means nothing)."""

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


LIMITS: Final[dict[str, Limit]] = {
    "ttl": Limit("--ttl", 0.05, 3600.0, "1"),
    "lock_delay": Limit("--lock-delay", 0.0, 3600.0, "0.5"),
    "time_limit": Limit("--time-limit", 0.0, 86400.0, "30", low_open=True),
    "fault_lengths": Limit("--fault-lengths", 0.0, 1000.0, "0.8,1.1,3,8", low_open=True),
    "workers": Limit("--workers", 1, 16, "3"),
    "keys": Limit("--keys", 1, 100_000, "3"),
    "locks": Limit("--locks", 1, 1000, "1"),
    "rate": Limit("--rate", 0.0, 100_000.0, "50"),
    "work_ms": Limit("--work-ms", 0, 60_000, "50"),
    "read_ratio": Limit("read_ratio", 0.0, 1.0, "0.1"),
    "writes_per_lease": Limit("--writes-per-lease", 1, 1_000_000, "2"),
    "keys_per_write": Limit("--keys-per-write", 1, 64, "4"),
    "op_timeout": Limit("op_timeout", 0.0, 3600.0, "10"),
}
"""Bounds of the numeric spec fields (README "Limits"): beyond them a run hangs, exhausts memory
or cannot mean anything (a lease longer than the run never lapses)."""

MAX_FINAL_READS: Final = 300_000
"""At most this many final reads (keys x locks x sinks read) in one run: every key of every
lock of every sink read after healing. The checker keeps about 1.6 KB per key it saw read
(bench/work_bound.py: 1,000,000 final reads peaked at 1.6 GB), and each read is one request
(about 3,000 a second), so this keeps a run's last phases within a few hundred MB and a few
minutes; within the per-option limits the product alone could reach 300 million. It admits every
key count with one lock on a system of up to three sinks."""

SPANNING_WORKLOADS: Final = ("append",)
"""The workloads that send writes spanning several keys (``--keys-per-write`` above 1)."""

_DEFAULT_KEYS: Final = 3
_DEFAULT_WRITES_PER_LEASE: Final = 20
_MAX_TTLS_PER_RUN: Final = 100_000
"""At most this many TTLs in one run: it bounds the fault schedule (a window per ~4 TTLs)."""


@dataclass(frozen=True)
class TestSpec:
    """One fencing test. Times are in seconds; ``seed`` fixes the fault schedule and op choices."""

    __test__ = False  # a spec, not a pytest test class, despite the name

    system: str = "reference"
    bugs: tuple[str, ...] = ()
    workload: str = "append"
    nemeses: tuple[str, ...] = DEFAULT_NEMESES
    targets: tuple[str, ...] = ("holder",)
    fault_lengths: tuple[
        float, ...
    ] = ()  # fault durations as TTL multiples; () = the default table
    ttl: float = 1.0
    lock_delay: float = 0.0
    time_limit: float = 30.0
    workers: int = 3
    keys: int = _DEFAULT_KEYS
    locks: int = 1
    rate: float = 0.0
    work_ms: int = 50
    read_ratio: float = 0.1
    writes_per_lease: int = _DEFAULT_WRITES_PER_LEASE
    keys_per_write: int = 1
    op_timeout: float = 0.0  # 0 means: long enough to outlast every scheduled fault
    proxy: bool = False  # the write-path proxy even without a proxy fault (to measure its cost)
    seed: int = field(default_factory=lambda: secrets.randbelow(2**31))
    name: str = ""
    store: Path = Path("store")

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
        data = asdict(self)
        data["store"] = str(self.store)
        data["test_name"] = self.test_name
        return data


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
        if name in ("bugs", "nemeses", "targets", "fault_lengths"):
            value = tuple(value)
        elif name == "store":
            value = Path(value)
        values[name] = value
    return TestSpec(**values)
