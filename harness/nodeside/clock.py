"""Clock faults in one process: libfaketime's control file, its arithmetic, the node-side writer.

A process that can take clock faults is started under libfaketime (Debian's ``faketime``
package) by :func:`preloaded`, with a control file of its own. Measured on the node image
(bookworm, libfaketime 0.9.10, python3 and OpenJDK 17 in a container):

- With ``FAKETIME_NO_CACHE=1`` the process reads its control file at every clock call, so a
  rewrite takes effect at its next clock read (well under 1 ms for a busy process).
- ``time.time()`` and ``time.monotonic()`` (Java: ``currentTimeMillis``, ``nanoTime``) both follow
  it: under the preload the monotonic clock reads the same epoch-based value as the wall clock.
  Both move: leaving the monotonic clock alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``) made every
  ``time.sleep`` of a preloaded Python process fail with EINVAL (measured; wolfcw/libfaketime#426).
- The price, measured in python3 3.11 under the preload, with no control file, after a step of
  +30 s or -30 s and at 0.5x and 2x alike: every timed wait on a Python lock never times out
  (``Lock.acquire(timeout=)``, ``Event.wait``, ``Condition.wait``, ``Queue.get(timeout=)``,
  ``Thread.join(timeout=)``: each returns only when woken). CPython takes the deadline from the
  faked monotonic clock, which reads seconds since the epoch, and waits in ``sem_clockwait``,
  which libfaketime 0.9.10 does not intercept (wolfcw/libfaketime#390), so the kernel waits for a
  monotonic clock decades ahead. ``time.sleep``, ``select``, ``poll``, ``epoll`` and socket
  timeouts return on time. An agent's renewals (``Event.wait(ttl / 3)``) and a client's keepalives
  would stop. Hence the rule: **a Python process whose lease logic times itself with lock waits
  moves its own clock** (the holders' agents: :func:`preloaded` without a library, then
  :func:`follow_control_file` in the process; same control file, same formats, same writer);
  libfaketime only for a process whose monotonic clock stays real (wall only) or that never
  waits on a Python lock with a timeout (a clock probe's ``select`` loop), and for the JVM.
- ``+D x1`` makes the clock real time plus ``D`` seconds, exactly, whenever it is written.
- ``+D xR`` with a rate ``R`` other than 1 applies the rate from the process's start, so writing
  it jumps the clock: a rate window is written as ``@T xR`` (with ``FAKETIME_FMT=%s``), which
  makes the clock read ``T`` at the process's next clock read and run at ``R`` from there (an
  ``@`` resets libfaketime's start). ``T`` is the clock's value at the write, so the only jump is
  backwards by the time between the write and that next read; the writer reads the process's
  clock right after writing (:func:`main`), which bounds it.
- Go programs (etcd) read the clock through the vDSO without libc: the preload changes nothing.
- A process whose malloc reads the clock at its start cannot start under libfaketime, which looks
  the real clock functions up with ``dlsym``, which allocates: Debian bookworm's redis-server
  7.0 links jemalloc and hangs or exits on "recursive calls to clock_gettime()"
  (wolfcw/libfaketime#130; measured with and without a control file, wall only or not). Such a
  daemon runs under fencecheck's own shim instead (``fakeclock.c`` beside this file, compiled on
  the node: :data:`SHIM`): it reads the same control file in the same formats (``+D x1``,
  ``@T xR``) from the same environment, through raw system calls, allocating nothing; it moves
  ``clock_gettime``, ``gettimeofday`` and ``time``, and nothing else (no timers, no sleeps).
- A daemon that sleeps only in timed waits (the reference lock server) can run **wall only**
  (``FAKETIME_DONT_FAKE_MONOTONIC=1``, read once at its start): its monotonic clock stays real,
  as an NTP step leaves ``CLOCK_MONOTONIC`` alone, and its timed waits time out (measured). Its
  ``time.sleep`` fails with EINVAL once the file holds an offset (measured), hence not the agents.

:class:`ClockState` is the pure arithmetic (a process's fake clock as a line through one anchor);
:func:`control_text` turns a state into the file's text, :func:`parse_control` reads it back as
libfaketime and the shim do (an ``@`` anchored at a real time read after the file: a process
preempted between reading the real clock and reading a changed file would otherwise anchor
before the write and run ahead of its schedule by the rate times that wait). :func:`apply` runs
on the node (this file is sent whole as ``python3 -c``): it changes the clock at the node's own
real time and reads the process's clock back.
Stdlib only, like all node-side code.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ASK_ENV",
    "CONTROL_DIR",
    "PRELOAD",
    "SHIM",
    "ClockState",
    "OwnClock",
    "Preload",
    "apply",
    "changed",
    "control_file",
    "control_text",
    "follow_control_file",
    "main",
    "parse_control",
    "preload_in",
    "preload_of",
    "preloaded",
]

PRELOAD: Final = "/usr/$LIB/faketime/libfaketime.so.1"
"""libfaketime as Debian installs it; the dynamic loader expands ``$LIB`` to the multiarch
directory (``lib/x86_64-linux-gnu``), so one path serves every architecture."""
SHIM: Final = "/opt/fencecheck/clock/fakeclock.so"
"""fencecheck's own clock shim (``fakeclock.c``), where :func:`systems.deploy.clock_shim`
compiles it on a node, for the daemons libfaketime cannot start (see the module docstring)."""
CONTROL_DIR: Final = "/var/lib/fencecheck/clock"
"""Where each clock-faultable daemon's control file lives, one per daemon name."""
ASK_ENV: Final = "FENCECHECK_CLOCK_ASK"
"""The environment variable (in the daemon's command line) naming how to read its own clock:
``wire:HOST:PORT`` (a :mod:`harness.nodeside.wire` server's ``clock`` request) or
``redis:HOST:PORT[:FILE]`` (Redis ``TIME``, authenticated with the password held in ``FILE`` on
the node, the run's secret: never in a command line)."""
_FILE_ENV: Final = "FAKETIME_TIMESTAMP_FILE"
_WALL_ONLY_ENV: Final = "FAKETIME_DONT_FAKE_MONOTONIC"
_PRELOAD_ENV: Final = "LD_PRELOAD"
# The confirmed rate is the two readings' fake distance over their real one; each reading is
# uncertain by its round trip, so the gap must dwarf it: under load 50 ms read 2.87 at 4x.
_RATE_GAP_S: Final = 0.25
_ASK_TIMEOUT_S: Final = 2.0


@dataclass(frozen=True, slots=True)
class ClockState:
    """A process's fake clock: it read ``anchor_fake`` at real time ``anchor_real`` and runs at
    ``rate`` (real seconds to fake seconds) from there. The default is the real clock."""

    anchor_real: float = 0.0
    anchor_fake: float = 0.0
    rate: float = 1.0

    def __post_init__(self) -> None:
        if not self.rate > 0:
            raise ValueError(f"clock rate {self.rate!r} must be above 0 (e.g. 0.5 or 2)")

    def fake_at(self, real: float) -> float:
        """What the process's clock reads at real time ``real``."""
        return self.anchor_fake + (real - self.anchor_real) * self.rate

    def offset_at(self, real: float) -> float:
        """How far the process's clock is ahead of the real one at ``real`` (behind: negative)."""
        return self.fake_at(real) - real

    def stepped(self, by: float, real: float) -> ClockState:
        """The clock after jumping ``by`` seconds (signed) at real time ``real``, same rate."""
        return ClockState(real, self.fake_at(real) + by, self.rate)

    def at_rate(self, rate: float, real: float) -> ClockState:
        """The clock running at ``rate`` from real time ``real`` on, without a jump there."""
        return ClockState(real, self.fake_at(real), rate)

    def to_json(self) -> dict[str, float]:
        """The state as JSON data."""
        return {"anchor_real": self.anchor_real, "anchor_fake": self.anchor_fake, "rate": self.rate}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClockState:
        """Rebuild a state from :meth:`to_json` output."""
        return cls(float(data["anchor_real"]), float(data["anchor_fake"]), float(data["rate"]))


def control_text(state: ClockState, real: float) -> str:
    """The control file's text that puts the process on ``state``, written at real time ``real``.

    At rate 1 the offset form is exact whenever it is read; at another rate the ``@`` form anchors
    the clock at its value at the write (a rate in the offset form would count from the process's
    start). The sign is explicit: libfaketime reads ``+-3`` as 0.
    """
    if state.rate == 1.0:
        return f"{state.offset_at(real):+.6f} x1"
    return f"@{state.fake_at(real):.6f} x{state.rate:.6g}"


def control_file(name: str) -> str:
    """The control file of daemon ``name``."""
    return f"{CONTROL_DIR}/{name}"


@dataclass(frozen=True, slots=True)
class Preload:
    """How a daemon was started under libfaketime: its control file, how to ask its clock, and
    whether only its wall clock moves (``wall_only``; else its monotonic clock too)."""

    control: str
    ask: str
    wall_only: bool = False


def preloaded(
    name: str,
    argv: Sequence[str],
    ask: str,
    wall_only: bool = False,
    library: str | None = PRELOAD,
) -> list[str]:
    """``argv`` run under libfaketime (or ``library``: :data:`SHIM`, which reads the same
    settings; ``None``: no preload, a Python process that moves its own clock with
    :func:`follow_control_file`) with daemon ``name``'s control file.

    The settings go in the command line (through ``env``, which execs: same pid), not in the
    environment of the start: a restart runs the recorded command line again, and a nemesis reads
    them back from it (:func:`preload_of`). ``ask`` says how to read the daemon's own clock (see
    :data:`ASK_ENV`). ``wall_only``: the monotonic clock stays real (see the module
    documentation for who can afford it). Until its file is written the clock is the real one.
    """
    return [
        "env",
        *((f"{_PRELOAD_ENV}={library}",) if library is not None else ()),
        f"{_FILE_ENV}={control_file(name)}",
        "FAKETIME_NO_CACHE=1",
        "FAKETIME_FMT=%s",
        *((f"{_WALL_ONLY_ENV}=1",) if wall_only else ()),
        f"{ASK_ENV}={ask}",
        *argv,
    ]


def preload_of(argv: Sequence[str]) -> Preload | None:
    """The preload settings of a command line made by :func:`preloaded` (``None``: not one)."""
    if not argv or argv[0] != "env":
        return None
    words = []
    for word in argv[1:]:
        if "=" not in word:
            break
        words.append(word)
    return preload_in(words)


def preload_in(environment: Sequence[str]) -> Preload | None:
    """The preload settings among ``KEY=VALUE`` words (a command line's or ``/proc/PID/environ``'s;
    ``None``: the process is not under libfaketime with a control file)."""
    settings = dict(word.partition("=")[::2] for word in environment if "=" in word)
    if _FILE_ENV not in settings:
        return None
    wall_only = settings.get(_WALL_ONLY_ENV, "0") not in ("", "0")
    return Preload(settings[_FILE_ENV], settings.get(ASK_ENV, ""), wall_only)


def parse_control(text: str, real: float, started: float) -> ClockState:
    """The clock a control file's ``text`` puts a process on, read at real time ``real`` by a
    process whose first clock read was at ``started``, as libfaketime and the shim read the forms
    fencecheck writes: ``+D x1`` (``D`` ahead whenever read), ``@T xR`` (``T`` at this read, rate
    ``R`` from it), ``+D xR`` (``R`` other than 1: ``D`` ahead at the first read, rate ``R`` since);
    empty or unreadable, the real clock. ``real`` must be read after ``text`` (see the module
    documentation)."""
    words = text.split()
    try:
        rate = float(words[1][1:]) if len(words) > 1 and words[1].startswith("x") else 1.0
        if not rate > 0:
            rate = 1.0
        if words and words[0].startswith("@"):
            return ClockState(real, float(words[0][1:]), rate)
        if words and words[0][:1] in ("+", "-"):
            return ClockState(started, started + float(words[0]), rate)
    except ValueError:
        pass  # what libfaketime cannot read leaves the clock real
    return ClockState()


class OwnClock:
    """The clock of a Python process that moves it itself, as its control file says (what
    libfaketime does to a preloaded one, read the same way: the file at every clock read).

    Only the ``time`` module's clocks move (``time``, ``time_ns``, and unless ``wall_only``
    ``monotonic``, ``monotonic_ns``, ``perf_counter``, ``perf_counter_ns``, by the same offset):
    what the process's Python code, its lease logic and its clients' timers read. The kernel's
    clocks stay real, so every timed wait returns. As on a machine whose clock runs slow or fast
    (its timers run on that clock), ``time.sleep`` and ``threading.Condition.wait`` (hence
    ``Event.wait``, ``Queue.get``, ``Semaphore.acquire``) wait the time asked for by this clock:
    at 0.25x a renewal every TTL/3 comes every 4/3 TTL of real time, and the lease lapses between
    two. A step leaves waits alone (a wait on the monotonic clock does not see an NTP step), and
    so does ``wall_only``. ``select``, socket timeouts, a bare ``Lock.acquire(timeout=)`` and C
    code (``datetime.now``, an extension) keep the real clock.
    """

    def __init__(self, path: str, wall_only: bool = False) -> None:
        self.path = path
        self.wall_only = wall_only
        # The real clocks, bound before the module's names are replaced.
        self._real_ns = time.time_ns
        self._monotonic_ns = time.monotonic_ns
        self._perf_ns = time.perf_counter_ns
        self._started = time.time()
        self._text = ""
        self._state = ClockState()
        # Reentrant: a signal handler that reads the clock may run while this thread holds it.
        self._lock = threading.RLock()

    def offset_ns(self) -> tuple[int, int]:
        """``(real wall clock, how far this clock is ahead of it)`` now, in nanoseconds."""
        with self._lock:
            try:
                with open(self.path) as control:
                    text = control.read()
            except OSError:
                text = ""
            real_ns = self._real_ns()  # after the file: never an anchor before a write
            real = real_ns / 1e9
            if text != self._text:
                self._text = text
                self._state = parse_control(text, real, self._started)
            return real_ns, round(self._state.offset_at(real) * 1e9)

    def rate(self) -> float:
        """The rate this clock runs at now (1 for ``wall_only``: its timers stay real)."""
        self.offset_ns()
        return 1.0 if self.wall_only else self._state.rate

    def time_ns(self) -> int:
        """The process's wall clock (``time.time_ns``)."""
        real_ns, ahead = self.offset_ns()
        return real_ns + ahead

    def time(self) -> float:
        """The process's wall clock (``time.time``)."""
        return self.time_ns() / 1e9

    def monotonic_ns(self) -> int:
        """The process's monotonic clock: the real one moved as far as the wall clock."""
        return self._monotonic_ns() + (0 if self.wall_only else self.offset_ns()[1])

    def monotonic(self) -> float:
        """The process's monotonic clock (``time.monotonic``)."""
        return self.monotonic_ns() / 1e9

    def perf_counter_ns(self) -> int:
        """The process's performance counter, moved as the monotonic clock."""
        return self._perf_ns() + (0 if self.wall_only else self.offset_ns()[1])

    def perf_counter(self) -> float:
        """The process's performance counter (``time.perf_counter``)."""
        return self.perf_counter_ns() / 1e9

    def install(self) -> None:
        """Replace the ``time`` module's clocks with this one's, for the whole process: call it
        before importing code that binds them (``from time import monotonic``)."""
        names = ["time", "time_ns"]
        if not self.wall_only:
            names += ["monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"]
        for name in names:
            setattr(time, name, getattr(self, name))
        sleep, wait = time.sleep, threading.Condition.wait

        def own_sleep(seconds: float) -> None:
            sleep(seconds / self.rate())

        def own_wait(condition: threading.Condition, timeout: float | None = None) -> bool:
            return wait(condition, None if timeout is None else timeout / self.rate())

        time.sleep = own_sleep  # type: ignore[assignment]
        threading.Condition.wait = own_wait  # type: ignore[method-assign, assignment]


def follow_control_file(environ: dict[str, str] | None = None) -> OwnClock | None:
    """In a process :func:`preloaded` started without a library: move its own clock from now on
    (:class:`OwnClock`, installed). ``None`` (nothing changed): no control file named, or a
    library preloaded (it moves the clock already)."""
    environ = dict(os.environ) if environ is None else environ
    found = preload_in([f"{key}={value}" for key, value in environ.items()])
    if found is None or environ.get(_PRELOAD_ENV):
        return None
    own = OwnClock(found.control, found.wall_only)
    own.install()
    return own


def _ask_clock(ask: str) -> float:
    """The process's own clock (seconds since the epoch, as it reads them), through ``ask``."""
    kind, host, port, *secret = ask.split(":")
    password = _read_secret(secret[0]) if kind == "redis" and secret else None
    with socket.create_connection((host, int(port)), timeout=_ASK_TIMEOUT_S) as connection:
        reader = connection.makefile("rb")
        if kind == "wire":
            connection.sendall(b'{"op":"clock"}\n')
            return float(json.loads(reader.readline())["wall"])
        if kind == "redis":
            if password is not None:
                connection.sendall(_resp(b"AUTH", password))
                answer = reader.readline()
                if not answer.startswith(b"+OK"):
                    raise ValueError(f"Redis refused the run's password: {answer!r}")
            connection.sendall(_resp(b"TIME"))
            values = [reader.readline() for _ in range(5)]  # *2, $n, seconds, $n, microseconds
            return int(values[2]) + int(values[4]) / 1e6
    raise ValueError(
        f"unknown clock probe {ask!r}; expected wire:HOST:PORT or redis:HOST:PORT[:FILE]"
    )


def _read_secret(path: str) -> bytes:
    with open(path, "rb") as secret:
        return secret.read().strip()


def _resp(*words: bytes) -> bytes:
    """One Redis command in RESP."""
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


def _reading(ask: str) -> list[float]:
    """``[real midpoint, the process's clock, round trip]`` of one read of the process's clock."""
    before = time.time()
    fake = _ask_clock(ask)
    after = time.time()
    return [(before + after) / 2, fake, after - before]


def changed(state: ClockState, change: str, amount: float, real: float) -> ClockState:
    """``state`` after ``change`` at real time ``real``: ``step`` by ``amount`` seconds (signed),
    ``rate`` to ``amount`` without a jump, or ``reset`` to the real clock."""
    if change == "step":
        return state.stepped(amount, real)
    if change == "rate":
        return state.at_rate(amount, real)
    if change == "reset":
        return ClockState()
    raise ValueError(f"unknown clock change {change!r}; expected step, rate or reset")


def apply(path: str, change: str, amount: float, ask: str) -> dict[str, Any]:
    """Change the clock of the process whose control file is ``path`` now, then read its clock
    back through ``ask`` (twice, apart, at a rate other than 1): what the nemesis confirms against.

    Runs on the node, not preloaded, so that its own clock is the real one. The state lives beside
    the control file (``PATH.state``), so every controller, a run's or a manual command's, changes
    the clock from where it is. One change at a time per control file (an exclusive ``flock`` on
    ``PATH.lock``, held through the readings): two overlapping windows on one process, a step
    inside a rate, would otherwise both start from the same state, one change lost, and each
    reading back a clock the other had moved meanwhile.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(f"{path}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            with open(f"{path}.state") as saved:
                before = ClockState.from_json(json.load(saved))
        except FileNotFoundError:
            before = ClockState()
        real = time.time()
        after = changed(before, change, amount, real)
        text = control_text(after, real)
        # Renames are atomic: the process never reads a half-written file.
        for target, content in ((path, text), (f"{path}.state", json.dumps(after.to_json()))):
            with open(f"{target}.new", "w") as out:
                out.write(content)
            os.replace(f"{target}.new", target)
        readings = [_reading(ask)] if ask else []
        if ask and after.rate != 1.0:
            time.sleep(_RATE_GAP_S)
            readings.append(_reading(ask))
    return {
        "before": before.to_json(),
        "after": after.to_json(),
        "written_at": real,
        "text": text,
        "readings": readings,
    }


def main(argv: Sequence[str]) -> None:
    """``PATH step|rate|reset AMOUNT ASK``: :func:`apply`, its result printed as JSON."""
    if len(argv) != 4:
        raise SystemExit("usage: clock.py PATH step|rate|reset AMOUNT ASK")
    path, change, amount, ask = argv
    print(json.dumps(apply(path, change, float(amount), ask)))


if __name__ == "__main__":
    main(sys.argv[1:])
