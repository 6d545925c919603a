"""The reference store: a fenced append-only log per key, a fenced bulk path, and an audit sink.

Runs on the store node as ``python3 store_server.py --port 7002 --data-dir DIR``; stdlib-only (it
imports only :mod:`harness.nodeside.wire`, copied next to it). It hosts three sinks:

- ``store``: per key an append-only log of ``{id, epoch}``. A write carries its lock, epoch and
  holder and is accepted only if the epoch is above the highest epoch accepted so far for that
  lock (the lock's *mark*, shared by every key and by ``store-batch``), or equal to it from the
  holder that raised the mark. Equal from another holder is refused: a correct lock service never
  hands one epoch to two holders, so two holders at one epoch means the lock service failed
  (a counter lost in a power loss), and the store is the last place that can tell them apart. A
  request that names no holder, or a mark whose holder is unknown (a log written before holders
  were logged), is judged by the epoch alone.
- ``store-batch``: the bulk endpoint of the same store (several keys in one request), fenced by the
  same marks.
- ``audit``: an unfenced recording sink, a stand-in for a payment API or a printer: it accepts
  everything and records arrival order and the epoch each write carried.

A read may be *fenced* too: it carries a lock and epoch and is treated like a write for the mark
(refused below it or at it from another holder, else it raises the mark to its epoch). A
read-modify-write needs this: once the new holder has read, an older holder's write must be
refused, or both writes build on one read.

Every accepted write gets ``seq``, the store's acceptance order across all sinks and keys (1, 2,
3...; the store's own order, as etcd's ``mod_revision``), returned with the write and on each read
entry. Every accepted write (with its ``seq``), and every mark a fenced read raises, is appended to
``store.log`` and fsynced before it is acknowledged; on start the log is replayed, which rebuilds
the entries, the marks and the ``seq`` counter. Switches (``--bug``): ``no-store-check`` (no sink
checks epochs, on writes or reads),
``store-forgets`` (marks are not rebuilt on start, and a read's mark is not logged: marks live in
memory only), ``lazy-mark`` (marks are not rebuilt from the entries either: they are saved to
the log as a checkpoint record every 16th accepted fenced write only, so a restart falls back to
the last checkpoint, a common shortcut of stores that keep the mark apart from the data),
``unfenced-path`` (``store-batch`` does not check epochs), ``mark-per-key`` (the mark is kept
per key instead of per lock: a stale write to a key the new holder has not written yet is
accepted, which only the order across keys, ``seq``, shows), ``fence-per-connection`` (a
connection's first fenced request is checked, later ones on it under the same lock are trusted, as
a session authenticated once: a request held on an old connection passes), ``non-idempotent-write``
(a write that is already in, same id and epoch, is appended again: a replayed or retried request
is applied twice; a correct store answers such a repeat as it answered the first and appends
nothing), ``mark-no-fsync`` (the log, and so every mark, is appended without fsync: a kill keeps
it in the page cache, a power loss loses it), ``ack-before-fsync`` (a write is acknowledged before
its record is fsynced: a flusher fsyncs the log every :data:`FLUSH_EVERY_S`, so a power loss
loses the last writes acknowledged), ``equal-epoch-any-holder`` (an equal epoch is admitted from
any holder: ``>=`` on the epoch alone, so writes of two holders a failed lock service gave one
epoch are both accepted).

Protocol (one JSON object per line, see :mod:`harness.nodeside.wire`):
``{"op":"write","sink":"store"|"audit","lock":L,"epoch":N,"key":K,"id":I,"prev":P,"holder":H}``
(``holder``, the writer's node name, optional in every fenced request),
``{"op":"write","sink":"store"|"audit","lock":L,"epoch":N,"items":[{"key":K,"id":I},...]}`` (one
write spanning several keys of the sink, all accepted or none),
``{"op":"write-batch","lock":L,"epoch":N,"items":[{"key":K,"id":I,"prev":P},...]}`` ->
``{"ok":true,"mark":M,"seqs":[Q,...]}`` (one ``seq`` per item) or
``{"ok":false,"error":"stale-epoch","mark":M}``;
``{"op":"read","sink":S,"key":K}`` -> ``{"ok":true,"entries":[{"id":I,"epoch":N,"seq":Q},...]}``;
``{"op":"read","sink":S,"key":K,"lock":L,"epoch":N}`` (fenced) -> ``{"ok":true,"entries":[...],
"mark":M}`` or ``{"ok":false,"error":"stale-epoch","mark":M}``; ``{"op":"ping"}``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from harness.nodeside import wire

__all__ = [
    "ACK_BEFORE_FSYNC",
    "AUDIT",
    "BATCH",
    "EQUAL_EPOCH_ANY_HOLDER",
    "FENCE_PER_CONNECTION",
    "FLUSH_EVERY_S",
    "LAZY_MARK",
    "MARK_EVERY",
    "MARK_NO_FSYNC",
    "MARK_PER_KEY",
    "NON_IDEMPOTENT",
    "NO_STORE_CHECK",
    "STORE",
    "STORE_FORGETS",
    "UNFENCED_PATH",
    "Item",
    "Store",
    "main",
]

STORE: Final = "store"
BATCH: Final = "store-batch"
AUDIT: Final = "audit"
NO_STORE_CHECK: Final = "no-store-check"
STORE_FORGETS: Final = "store-forgets"
LAZY_MARK: Final = "lazy-mark"
MARK_EVERY: Final = 16
"""With ``lazy-mark``, the marks are saved with every this many accepted fenced writes."""
UNFENCED_PATH: Final = "unfenced-path"
MARK_PER_KEY: Final = "mark-per-key"
FENCE_PER_CONNECTION: Final = "fence-per-connection"
NON_IDEMPOTENT: Final = "non-idempotent-write"
MARK_NO_FSYNC: Final = "mark-no-fsync"
ACK_BEFORE_FSYNC: Final = "ack-before-fsync"
EQUAL_EPOCH_ANY_HOLDER: Final = "equal-epoch-any-holder"
FLUSH_EVERY_S: Final = 1.0
"""With ``ack-before-fsync``, how often the flusher fsyncs what was acknowledged meanwhile."""
_SWITCHES: Final = (
    NO_STORE_CHECK,
    STORE_FORGETS,
    LAZY_MARK,
    UNFENCED_PATH,
    MARK_PER_KEY,
    FENCE_PER_CONNECTION,
    NON_IDEMPOTENT,
    MARK_NO_FSYNC,
    ACK_BEFORE_FSYNC,
    EQUAL_EPOCH_ANY_HOLDER,
)
_SINKS: Final = (STORE, BATCH, AUDIT)


@dataclass(frozen=True, slots=True)
class Item:
    """One write of a request: the key, the write's unique id, and the id it was based on."""

    key: str
    id: str
    prev: Any = None


class Store:
    """The sinks' state and its durable log; thread-safe."""

    def __init__(self, data_dir: Path, bugs: frozenset[str] = frozenset()) -> None:
        unknown = bugs - set(_SWITCHES)
        if unknown:
            raise ValueError(f"unknown store bug switches: {sorted(unknown)}")
        self._checks = {
            STORE: NO_STORE_CHECK not in bugs,
            BATCH: NO_STORE_CHECK not in bugs and UNFENCED_PATH not in bugs,
            AUDIT: False,
        }
        self._remember_marks = not bugs & {STORE_FORGETS, LAZY_MARK}
        self._lazy_marks = LAZY_MARK in bugs
        self._per_key = MARK_PER_KEY in bugs
        self._per_connection = FENCE_PER_CONNECTION in bugs
        self._idempotent = NON_IDEMPOTENT not in bugs
        self._tells_holders = EQUAL_EPOCH_ANY_HOLDER not in bugs
        # fence-per-connection: the locks a connection was admitted under (each connection is
        # served by a thread of its own, so a thread-local is that connection's session).
        self._session = threading.local()
        self._accepted: dict[tuple[str, str, int], int] = {}  # (sink, id, epoch) -> its seq
        self._unsaved = 0  # lazy-mark: accepted fenced writes since the marks were last saved
        self._mutex = threading.Lock()
        self._entries: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._marks: dict[str, int] = {}
        self._mark_holders: dict[str, str | None] = {}  # who raised each mark (None: unknown)
        self._seq = 0  # the seq of the last accepted write, across every sink and key
        data_dir.mkdir(parents=True, exist_ok=True)
        self._path = data_dir / "store.log"
        self._replay()
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._fsync = not bugs & {MARK_NO_FSYNC, ACK_BEFORE_FSYNC}
        if ACK_BEFORE_FSYNC in bugs:
            threading.Thread(target=self._flush, name="flusher", daemon=True).start()

    def _flush(self) -> None:
        """ack-before-fsync: fsync the log every :data:`FLUSH_EVERY_S`, after the acks."""
        while True:
            time.sleep(FLUSH_EVERY_S)
            os.fsync(self._fd)

    def _replay(self) -> None:
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):
            # A kill mid-append leaves a torn last record; it was never acknowledged.
            with self._path.open("r+b") as log:
                log.truncate(len(complete))
            wire.log(f"dropped a torn record of {len(data) - len(complete)} bytes at the log's end")
        for number, line in enumerate(complete.splitlines(), 1):
            try:
                record = json.loads(line)
                self._apply(record, remember_mark=self._remember_marks)
            except (ValueError, KeyError, TypeError) as problem:
                raise SystemExit(
                    f"store: {self._path} line {number} is corrupt ({problem}); restore the file "
                    "or remove the whole data dir to start a new cluster"
                ) from None
        wire.log(
            f"replayed {len(complete.splitlines())} records; marks "
            f"{self._marks if self._remember_marks else 'not rebuilt from the entries'}"
        )

    def _apply(self, record: dict[str, Any], remember_mark: bool) -> None:
        # A checkpoint (lazy-mark) sets the marks; a fenced read's record raises the mark only; a
        # write's adds an entry as well.
        if "marks" in record:
            holders = record.get("holders", {})
            for lock, mark in record["marks"].items():
                self._raise_mark(lock, int(mark), holders.get(lock))
            return
        if not record.get("read"):
            entry = {"id": record["id"], "epoch": record["epoch"]}
            if "seq" in record:
                entry["seq"] = record["seq"]
                self._seq = max(self._seq, record["seq"])
            self._entries.setdefault((record["sink"], record["key"]), []).append(entry)
            self._accepted[(record["sink"], record["id"], record["epoch"])] = entry.get("seq", 0)
        if record["fenced"] and remember_mark:
            name = self._mark_name(record["lock"], record["key"])
            self._raise_mark(name, record["epoch"], record.get("holder"))

    def _raise_mark(self, name: str, epoch: int, holder: str | None) -> None:
        """Raise mark ``name`` to ``epoch`` with ``holder`` as its holder; an equal epoch keeps
        the holder that raised it first."""
        if epoch > self._marks.get(name, 0):
            self._marks[name] = epoch
            self._mark_holders[name] = holder

    def _mark_name(self, lock: str, key: str) -> str:
        """Where the mark of ``key`` of ``lock`` is kept: the lock's (``mark-per-key``: the
        key's own)."""
        return f"{lock}/{key}" if self._per_key else lock

    def _mark(self, lock: str, keys: Sequence[str]) -> int:
        """The mark a write or read of ``keys`` of ``lock`` must reach."""
        return max(self._marks.get(self._mark_name(lock, key), 0) for key in keys)

    def _admits(self, lock: str, keys: Sequence[str], epoch: int, holder: str | None) -> bool:
        """Whether ``epoch`` from ``holder`` passes the marks of ``keys`` of ``lock``: at least
        each mark, and above one that another holder raised (unless ``equal-epoch-any-holder``)."""
        for name in {self._mark_name(lock, key) for key in keys}:
            mark = self._marks.get(name, 0)
            if epoch < mark:
                return False
            if epoch == mark and self._tells_holders and holder is not None:
                raised_by = self._mark_holders.get(name)
                if raised_by is not None and raised_by != holder:
                    return False
        return True

    def write(
        self,
        sink: str,
        lock: str,
        epoch: int,
        items: Sequence[Item],
        holder: str | None = None,
    ) -> dict[str, Any]:
        """Accept ``items`` into ``sink`` (all or none) from ``holder``, or refuse them as
        ``stale-epoch``."""

        def accept(fenced: bool) -> dict[str, Any]:
            seen = [self._accepted.get((sink, item.id, epoch)) for item in items]
            if self._idempotent and all(seq is not None for seq in seen):
                # The same write again (a client's retry, a request the network delivered
                # twice): it is already in, so it is answered as before and not appended.
                return {"ok": True, "mark": self._marks.get(lock, 0), "seqs": seen}
            records = [
                {
                    "sink": sink,
                    "key": item.key,
                    "id": item.id,
                    "epoch": epoch,
                    "lock": lock,
                    "prev": item.prev,
                    "fenced": fenced,
                    "seq": self._seq + number,
                    "holder": holder,
                }
                for number, item in enumerate(items, 1)
            ]
            data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
            self._append(data + self._checkpoint(lock, epoch, holder, fenced, len(records)))
            for record in records:
                self._apply(record, remember_mark=True)
            return {
                "ok": True,
                "mark": self._mark(lock, keys),
                "seqs": [record["seq"] for record in records],
            }

        keys = [item.key for item in items]
        return self._behind_fence(sink, lock, epoch, holder, keys, accept)

    def _behind_fence(
        self,
        sink: str,
        lock: str,
        epoch: int,
        holder: str | None,
        keys: Sequence[str],
        act: Callable[[bool], dict[str, Any]],
    ) -> dict[str, Any]:
        """``act(fenced)`` under the mutex if ``sink`` admits ``epoch`` of ``lock`` from
        ``holder`` for ``keys``, else the ``stale-epoch`` refusal; ``fenced`` says whether
        ``sink`` checks epochs at all."""
        if sink not in _SINKS:
            return _unknown_sink(sink)
        fenced = self._checks[sink]
        admitted: set[str] = self._session.__dict__.setdefault("locks", set())
        with self._mutex:
            mark = self._mark(lock, keys)
            trusted = self._per_connection and lock in admitted
            if fenced and not trusted and not self._admits(lock, keys, epoch, holder):
                return {"ok": False, "error": "stale-epoch", "mark": mark}
            if fenced:
                admitted.add(lock)
            return act(fenced)

    def _checkpoint(
        self, lock: str, epoch: int, holder: str | None, fenced: bool, writes: int
    ) -> bytes:
        """lazy-mark: once every :data:`MARK_EVERY` fenced writes, a log record of the marks
        (and their holders) as they stand with ``writes`` more of ``lock`` at ``epoch`` from
        ``holder`` accepted; else nothing."""
        if not (self._lazy_marks and fenced):
            return b""
        self._unsaved += writes
        if self._unsaved < MARK_EVERY:
            return b""
        self._unsaved = 0
        marks = {**self._marks, lock: max(self._marks.get(lock, 0), epoch)}
        holders = dict(self._mark_holders)
        if epoch > self._marks.get(lock, 0):
            holders[lock] = holder
        return json.dumps({"marks": marks, "holders": holders}).encode() + b"\n"

    def _append(self, data: bytes) -> None:
        # A failed append (ENOSPC, EIO from fsync) is answered as an error, so it must leave no
        # record behind that a later replay would bring back: the log is cut back to before it.
        size = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if self._fsync:
                os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, size)
            raise

    def read(self, sink: str, key: str) -> list[dict[str, Any]]:
        """The entries of ``key`` in ``sink``, in the order they were accepted."""
        with self._mutex:
            return self._entries_of(sink, key)

    def fenced_read(
        self, sink: str, key: str, lock: str, epoch: int, holder: str | None = None
    ) -> dict[str, Any]:
        """Read ``key`` under ``lock``'s ``epoch`` for ``holder``: refused as ``stale-epoch``
        where a write would be, else the mark is raised to ``epoch`` (durably, as a write raises
        it) and the entries returned.

        On a sink that checks no epochs the read is a plain read and leaves the mark alone.
        """

        def read(fenced: bool) -> dict[str, Any]:
            if fenced and epoch > self._mark(lock, [key]):
                record = {
                    "read": True,
                    "sink": sink,
                    "key": key,
                    "lock": lock,
                    "epoch": epoch,
                    "fenced": True,
                    "holder": holder,
                }
                if self._remember_marks:  # else a read's mark lives in memory only
                    self._append(json.dumps(record).encode() + b"\n")
                self._apply(record, remember_mark=True)
            entries = self._entries_of(sink, key)
            return {"ok": True, "entries": entries, "mark": self._mark(lock, [key])}

        return self._behind_fence(sink, lock, epoch, holder, [key], read)

    def _entries_of(self, sink: str, key: str) -> list[dict[str, Any]]:
        return [dict(entry) for entry in self._entries.get((sink, key), ())]

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one protocol request (see the module docstring)."""
        op = request.get("op")
        if op == "write":
            sink = wire.text(request, "sink")
            if sink == BATCH:
                raise wire.BadRequest("writes to store-batch go through op 'write-batch'")
            if "items" in request:  # one write spanning several keys of the sink
                return self.write(sink, *_fence(request), _items(request), _holder(request))
            item = Item(wire.text(request, "key"), wire.text(request, "id"), request.get("prev"))
            return self.write(sink, *_fence(request), [item], _holder(request))
        if op == "write-batch":
            return self.write(BATCH, *_fence(request), _items(request), _holder(request))
        if op == "read":
            sink = wire.text(request, "sink")
            key = wire.text(request, "key")
            if "lock" in request or "epoch" in request:
                return self.fenced_read(sink, key, *_fence(request), _holder(request))
            if sink not in _SINKS:
                return _unknown_sink(sink)
            return {"ok": True, "entries": self.read(sink, key)}
        if op == "ping":
            return {"ok": True}
        raise wire.BadRequest(f"unknown op {op!r}; expected write, write-batch, read, ping")


def _unknown_sink(sink: str) -> dict[str, Any]:
    return {"ok": False, "error": "unknown-sink", "message": f"no sink {sink!r}; sinks: {_SINKS}"}


def _fence(request: dict[str, Any]) -> tuple[str, int]:
    return wire.text(request, "lock"), wire.integer(request, "epoch")


def _holder(request: dict[str, Any]) -> str | None:
    """The request's ``holder``, or ``None`` when it names none (judged by its epoch alone)."""
    return wire.text(request, "holder") if "holder" in request else None


def _items(request: dict[str, Any]) -> list[Item]:
    raw = request.get("items")
    if not isinstance(raw, list) or not raw or not all(isinstance(i, dict) for i in raw):
        raise wire.BadRequest("field 'items' must be a non-empty list of {key, id, prev} objects")
    return [Item(wire.text(i, "key"), wire.text(i, "id"), i.get("prev")) for i in raw]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until killed."""
    parser = wire.with_listen_options("fencecheck reference store and audit sink")
    parser.add_argument("--data-dir", type=Path, required=True, help="where the log is kept")
    parser.add_argument(
        "--bug",
        action="append",
        default=[],
        choices=_SWITCHES,
    )
    args = parser.parse_args(argv)
    store = Store(args.data_dir, frozenset(args.bug))
    banner = f"store, data {args.data_dir}, bugs {sorted(args.bug) or 'none'}"
    wire.serve(args.host, args.port, store.handle, banner, args.secret_file)


if __name__ == "__main__":
    main()
