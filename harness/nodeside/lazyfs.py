"""The lazy file system: a daemon's data directory that keeps what was never fsynced in a
volatile copy, so that a power loss can drop it (the power-loss and disk fault kinds).

Runs on a node as ``python3 lazyfs.py mount MOUNTPOINT [--metadata journal|strict]``: a FUSE
file system (Debian's ``python3-pyfuse3``, libfuse 3, run as root) mounted over ``MOUNTPOINT``.
It daemonizes once the mount is up, so the command returns when the directory is ready. Its state
directory (:func:`state_of`, one per mountpoint under :data:`STATE_ROOT`) holds two trees:
``live`` (what the daemon sees: every operation passes through to it at once) and ``durable``
(what survives a power loss: ``durable/files/<id>`` holds each file's synced bytes,
``durable/tree.json`` the synced directory entries). What the directory held before the mount
is taken as durable. The control socket ``control.sock`` there takes one JSON request a
connection (:func:`ask` sends one; ``lazyfs.py ask REQUEST`` sends it to each of the node's):
``report``, ``drop`` (the power loss: every unsynced byte and entry is dropped and ``live`` is
rebuilt from ``durable``; the daemons must be dead), and ``faults``, which changes those it
names: ``disk_full`` (ENOSPC for every write, create and growing truncate), ``fsync_error`` (EIO
for every fsync), ``fsync_delay_s`` (each fsync waits that long first).

The semantics, precisely (tests/nemeses/test_lazyfs.py checks each):

- ``write`` (also the pages an ``mmap`` store dirties, which the kernel sends as writes when it
  writes them back) changes ``live`` only; the written range is remembered as unsynced.
- ``fsync`` and ``fdatasync`` of a file (also ``msync(MS_SYNC)``, and every write of a file opened
  with ``O_SYNC`` or ``O_DSYNC``) copy its unsynced ranges and its size to ``durable`` (and fsync
  the backing file): its data is then kept. ``msync(MS_ASYNC)``, ``close``, ``sync(2)`` and
  ``syncfs(2)`` sync nothing (FUSE does not forward the last two).
- ``truncate`` changes the size in ``live``; the new size (and the bytes it cut or the zeros it
  added) is durable at the file's next fsync.
- ``O_APPEND``: the kernel gives each write its offset (the file's end), as for any write.
- Directory entries (create, mkdir, unlink, rmdir, rename, link, symlink) change ``live`` at
  once and become durable when their directory is fsynced: rename plus an fsync of the target
  directory keeps the new name. With ``--metadata journal`` (the default, like ext4's ordered
  journal, which commits every earlier namespace change with any fsync) an fsync of any file
  also makes every pending entry durable; with ``--metadata strict`` (POSIX's letter) only a
  directory fsync does. A durable entry whose file's data was never fsynced is an empty file
  after a power loss (what ext4 does without ``auto_da_alloc``).
- A failed fsync (``fsync_error``) returns EIO and leaves the data unsynced: a later fsync after
  the window syncs it (a transient device error, not Linux's pages-marked-clean behaviour).

Stdlib plus ``pyfuse3`` (imported only to mount), which a system that takes disk faults lists in
its ``packages.txt``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

__all__ = [
    "CONTROL",
    "STATE_ROOT",
    "Lazy",
    "Pending",
    "ask",
    "ask_all",
    "copy_sparse",
    "listen",
    "main",
    "merged",
    "mount",
    "state_of",
]

CONTROL: Final = "control.sock"
"""The control socket's name inside the state directory."""
STATE_ROOT: Final = "/var/lib/fencecheck-lazyfs"
"""Where a node keeps each lazy file system's state directory (one per mounted data dir)."""
_ROOT_ID: Final = 0
_T = TypeVar("_T")
_TREE: Final = "tree.json"


def merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` (half-open byte ranges) sorted, with overlapping or touching ones joined."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


_CHUNK: Final = 1 << 20


def copy_sparse(source: str, target: str) -> None:
    """Copy ``source`` to a new ``target`` with its holes kept: a preallocated log (ZooKeeper
    sizes each to 64 MB with one byte at its end) copied whole cost seconds per power loss, for
    every log of every member. Where the file system cannot tell holes, all of it is data."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        size = os.fstat(src.fileno()).st_size
        at = 0
        while at < size:
            try:
                start = os.lseek(src.fileno(), at, os.SEEK_DATA)
            except OSError as problem:
                if problem.errno != errno.ENXIO:  # ENXIO: nothing but a hole after ``at``
                    raise
                break
            end = os.lseek(src.fileno(), start, os.SEEK_HOLE)
            src.seek(start)
            dst.seek(start)
            while start < end:
                chunk = src.read(min(_CHUNK, end - start))
                if not chunk:
                    break
                dst.write(chunk)
                start += len(chunk)
            at = end
        dst.truncate(size)


@dataclass(slots=True)
class Pending:
    """One file's unsynced changes: byte ranges to copy, and how many writes and bytes they were."""

    ranges: list[tuple[int, int]] = field(default_factory=list)
    writes: int = 0
    bytes: int = 0


class Lazy:
    """The lazy state of one file system: ``live`` and ``durable`` under ``state``, what is
    unsynced, and the faults in force. Thread-safe; the FUSE layer (:func:`main`) calls it."""

    def __init__(self, state: str, metadata: str = "journal") -> None:
        if metadata not in ("journal", "strict"):
            raise ValueError(f"--metadata must be journal or strict, not {metadata!r}")
        self.live = os.path.join(state, "live")
        self.durable = os.path.join(state, "durable")
        self.journal = metadata == "journal"
        self.lock = threading.RLock()
        self.ids: dict[int, int] = {}  # live inode -> durable id
        self.pending: dict[int, Pending] = {}  # by id
        self.dirty_dirs: dict[int, int] = {}  # dir id -> entry changes not yet durable
        self.tree: dict[str, Any] = {"next": 1, "dirs": {str(_ROOT_ID): {}}}
        self.disk_full = False
        self.fsync_error = False
        self.fsync_delay_s = 0.0
        self.after_drop: Callable[[], None] = lambda: None
        """Called after a drop (the FUSE layer forgets the old inodes there)."""
        self.counts: dict[str, int] = {
            "fsyncs": 0,
            "dir_fsyncs": 0,
            "enospc": 0,
            "eio": 0,
            "slowed_fsyncs": 0,
            "drops": 0,
        }

    # -- start -----------------------------------------------------------------------------

    def start(self, existing: str) -> None:
        """Make the state: a new one takes what ``existing`` holds as durable; a kept one (after
        a power loss of the whole node) rebuilds ``live`` from ``durable``."""
        os.makedirs(os.path.join(self.durable, "files"), exist_ok=True)
        if os.path.exists(os.path.join(self.durable, _TREE)):
            with open(os.path.join(self.durable, _TREE)) as tree:
                self.tree = json.load(tree)
            self._rebuild()
            return
        if os.path.exists(self.live):
            shutil.rmtree(self.live)
        shutil.copytree(existing, self.live, symlinks=True)
        self.ids = {os.lstat(self.live).st_ino: _ROOT_ID}
        for top, _, files in os.walk(self.live):
            for name in files:
                full = os.path.join(top, name)
                if os.path.islink(full):
                    continue
                fd = os.open(full, os.O_RDONLY)
                try:
                    self._sync_data(self._id_of_ino(os.fstat(fd).st_ino), fd)
                finally:
                    os.close(fd)
        self.sync_dirs([ident for _, ident in self._live_dirs()])

    # -- identities ------------------------------------------------------------------------

    def path(self, rel: str) -> str:
        """The ``live`` path of the mount-relative ``rel``."""
        return os.path.join(self.live, rel.lstrip("/"))

    def _id_of_ino(self, ino: int) -> int:
        with self.lock:
            ident = self.ids.get(ino)
            if ident is None:
                ident = int(self.tree["next"])
                self.tree["next"] = ident + 1
                self.ids[ino] = ident
            return ident

    def _id_of_path(self, rel: str) -> int:
        ino = os.lstat(self.path(rel)).st_ino
        with self.lock:
            if rel.strip("/.") == "" and ino not in self.ids:
                self.ids[ino] = _ROOT_ID
            return self._id_of_ino(ino)

    def _parent_id(self, rel: str) -> int:
        return self._id_of_path(os.path.dirname(rel.rstrip("/")) or "/")

    # -- changes ---------------------------------------------------------------------------

    def check_space(self) -> None:
        """ENOSPC while the disk is full."""
        if self.disk_full:
            with self.lock:
                self.counts["enospc"] += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def wrote(self, fd: int, offset: int, length: int) -> None:
        """``length`` bytes were written at ``offset`` of the file open as ``fd``."""
        ident = self._id_of_ino(os.fstat(fd).st_ino)
        with self.lock:
            pending = self.pending.setdefault(ident, Pending())
            pending.ranges.append((offset, offset + length))
            pending.writes += 1
            pending.bytes += length

    def resized(self, ino: int, old: int, new: int) -> None:
        """A truncate changed a file's size from ``old`` to ``new``."""
        ident = self._id_of_ino(ino)
        with self.lock:
            pending = self.pending.setdefault(ident, Pending())
            pending.ranges.append((min(old, new), max(old, new)))
            pending.writes += 1

    def created(self, rel: str) -> None:
        """An entry ``rel`` appeared (create, mkdir, symlink, link, mknod)."""
        self._id_of_path(rel)
        self.changed_dir(rel)

    def changed_dir(self, rel: str) -> None:
        """The directory holding ``rel`` changed its entries."""
        parent = self._parent_id(rel)
        with self.lock:
            self.dirty_dirs[parent] = self.dirty_dirs.get(parent, 0) + 1

    # -- syncs -----------------------------------------------------------------------------

    def fsync(self, fd: int) -> None:
        """fsync or fdatasync of the file open as ``fd``: its data and size become durable (and
        with ``journal`` metadata, every pending entry too); EIO while ``fsync_error``."""
        self._before_fsync()
        ident = self._id_of_ino(os.fstat(fd).st_ino)
        with self.lock:
            self.counts["fsyncs"] += 1
            self._sync_data(ident, fd)
            if self.journal and self.dirty_dirs:
                self.sync_dirs(list(self.dirty_dirs))

    def fsync_dir(self, rel: str) -> None:
        """fsync of the directory ``rel``: its entries become durable; EIO while ``fsync_error``."""
        self._before_fsync()
        with self.lock:
            self.counts["dir_fsyncs"] += 1
            self.sync_dirs([self._id_of_path(rel)])

    def fsync_delay(self) -> float:
        """How long the next fsync must wait first (``slow-disk``); counted as slowed. The FUSE
        layer waits it without holding anything, so other operations go on meanwhile."""
        with self.lock:
            if self.fsync_delay_s > 0:
                self.counts["slowed_fsyncs"] += 1
            return self.fsync_delay_s

    def _before_fsync(self) -> None:
        if self.fsync_error:
            with self.lock:
                self.counts["eio"] += 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    def _sync_data(self, ident: int, fd: int) -> None:
        pending = self.pending.pop(ident, None)
        target = os.path.join(self.durable, "files", str(ident))
        if pending is None and os.path.exists(target):
            return
        out = os.open(target, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            for start, end in merged(pending.ranges if pending else [(0, size)]):
                offset = start
                while offset < min(end, size):
                    chunk = os.pread(fd, min(1 << 20, min(end, size) - offset), offset)
                    if not chunk:
                        break
                    os.pwrite(out, chunk, offset)
                    offset += len(chunk)
            os.ftruncate(out, size)
            os.fsync(out)
        finally:
            os.close(out)

    def sync_dirs(self, idents: Sequence[int]) -> None:
        """Make the live entries of the directories ``idents`` durable (one tree write)."""
        by_id = {ident: rel for rel, ident in self._live_dirs()}
        dirs = self.tree["dirs"]
        for ident in idents:
            self.dirty_dirs.pop(ident, None)
            rel = by_id.get(ident)
            if rel is None:
                continue  # removed since: its parent's sync drops it
            entries: dict[str, Any] = {}
            for name in sorted(os.listdir(self.path(rel))):
                info = os.lstat(self.path(os.path.join(rel, name)))
                child = self._id_of_ino(info.st_ino)
                if stat.S_ISDIR(info.st_mode):
                    kind, extra = "d", ""
                    dirs.setdefault(str(child), {})
                elif stat.S_ISLNK(info.st_mode):
                    kind, extra = "l", os.readlink(self.path(os.path.join(rel, name)))
                else:
                    kind, extra = "f", ""
                entries[name] = [child, kind, stat.S_IMODE(info.st_mode), extra]
            dirs[str(ident)] = entries
        self._write_tree()

    def _live_dirs(self) -> Iterator[tuple[str, int]]:
        for top, _, _ in os.walk(self.live):
            rel = os.path.relpath(top, self.live)
            yield ("" if rel == "." else rel), self._id_of_path("" if rel == "." else rel)

    def _write_tree(self) -> None:
        reachable: set[str] = set()
        todo = [str(_ROOT_ID)]
        while todo:
            ident = todo.pop()
            reachable.add(ident)
            for child, kind, _, _ in self.tree["dirs"].get(ident, {}).values():
                if kind == "d" and str(child) not in reachable:
                    todo.append(str(child))
        self.tree["dirs"] = {k: v for k, v in self.tree["dirs"].items() if k in reachable}
        path = os.path.join(self.durable, _TREE)
        with open(path + ".tmp", "w") as out:
            json.dump(self.tree, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(path + ".tmp", path)
        directory = os.open(self.durable, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    # -- power loss ------------------------------------------------------------------------

    def unsynced(self) -> dict[str, int]:
        """What a power loss now would drop: writes, bytes, files, directory entry changes."""
        with self.lock:
            return {
                "writes": sum(p.writes for p in self.pending.values()),
                "bytes": sum(p.bytes for p in self.pending.values()),
                "files": len(self.pending),
                "entry_changes": sum(self.dirty_dirs.values()),
            }

    def drop(self) -> dict[str, int]:
        """The power loss: forget everything unsynced and rebuild ``live`` from ``durable``;
        returns what was dropped (:meth:`unsynced`). The daemons using it must be dead."""
        with self.lock:
            dropped = self.unsynced()
            self.pending.clear()
            self.dirty_dirs.clear()
            self.counts["drops"] += 1
            self._rebuild()
            self.after_drop()
            return dropped

    def _rebuild(self) -> None:
        for name in os.listdir(self.live) if os.path.isdir(self.live) else ():
            full = os.path.join(self.live, name)
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
        os.makedirs(self.live, exist_ok=True)
        self.ids = {os.lstat(self.live).st_ino: _ROOT_ID}
        made: dict[int, str] = {}
        self._materialize(_ROOT_ID, self.live, made)
        files = os.path.join(self.durable, "files")
        for name in os.listdir(files):
            if int(name) not in made:  # never linked durably: gone with the power
                os.unlink(os.path.join(files, name))

    def _materialize(self, dir_id: int, where: str, made: dict[int, str]) -> None:
        for name, (child, kind, mode, extra) in self.tree["dirs"].get(str(dir_id), {}).items():
            full = os.path.join(where, name)
            if kind == "d":
                os.mkdir(full, mode)
                self._materialize(child, full, made)
            elif kind == "l":
                os.symlink(extra, full)
            elif child in made:
                os.link(made[child], full)
            else:
                stored = os.path.join(self.durable, "files", str(child))
                if os.path.exists(stored):
                    copy_sparse(stored, full)
                else:
                    open(full, "wb").close()
                os.chmod(full, mode)
            made[child] = full
            self.ids[os.lstat(full).st_ino] = child

    # -- control ---------------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        """The counters, what is unsynced now, and the faults in force."""
        with self.lock:
            return {
                **self.counts,
                "unsynced": self.unsynced(),
                "faults": {
                    "disk_full": self.disk_full,
                    "fsync_error": self.fsync_error,
                    "fsync_delay_s": self.fsync_delay_s,
                },
            }

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one control request (see the module docstring)."""
        op = request.get("op")
        if op == "report":
            return {"ok": True, "report": self.report()}
        if op == "drop":
            return {"ok": True, "dropped": self.drop(), "report": self.report()}
        if op == "faults":
            with self.lock:  # only those named change: windows of two kinds may overlap
                self.disk_full = bool(request.get("disk_full", self.disk_full))
                self.fsync_error = bool(request.get("fsync_error", self.fsync_error))
                self.fsync_delay_s = float(request.get("fsync_delay_s", self.fsync_delay_s))
            return {"ok": True, "report": self.report()}
        return {"ok": False, "error": f"unknown op {op!r}; expected report, drop or faults"}

    def serve(self, server: socket.socket) -> None:
        """Answer control requests on the listening ``server`` (:func:`listen`), one per
        connection, forever."""
        while True:
            conn, _ = server.accept()
            with conn:
                try:
                    answer = self.handle(json.loads(conn.makefile().readline()))
                except (OSError, ValueError) as problem:
                    answer = {"ok": False, "error": f"{type(problem).__name__}: {problem}"}
                conn.sendall(json.dumps(answer).encode() + b"\n")


def listen(control: str) -> socket.socket:
    """A Unix socket listening at ``control`` (an old one is replaced)."""
    if os.path.exists(control):
        os.unlink(control)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(control)
    server.listen(8)
    return server


def ask(state: str, request: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Send one control request to the lazy file system whose state directory is ``state``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(os.path.join(state, CONTROL))
        conn.sendall(json.dumps(request).encode() + b"\n")
        answer: dict[str, Any] = json.loads(conn.makefile().readline())
        return answer


def _fuse_main(lazy: Lazy, mountpoint: str, state: str) -> None:  # pragma: no cover - on a node
    # pyfuse3 (Debian's python3-pyfuse3, libfuse 3) is on the node only; python3-fuse (libfuse 2)
    # was tried first and crashes (SIGSEGV) on a directory fsync when multithreaded.
    import pyfuse3  # type: ignore[import-not-found]
    import trio  # type: ignore[import-not-found, unused-ignore]

    sync_flags = os.O_SYNC | os.O_DSYNC
    paths: dict[int, str] = {pyfuse3.ROOT_INODE: ""}  # FUSE inode -> mount-relative path
    fds: dict[int, tuple[int, bool]] = {}  # handle -> (live fd, every write synced)

    def inode_of(info: os.stat_result, rel: str) -> int:
        ino = pyfuse3.ROOT_INODE if rel == "" else info.st_ino
        paths[ino] = rel
        return int(ino)

    def attrs(rel: str, fd: int | None = None) -> Any:
        info = os.fstat(fd) if fd is not None else os.lstat(lazy.path(rel))
        entry = pyfuse3.EntryAttributes()
        for name in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size"):
            setattr(entry, name, getattr(info, name))
        entry.st_blksize, entry.st_blocks = info.st_blksize, info.st_blocks
        entry.st_atime_ns, entry.st_mtime_ns = info.st_atime_ns, info.st_mtime_ns
        entry.st_ctime_ns = info.st_ctime_ns
        entry.st_ino = inode_of(info, rel)
        entry.attr_timeout = entry.entry_timeout = 0  # a drop must show at once
        return entry

    def child(parent: int, name: bytes) -> str:
        return os.path.join(paths[parent], os.fsdecode(name)).lstrip("/")

    def errors(call: Callable[[], _T]) -> _T:
        try:
            return call()
        except OSError as problem:
            raise pyfuse3.FUSEError(problem.errno or errno.EIO) from None

    def moved(old: str, new: str) -> None:
        for ino, rel in list(paths.items()):
            if rel == old or rel.startswith(old + "/"):
                paths[ino] = new + rel[len(old) :]

    class LazyOps(pyfuse3.Operations):  # type: ignore[misc]
        enable_writeback_cache = False

        async def lookup(self, parent: int, name: bytes, ctx: Any = None) -> Any:
            return errors(lambda: attrs(child(parent, name)))

        async def getattr(self, inode: int, ctx: Any = None) -> Any:
            return errors(lambda: attrs(paths[inode]))

        async def setattr(self, inode: int, attr: Any, fields: Any, fh: Any, ctx: Any) -> Any:
            rel = paths[inode]
            target = lazy.path(rel)

            def change() -> Any:
                if fields.update_size:
                    info = os.lstat(target)
                    if attr.st_size > info.st_size:
                        lazy.check_space()
                    os.truncate(target, attr.st_size)
                    lazy.resized(info.st_ino, info.st_size, attr.st_size)
                if fields.update_mode:
                    os.chmod(target, stat.S_IMODE(attr.st_mode))
                    lazy.changed_dir(rel)
                if fields.update_uid or fields.update_gid:
                    os.lchown(
                        target,
                        attr.st_uid if fields.update_uid else -1,
                        attr.st_gid if fields.update_gid else -1,
                    )
                if fields.update_atime or fields.update_mtime:
                    info = os.lstat(target)
                    os.utime(
                        target,
                        ns=(
                            attr.st_atime_ns if fields.update_atime else info.st_atime_ns,
                            attr.st_mtime_ns if fields.update_mtime else info.st_mtime_ns,
                        ),
                        follow_symlinks=False,
                    )
                return attrs(rel)

            return errors(change)

        async def readlink(self, inode: int, ctx: Any) -> bytes:
            return errors(lambda: os.fsencode(os.readlink(lazy.path(paths[inode]))))

        async def opendir(self, inode: int, ctx: Any) -> int:
            return inode

        async def readdir(self, inode: int, start: int, token: Any) -> None:
            rel = paths[inode]
            names = errors(lambda: sorted(os.listdir(lazy.path(rel))))
            for index, name in enumerate(names[start:], start + 1):
                try:
                    entry = attrs(os.path.join(rel, name).lstrip("/"))
                except OSError:
                    continue
                if not pyfuse3.readdir_reply(token, os.fsencode(name), entry, index):
                    break

        async def releasedir(self, fh: int) -> None:
            return None

        async def fsyncdir(self, fh: int, datasync: bool) -> None:
            await trio.sleep(lazy.fsync_delay())
            errors(lambda: lazy.fsync_dir(paths[fh]))

        async def mkdir(self, parent: int, name: bytes, mode: int, ctx: Any) -> Any:
            rel = child(parent, name)

            def make() -> Any:
                lazy.check_space()
                os.mkdir(lazy.path(rel), mode)
                lazy.created(rel)
                return attrs(rel)

            return errors(make)

        async def mknod(self, parent: int, name: bytes, mode: int, rdev: int, ctx: Any) -> Any:
            rel = child(parent, name)

            def make() -> Any:
                lazy.check_space()
                os.mknod(lazy.path(rel), mode, rdev)
                lazy.created(rel)
                return attrs(rel)

            return errors(make)

        async def symlink(self, parent: int, name: bytes, target: bytes, ctx: Any) -> Any:
            rel = child(parent, name)

            def make() -> Any:
                lazy.check_space()
                os.symlink(os.fsdecode(target), lazy.path(rel))
                lazy.created(rel)
                return attrs(rel)

            return errors(make)

        async def link(self, inode: int, parent: int, name: bytes, ctx: Any) -> Any:
            rel = child(parent, name)

            def make() -> Any:
                os.link(lazy.path(paths[inode]), lazy.path(rel), follow_symlinks=False)
                lazy.created(rel)
                return attrs(rel)

            return errors(make)

        async def unlink(self, parent: int, name: bytes, ctx: Any) -> None:
            rel = child(parent, name)
            errors(lambda: os.unlink(lazy.path(rel)))
            lazy.changed_dir(rel)

        async def rmdir(self, parent: int, name: bytes, ctx: Any) -> None:
            rel = child(parent, name)
            errors(lambda: os.rmdir(lazy.path(rel)))
            lazy.changed_dir(rel)

        async def rename(
            self, old_parent: int, old: bytes, new_parent: int, new: bytes, flags: int, ctx: Any
        ) -> None:
            if flags:
                raise pyfuse3.FUSEError(errno.EINVAL)
            source, target = child(old_parent, old), child(new_parent, new)

            def move() -> None:
                os.rename(lazy.path(source), lazy.path(target))
                lazy.changed_dir(source)
                if os.path.dirname(source) != os.path.dirname(target):
                    lazy.changed_dir(target)
                moved(source, target)

            errors(move)

        def _opened(self, rel: str, flags: int, mode: int = 0o644) -> int:
            clean = flags & ~(os.O_APPEND | sync_flags)
            if clean & os.O_ACCMODE == os.O_WRONLY:  # an fsync reads what it copies
                clean = clean & ~os.O_ACCMODE | os.O_RDWR
            try:
                before: int | None = os.lstat(lazy.path(rel)).st_size
            except FileNotFoundError:
                before = None
            if before is None and flags & os.O_CREAT:
                lazy.check_space()
            fd = os.open(lazy.path(rel), clean, mode)
            if before is None:
                lazy.created(rel)
            elif flags & os.O_TRUNC and before:
                lazy.resized(os.fstat(fd).st_ino, before, 0)
            fds[fd] = (fd, bool(flags & sync_flags))
            return fd

        async def open(self, inode: int, flags: int, ctx: Any) -> Any:
            fd = errors(lambda: self._opened(paths[inode], flags))
            return pyfuse3.FileInfo(fh=fd)

        async def create(self, parent: int, name: bytes, mode: int, flags: int, ctx: Any) -> Any:
            rel = child(parent, name)
            fd = errors(lambda: self._opened(rel, flags | os.O_CREAT, mode))
            return pyfuse3.FileInfo(fh=fd), attrs(rel, fd)

        async def read(self, fh: int, offset: int, size: int) -> bytes:
            return errors(lambda: os.pread(fh, size, offset))

        async def write(self, fh: int, offset: int, buf: bytes) -> int:
            def put() -> int:
                lazy.check_space()
                written = os.pwrite(fh, buf, offset)
                lazy.wrote(fh, offset, written)
                return written

            written = errors(put)
            if fds[fh][1]:  # O_SYNC or O_DSYNC: every write is an fsync too
                await self.fsync(fh, False)
            return written

        async def fsync(self, fh: int, datasync: bool) -> None:
            await trio.sleep(lazy.fsync_delay())
            errors(lambda: lazy.fsync(fh))

        async def flush(self, fh: int) -> None:
            return None

        async def release(self, fh: int) -> None:
            fds.pop(fh, None)
            os.close(fh)

        async def statfs(self, ctx: Any) -> Any:
            info = os.statvfs(lazy.live)
            out = pyfuse3.StatvfsData()
            for name in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail"):
                setattr(out, name, getattr(info, name))
            out.f_files, out.f_ffree, out.f_favail = info.f_files, info.f_ffree, info.f_favail
            out.f_namemax = info.f_namemax
            return out

    def after_drop() -> None:
        # The rebuilt tree has new inodes: forget the old paths, drop the kernel's cached pages.
        for ino in [ino for ino in paths if ino != pyfuse3.ROOT_INODE]:
            del paths[ino]
            with contextlib.suppress(OSError):  # the kernel had forgotten it already
                pyfuse3.invalidate_inode(ino)

    lazy.after_drop = after_drop
    options = set(pyfuse3.default_options) | {"fsname=lazyfs", "allow_other"}
    options.discard("default_permissions")
    ready_read, ready_write = os.pipe()
    if os.fork():  # the caller returns once the mount is up (or failed), like a daemon
        os.close(ready_write)
        status = os.read(ready_read, 4096).decode()
        if status != "ok":
            raise SystemExit(f"lazyfs: cannot mount {mountpoint}: {status or 'it died'}")
        return
    os.close(ready_read)
    os.setsid()
    log = os.open(os.path.join(state, "lazyfs.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for stream in (0, 1, 2):
        os.dup2(log if stream else os.open(os.devnull, os.O_RDONLY), stream)
    try:
        pyfuse3.init(LazyOps(), mountpoint, options)
    except (OSError, RuntimeError) as problem:
        os.write(ready_write, f"{problem} (the node needs /dev/fuse and CAP_SYS_ADMIN)".encode())
        os._exit(1)
    control = listen(os.path.join(state, CONTROL))
    threading.Thread(target=lazy.serve, args=(control,), daemon=True).start()
    os.write(ready_write, b"ok")
    os.close(ready_write)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=False)


def state_of(mountpoint: str) -> str:
    """The state directory of the lazy file system mounted at ``mountpoint`` on a node."""
    return os.path.join(STATE_ROOT, mountpoint.strip("/").replace("/", "_") or "root")


def ask_all(request: dict[str, Any]) -> dict[str, Any]:
    """Send ``request`` to every lazy file system mounted on this node: answers by mountpoint."""
    answers: dict[str, Any] = {}
    names = sorted(os.listdir(STATE_ROOT)) if os.path.isdir(STATE_ROOT) else []
    for name in names:
        state = os.path.join(STATE_ROOT, name)
        if not os.path.exists(os.path.join(state, CONTROL)):
            continue
        with open(os.path.join(state, "mountpoint")) as recorded:
            mountpoint = recorded.read()
        try:
            answers[mountpoint] = ask(state, request)
        except OSError as problem:
            answers[mountpoint] = {"ok": False, "error": f"its control socket: {problem}"}
    return answers


def mount(mountpoint: str, state: str, metadata: str) -> None:  # pragma: no cover - on a node
    """Mount a new lazy file system over ``mountpoint``, its state in ``state`` (an old one
    there is unmounted and forgotten); returns once it serves."""
    subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)
    if os.path.exists(state):
        shutil.rmtree(state)
    os.makedirs(state)
    with open(os.path.join(state, "mountpoint"), "w") as recorded:
        recorded.write(mountpoint)
    lazy = Lazy(state, metadata)
    lazy.start(mountpoint)
    _fuse_main(lazy, mountpoint, state)


_USAGE: Final = (
    "usage: lazyfs.py mount MOUNTPOINT [--state DIR] [--metadata journal|strict] | "
    "lazyfs.py ask REQUEST_JSON"
)


def main(argv: Sequence[str] | None = None) -> None:  # pragma: no cover - on a node
    """``mount MOUNTPOINT [--state DIR] [--metadata journal|strict]`` mounts one (state under
    :data:`STATE_ROOT` by default); ``ask REQUEST_JSON`` asks every one of this node and prints
    the answers by mountpoint as JSON."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = {"--metadata": "journal", "--state": ""}
    for option in options:
        if option in args:
            at = args.index(option)
            options[option] = args[at + 1]
            del args[at : at + 2]
    if len(args) == 2 and args[0] == "ask":
        print(json.dumps(ask_all(json.loads(args[1]))))
        return
    if len(args) != 2 or args[0] != "mount":
        raise SystemExit(_USAGE)
    mountpoint = os.path.abspath(args[1])
    state = os.path.abspath(options["--state"] or state_of(mountpoint))
    mount(mountpoint, state, options["--metadata"])


if __name__ == "__main__":
    main()
