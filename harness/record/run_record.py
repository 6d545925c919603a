"""The run record: what ``test.json`` holds, typed.

The spec the run carried out, and what the runner learnt while carrying it out: the lease TTL
the holders really used, the fault schedule, the write-path inventory, the nodes, the versions,
and, for a run cut short, why (an error, or the signal, when and in which phase). The runner
fills one record and rewrites ``test.json`` from it; the checker reads it back to judge the
history with the run's inventory and TTL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from harness.record.inventory import Mitigation, Sink
from harness.record.results import Interruption, check_format
from harness.record.schedule import Schedule, ScheduleError
from harness.record.spec import TestSpec, spec_from_dict

__all__ = ["FORMAT", "Interruption", "NodeEntry", "RunRecord", "check_format"]

FORMAT: Final = 1
"""The format of ``test.json`` this fencecheck writes; a record without one is of format 1
(written before the field existed)."""


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """One node of the run and its role."""

    name: str
    role: str


@dataclass(slots=True)
class RunRecord:
    """Everything ``test.json`` says about one run (see the module documentation).

    ``schedule`` is ``None`` for a run that broke off before one was drawn (``test.json`` then
    holds ``{}`` there, as it always has).
    """

    spec: TestSpec
    run_id: str
    started: str
    command: str
    lease_ttl: float
    schedule: Schedule | None
    inventory: tuple[Sink, ...]
    topology: tuple[NodeEntry, ...]
    versions: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    interrupted: Interruption | None = None
    heal_errors: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()
    """Parts that stopped answering in the final reads (an agent), named with what they said."""
    unexposed: str | None = None
    """For a control run (``spec.control``): why its planted bug could not show in it, as the
    exposure check said before the run (``--bug X cannot show in this run: ...``)."""
    finished: bool = True
    """False from the run's start until the runner reaches its check: a record still false
    afterwards belongs to a run whose process died (SIGKILL, a crash, a power loss) before it
    could write its end. Records from before this field existed count as finished."""
    defaulted: frozenset[str] = frozenset()
    """What the file read lacked and took its default (``format``, ``spec.overlap``...): the
    report shows a run as its file recorded it, not with fields it never knew of. Never
    written."""

    @property
    def sinks(self) -> dict[str, Sink]:
        """The inventory by sink name, as the checker takes it."""
        return {sink.name: sink for sink in self.inventory}

    @property
    def roles(self) -> dict[str, str]:
        """Node name -> role."""
        return {node.name: node.role for node in self.topology}

    def to_json(self) -> dict[str, Any]:
        """``test.json``'s content; optional facts are left out until they happen."""
        data: dict[str, Any] = {
            "format": FORMAT,
            "spec": self.spec.to_json(),
            "run_id": self.run_id,
            "started": self.started,
            "command": self.command,
            "lease_ttl": self.lease_ttl,
            "schedule": {} if self.schedule is None else self.schedule.to_json(),
            "inventory": [_sink_json(sink) for sink in self.inventory],
            "topology": [{"name": node.name, "role": node.role} for node in self.topology],
            "versions": dict(self.versions),
            "finished": self.finished,
        }
        if self.error is not None:
            data["error"] = self.error
        if self.interrupted is not None:
            data["interrupted"] = self.interrupted.to_json()
        if self.heal_errors:
            data["heal_errors"] = list(self.heal_errors)
        if self.lost:
            data["lost"] = list(self.lost)
        if self.unexposed is not None:
            data["unexposed"] = self.unexposed
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """Read ``test.json``'s content back; raises ``ValueError`` naming the field at fault.

        Records written before a field existed still load: what they lack takes its default.
        A record of a newer format than :data:`FORMAT` is refused (:func:`check_format`).
        """
        check_format("test.json", data, FORMAT)
        try:
            stopped = data.get("interrupted")
            record = cls(
                spec=spec_from_dict(dict(data["spec"])),
                run_id=str(data.get("run_id", "")),
                started=str(data.get("started", "")),
                command=str(data.get("command", "")),
                lease_ttl=float(data["lease_ttl"]),
                schedule=_schedule(data.get("schedule")),
                inventory=tuple(_sink(row) for row in data["inventory"]),
                topology=tuple(
                    NodeEntry(str(node["name"]), str(node["role"]))
                    for node in data.get("topology", ())
                ),
                versions={str(k): str(v) for k, v in dict(data.get("versions") or {}).items()},
                error=str(data["error"]) if data.get("error") else None,
                interrupted=(
                    Interruption(str(stopped["signal"]), str(stopped["at"]), str(stopped["phase"]))
                    if stopped
                    else None
                ),
                heal_errors=tuple(str(e) for e in data.get("heal_errors", ())),
                lost=tuple(str(part) for part in data.get("lost", ())),
                finished=bool(data.get("finished", True)),
                unexposed=str(data["unexposed"]) if data.get("unexposed") else None,
            )
        except KeyError as missing:
            raise ValueError(f"test.json lacks {missing.args[0]!r}") from None
        except (TypeError, AttributeError) as problem:
            raise ValueError(f"test.json is malformed: {problem}") from None
        written = record.to_json()
        record.defaulted = frozenset(key for key in written if key not in data) | frozenset(
            f"spec.{key}" for key in written["spec"] if key not in data["spec"]
        )
        return record


def _schedule(data: Any) -> Schedule | None:
    """The record's schedule: ``None`` when it holds none (``{}``, absent)."""
    if not data:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"test.json: schedule must be an object, got {data!r}")
    try:
        return Schedule.from_json(data)
    except ScheduleError as problem:
        raise ValueError(f"test.json: {problem}") from None


def _sink_json(sink: Sink) -> dict[str, Any]:
    return {
        "sink": sink.name,
        "fenced": sink.fenced,
        "mitigation": sink.mitigation,
        "description": sink.description,
        "seq": sink.seq,
    }


def _sink(row: Mapping[str, Any]) -> Sink:
    return Sink(
        str(row["sink"]),
        bool(row["fenced"]),
        cast(Mitigation, row.get("mitigation", "none")),
        str(row.get("description", "")),
        seq=bool(row.get("seq", False)),
    )
