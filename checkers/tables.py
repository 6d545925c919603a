"""Compact tables for what the checkers must remember for a whole run.

Histories run to millions of operations, so what outlives an operation is stored in typed arrays
(a few bytes a row) instead of one Python object per row: :class:`Names` turns the few node and
lock names into small integer codes, and :class:`EpochTable` remembers who first claimed each
epoch of a lock. Integers in a history may be of any size; a table that meets one beyond 64 bits
turns its columns into lists (:func:`widen`), so the common case stays compact.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import TypeAlias

from harness.record.verdict import OpRef

__all__ = ["EpochTable", "Ints", "Names", "fits", "widen"]

Ints: TypeAlias = "array[int] | list[int]"
_LOW, _HIGH = -(2**63), 2**63 - 1


def fits(*values: int) -> bool:
    """True if every value fits a signed 64-bit column."""
    return all(_LOW <= value <= _HIGH for value in values)


def widen(table: object, columns: tuple[str, ...], rows: int) -> None:
    """Turn ``table``'s ``columns`` into lists of their first ``rows`` rows: lists hold integers
    of any size (an overflowing append may have left a row in the columns before it)."""
    for name in columns:
        setattr(table, name, list(getattr(table, name)[:rows]))


class Names:
    """A two-way table between a few names (nodes, locks) and small integer codes."""

    __slots__ = ("_codes", "_names")

    def __init__(self) -> None:
        self._codes: dict[str | None, int] = {None: -1}
        self._names: list[str] = []

    def code(self, name: str | None) -> int:
        """The code of ``name`` (``-1`` for ``None``), assigning one the first time."""
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name] = len(self._names)
            self._names.append(name)  # type: ignore[arg-type]  # None is pre-seeded above
        return code

    def name(self, code: int) -> str | None:
        """The name for ``code`` (``None`` for ``-1``)."""
        return self._names[code] if code >= 0 else None


class EpochTable:
    """The first claimant of each epoch of one lock.

    Rows are appended in the order claims arrive, so adding one is O(1) whatever the order of
    epochs (inserting into sorted columns was quadratic for falling or shuffled epochs). Epochs
    mostly arrive in increasing order: those are indexed by a compact sorted column searched by
    bisection; an epoch below the largest seen goes into a dict instead.
    """

    __slots__ = (
        "_epochs",
        "_ids",
        "_index",
        "_invoke_index",
        "_invoke_time",
        "_late",
        "_nodes",
        "_process",
        "_rising",
        "_rising_rows",
        "_time",
        "f",
        "lock",
    )

    def __init__(self, lock: str, f: str) -> None:
        self.lock = lock
        self.f = f
        self._epochs: Ints = array("q")
        self._nodes = array("i")
        self._index: Ints = array("q")
        self._time: Ints = array("q")
        self._invoke_index: Ints = array("q")
        self._invoke_time: Ints = array("q")
        self._process: Ints = array("q")
        self._ids: list[str | None] = []
        self._rising: Ints = array("q")
        """The epochs that arrived above every earlier one, increasing."""
        self._rising_rows = array("q")
        self._late: dict[int, int] = {}
        """Epoch -> row, for epochs that arrived below the largest one seen."""

    def find(self, epoch: int) -> int:
        """The row of ``epoch``'s first claim, or ``-1``."""
        rising = self._rising
        if rising and epoch <= rising[-1]:
            at = len(rising) - 1 if epoch == rising[-1] else bisect_left(rising, epoch)
            if rising[at] == epoch:
                return self._rising_rows[at]
        return self._late.get(epoch, -1) if self._late else -1

    def node(self, row: int) -> int:
        """The node code of the claimant in ``row``."""
        return self._nodes[row]

    def add(self, epoch: int, node: int, op: OpRef) -> None:
        """Record ``op`` (by node code ``node``) as the first claim of ``epoch``."""
        process = op.process if isinstance(op.process, int) else -1
        items = (epoch, _int(op.index), _int(op.time), _int(op.invoke_index))
        if not fits(*items, _int(op.invoke_time), process):
            self._widen()
        row = len(self._epochs)
        columns: tuple[tuple[Ints, int], ...] = (
            (self._epochs, epoch),
            (self._nodes, node),
            (self._index, _int(op.index)),
            (self._time, _int(op.time)),
            (self._invoke_index, _int(op.invoke_index)),
            (self._invoke_time, _int(op.invoke_time)),
            (self._process, process),
        )
        for column, item in columns:
            column.append(item)
        self._ids.append(op.id)
        if not self._rising or epoch > self._rising[-1]:
            self._rising.append(epoch)
            self._rising_rows.append(row)
        else:
            self._late[epoch] = row

    def _widen(self) -> None:
        columns = ("_epochs", "_index", "_time", "_invoke_index", "_invoke_time", "_process")
        widen(self, columns, len(self._epochs))
        widen(self, ("_rising",), len(self._rising))

    def ref(self, row: int, role: str, names: Names) -> OpRef:
        """The claim in ``row`` as evidence."""
        process = self._process[row]
        return OpRef(
            role,
            self.f,
            "ok",
            _none(self._index[row]),
            _none(self._time[row]),
            _none(self._invoke_index[row]),
            _none(self._invoke_time[row]),
            process if process >= 0 else None,
            names.name(self._nodes[row]),
            self.lock,
            self._epochs[row],
            self._ids[row],
        )


def _int(value: int | None) -> int:
    return -1 if value is None else value


def _none(value: int) -> int | None:
    return None if value < 0 else value
