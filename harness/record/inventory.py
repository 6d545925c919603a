"""The write-path inventory: which sinks are fenced, and what protects the others.

One :class:`Sink` type serves the adapters that declare sinks, the checkers that judge them and
the report that prints them.

A system declares each sink as fenced (it checks epochs) or unfenced with a mitigation
(docs/design.md §2). The checkers use it to tell a violation from a known weakness: a stale write
on an unfenced sink with no mitigation is *expected* (reported, not counted against the run), while
on a fenced sink, or one guarded by lock-delay or a checking proxy, it makes the run invalid.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Literal, cast, get_args

import orjson

__all__ = [
    "EXPECTED_WHEN_UNGUARDED",
    "MITIGATIONS",
    "Inventory",
    "InventoryError",
    "Mitigation",
    "Sink",
    "load_inventory",
    "normalize_inventory",
    "parse_inventory",
]

Mitigation = Literal["lock-delay", "idempotent", "proxy", "none"]
MITIGATIONS: Final[tuple[str, ...]] = get_args(Mitigation)

# What a stale holder does to a sink nothing guards: writes land in epoch disorder, and a
# read-modify-write based on an old read is accepted next to the newer one. Idempotence makes a
# repeated write harmless but does not order writes, so it guards against neither.
EXPECTED_WHEN_UNGUARDED: Final = frozenset(("stale-write", "lost-update"))
_UNGUARDED: Final = frozenset(("none", "idempotent"))


class InventoryError(ValueError):
    """An inventory that cannot be understood, with what to change."""


@dataclass(frozen=True, slots=True)
class Sink:
    """One write path of the inventory: whether it checks epochs, and if not, what protects it.

    ``seq`` says the sink reports its own acceptance order across all its keys (history format
    v1's optional ``seq`` on read entries and on a write's ``ok`` value): etcd's ``mod_revision``,
    ZooKeeper's ``mzxid``, a database sequence. Only then can a stale write to one key be told
    from a newer write to another key that it overlapped in time.
    """

    name: str
    fenced: bool
    mitigation: Mitigation = "none"
    description: str = ""
    seq: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        if self.mitigation not in MITIGATIONS:
            raise InventoryError(
                f"sink {self.name!r}: mitigation {self.mitigation!r} is not one of "
                + ", ".join(MITIGATIONS)
            )

    @property
    def unguarded(self) -> bool:
        """True if nothing keeps a stale holder's writes out: unfenced, and no mitigation that
        orders writes."""
        return not self.fenced and self.mitigation in _UNGUARDED

    def expects(self, anomaly: str) -> bool:
        """True if ``anomaly`` on this sink is a known weakness rather than a violation."""
        return self.unguarded and anomaly in EXPECTED_WHEN_UNGUARDED

    def describe(self) -> str:
        """``"fenced"`` or ``"unfenced (lock-delay)"``."""
        return "fenced" if self.fenced else f"unfenced ({self.mitigation})"


Inventory = Mapping[str, Sink | tuple[bool, str] | Mapping[str, object]]


def normalize_inventory(inventory: Inventory | None) -> dict[str, Sink]:
    """Sink name -> :class:`Sink`, accepting ``(fenced, mitigation)`` pairs and the JSON form
    (``{"fenced": ..., "mitigation": ...}``) too."""
    if inventory is None:
        return {}
    out: dict[str, Sink] = {}
    for name, spec in inventory.items():
        if isinstance(spec, Sink):
            out[name] = spec if spec.name == name else replace(spec, name=name)
        elif isinstance(spec, tuple):
            fenced, mitigation = spec
            out[name] = _spec(name, fenced, mitigation)
        else:
            out.update(parse_inventory({name: dict(spec)}))
    return out


def parse_inventory(raw: object, source: str = "inventory") -> dict[str, Sink]:
    """Read the JSON form: ``{"sink": {"fenced": true, "mitigation": "none", "seq": false}}``.

    Also accepted: the same mapping under a ``"sinks"`` key (as in a run's result context), or a
    list of objects each with a ``"name"``.
    """
    if isinstance(raw, dict) and "sinks" in raw:
        raw = raw["sinks"]
    if isinstance(raw, list):
        items: dict[str, object] = {}
        for item in raw:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise InventoryError(f"{source}: every sink in the list needs a string 'name'")
            items[item["name"]] = item
        raw = items
    if not isinstance(raw, dict):
        raise InventoryError(
            f"{source}: expected a JSON object mapping sink names to "
            '{"fenced": true|false, "mitigation": "lock-delay"|"idempotent"|"proxy"|"none"}'
        )
    out: dict[str, Sink] = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("fenced"), bool):
            raise InventoryError(f"{source}: sink {name!r} needs a boolean 'fenced'")
        out[name] = _spec(name, entry["fenced"], entry.get("mitigation", "none"), source)
        seq = entry.get("seq", False)
        if not isinstance(seq, bool):
            raise InventoryError(f"{source}: sink {name!r} has a non-boolean 'seq'")
        description = entry.get("description")
        out[name] = replace(
            out[name],
            description=description if isinstance(description, str) else "",
            seq=seq,
        )
    return out


def load_inventory(path: str | os.PathLike[str]) -> dict[str, Sink]:
    """Read an inventory file (see :func:`parse_inventory`)."""
    try:
        raw = orjson.loads(Path(path).read_bytes())
    except OSError as problem:
        raise InventoryError(f"cannot read inventory {path}: {problem.strerror}") from None
    except orjson.JSONDecodeError as problem:
        raise InventoryError(f"inventory {path} is not valid JSON: {problem}") from None
    return parse_inventory(raw, str(path))


def _spec(name: str, fenced: bool, mitigation: object, source: str = "inventory") -> Sink:
    if mitigation is None:
        mitigation = "none"
    if mitigation not in MITIGATIONS:
        raise InventoryError(
            f"{source}: sink {name!r} has mitigation {mitigation!r}; use one of "
            + ", ".join(MITIGATIONS)
        )
    return Sink(name, bool(fenced), cast(Mitigation, mitigation))
