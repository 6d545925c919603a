"""The test spec: everything that defines a run, so that the same spec and seed replay it."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["TestSpec", "spec_from_dict", "split_names"]


@dataclass(frozen=True)
class TestSpec:
    """One fencing test. Times are in seconds; ``seed`` fixes the fault schedule and op choices."""

    __test__ = False  # a spec, not a pytest test class, despite the name

    system: str = "reference"
    bugs: tuple[str, ...] = ()
    workload: str = "append"
    nemeses: tuple[str, ...] = ("pause",)
    targets: tuple[str, ...] = ("holder",)
    fault_lengths: tuple[
        float, ...
    ] = ()  # fault durations as TTL multiples; () = the default table
    ttl: float = 1.0
    lock_delay: float = 0.0
    time_limit: float = 30.0
    workers: int = 3
    keys: int = 3
    locks: int = 1
    rate: float = 0.0
    work_ms: int = 50
    read_ratio: float = 0.1
    writes_per_lease: int = 20
    op_timeout: float = 0.0  # 0 means: long enough to outlast every scheduled fault
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

    def to_json(self) -> dict[str, Any]:
        """The spec as plain JSON data (tuples become lists, paths strings)."""
        data = asdict(self)
        data["store"] = str(self.store)
        data["test_name"] = self.test_name
        return data


def split_names(text: str) -> tuple[str, ...]:
    """``"pause, kill"`` -> ``("pause", "kill")``; blanks and ``none`` (no faults) drop out."""
    parts = (part.strip() for part in text.split(","))
    return tuple(part for part in parts if part and part != "none")


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
