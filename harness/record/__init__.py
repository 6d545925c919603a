"""Layer 0: history format v1 (docs/design.md §4) with its typed nemesis event, its vocabulary,
and the write-path inventory.

Everything above it (checkers, runner, report) reads and writes histories through this package;
it imports nothing else of fencecheck's.
"""

from harness.record.events import (
    EVENT_TYPES,
    NEMESIS,
    SAID,
    Event,
    EventType,
    HistoryError,
    Process,
    event_from_dict,
    event_to_dict,
    optional_natural,
)
from harness.record.inventory import (
    EXPECTED_WHEN_UNGUARDED,
    MITIGATIONS,
    Inventory,
    InventoryError,
    Mitigation,
    Sink,
    load_inventory,
    normalize_inventory,
    parse_inventory,
)
from harness.record.io import MAX_DEPTH, HistoryWriter, json_bytes, paired, read_history, validated
from harness.record.nemesis import FACTS, RESTARTED, NemesisEvent, NemesisFacts, PowerLoss

__all__ = [
    "EVENT_TYPES",
    "EXPECTED_WHEN_UNGUARDED",
    "FACTS",
    "MAX_DEPTH",
    "MITIGATIONS",
    "NEMESIS",
    "RESTARTED",
    "SAID",
    "Event",
    "EventType",
    "HistoryError",
    "HistoryWriter",
    "Inventory",
    "InventoryError",
    "Mitigation",
    "NemesisEvent",
    "NemesisFacts",
    "PowerLoss",
    "Process",
    "Sink",
    "event_from_dict",
    "event_to_dict",
    "json_bytes",
    "load_inventory",
    "normalize_inventory",
    "optional_natural",
    "paired",
    "parse_inventory",
    "read_history",
    "validated",
]
