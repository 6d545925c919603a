"""The fencecheck agent: a lock holder on a worker node, driven by the controller over TCP.

The harness starts one agent on each worker node (the system adapter never does)::

    python3 /opt/fencecheck/agent.py --port 7000 --node w1 --client /opt/fencecheck/client.py \
        --config '{"ttl": 2.0, "flaws": [], "client": {...}}'

It is stdlib-only (it imports only :mod:`harness.nodeside`'s ``wire``, ``client`` and ``clock``,
copied next to it) because nodes have no fencecheck installation. In a run with clock faults it
moves its own clock as its control file says (:func:`harness.nodeside.clock.follow_control_file`,
before the client is loaded): under libfaketime its renewals' timed waits would never return.
``--client`` names the system's client module, which must define a class ``Client(config)``
implementing :class:`harness.nodeside.client.HolderClient`; it gets the ``client`` object of the
config plus ``node``.

The agent behaves as a careful holder that a fence is still needed for: it renews its lease every
TTL/3, checks the lease by its own monotonic clock before each write, then does its critical
section (``work_ms``), then sends the write with the epoch inside the request. A pause (SIGSTOP,
freezer, throttling) inside the critical section outlives the lease, and the write still goes out
on SIGCONT: that is the stale write the harness hunts.

Wire protocol (newline-delimited JSON, one response line per request line, any number of
concurrent connections; a ``req`` field is echoed back):

- ``{"op":"acquire","lock":L,"wait":S}`` -> ``{"ok":true,"epoch":N}`` (with ``"waited":NS``,
  nanoseconds the service held the request before the lease began, and ``"grant_seq":G``, the
  service's own order of grants, and ``"lease_ended":{"after":NS,"how":H,"grant_seq":G}`` when
  the holder's session saw its lease end before the grant was answered: the agent then gives
  that lease back at once and holds nothing); ``{"ok":false,"error":
  "timeout"}``; ``{"ok":false,"error":"unavailable"}`` (the lock service was unreachable: not
  granted); ``{"ok":false,"error":"unavailable","info":true}`` (unknown whether granted). A lease
  this agent already holds on ``L`` is released first.
- ``{"op":"release","lock":L,"epoch":N?}`` -> ``{"ok":true}``; ``{"ok":false,"error":"not-held"}``.
- ``{"op":"write","lock":L,"epoch":N,"sink":S,"key":K,"id":I,"prev":P,"work_ms":W,
  "check_lease":B}`` (``check_lease`` false: the rest of a unit already checked, sent unchecked) ->
  ``{"ok":true}`` (with ``"seq":Q`` when the sink reports its acceptance order). A write
  spanning keys adds ``"also":[{"key":K,"id":I},...]`` (its other items, written atomically with
  the first through the client's optional ``write_keys``; a client without it answers
  ``bad-request``), and its ``ok`` answer repeats ``also`` with each item's ``seq``;
  ``{"ok":false,"error":"not-held"}`` (no lease of that epoch here) or ``"lease-expired"`` (both
  without sending); ``{"ok":false,"error":"stale-epoch"}`` (refused by the fence: the agent gives
  the lease up unless ``retry-on-reject``); ``{"ok":false,"error":"unavailable"}`` (not sent);
  ``{"ok":false,"error":"unavailable","info":true}`` (unknown whether it landed: ``info`` marks an
  unknown outcome, the error word says the service did not answer).
- ``{"op":"read","sink":S,"key":K}`` -> ``{"ok":true,"entries":[{"id":I,"epoch":N,"seq":Q?},...]}``;
  ``{"ok":false,"error":"unavailable"}`` (no answer: a plain read changes nothing, so it failed).
- ``{"op":"read","sink":S,"key":K,"lock":L,"epoch":N}``: a *fenced* read, which the sink treats
  like a write for its highest-seen epoch. Checked against the lease like a write (``not-held``,
  ``lease-expired``, without sending); ``stale-epoch`` makes the agent give the lease up as a
  refused write does; no answer is ``{"ok":false,"error":"unavailable","info":true}`` (it may have
  raised the sink's mark).
- ``{"op":"holds"}`` -> ``{"ok":true,"node":W,"holds":{L:N,...},"working":[I,...]}``: the leases it
  believes valid, and the writes inside their critical section.
- ``{"op":"ping"}`` -> ``{"ok":true,"node":W,"pid":P}``.

A sink whose safety rests on time (``timed_sinks`` in the config: the unfenced sinks a lock-delay
protects) gets one more check, since the agent's own clock may run slow: it trusts that clock for
such a write only in the first half of the lease (half a TTL since the lease last started, by its
own clock, is at most a TTL of real time for a clock at half speed or faster); later in the lease
it first confirms the lease with the lock service (a renewal answered yes, which starts the lease
again), and sends nothing if the service says the lease is gone (``lease-expired``) or does not
answer (``unavailable``, not sent). A slower clock is left to the lock-delay.

Holder flaws (``flaws`` in the config, the harness's own mistakes, available with every system):
with ``retry-on-reject`` the agent keeps a lease whose write (or fenced read) was refused, and a
later write or fenced read with a refused epoch skips the lease check, as a client whose retry loop
sits below its lease check would: the runner's re-sent write reaches the sink again. With
``trust-own-timer`` it writes to a timed sink on its own clock's word alone, for the whole lease:
a clock that runs slow keeps it writing after the lease, and the lock-delay, ran out.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.nodeside import clock, wire
from harness.nodeside.client import (
    UNAVAILABLE,
    Accepted,
    Grant,
    HolderClient,
    LeaseEnd,
    Read,
    Refused,
    SpansKeys,
)

__all__ = [
    "HOLDER_FLAWS",
    "RETRY_ON_REJECT",
    "TRUST_OWN_TIMER",
    "Agent",
    "AgentConfig",
    "load_client",
    "main",
]

RETRY_ON_REJECT: Final = "retry-on-reject"
"""The holder flaw the agent itself carries out (see the module docstring)."""
TRUST_OWN_TIMER: Final = "trust-own-timer"
"""The holder flaw of writing to a timed sink without confirming the lease (module docstring)."""
HOLDER_FLAWS: Final = (RETRY_ON_REJECT, TRUST_OWN_TIMER)
"""The flaws this agent knows; the workload carries out the other holder flaws."""


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The agent's ``--config``: lease TTL (seconds), holder flaws, the client's own config, and
    the sinks whose safety rests on time (``timed_sinks``: see the module docstring)."""

    ttl: float
    flaws: frozenset[str] = frozenset()
    client: dict[str, Any] = field(default_factory=dict)
    timed_sinks: frozenset[str] = frozenset()

    @property
    def retry_on_reject(self) -> bool:
        """True when a refused write's epoch is kept and retried (the flaw of that name)."""
        return RETRY_ON_REJECT in self.flaws

    def to_json(self) -> str:
        """The ``--config`` text for this configuration."""
        data = {
            "ttl": self.ttl,
            "flaws": sorted(self.flaws),
            "client": self.client,
            "timed_sinks": sorted(self.timed_sinks),
        }
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AgentConfig:
        """Parse ``--config``; raises ``ValueError`` naming the bad field."""
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("the config must be a JSON object")
        ttl = raw.get("ttl")
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0:
            raise ValueError("'ttl' must be a positive number of seconds")
        flaws = raw.get("flaws", [])
        if not isinstance(flaws, list) or not all(isinstance(f, str) for f in flaws):
            raise ValueError("'flaws' must be a list of holder flaw names")
        unknown = sorted(set(flaws) - set(HOLDER_FLAWS))
        if unknown:
            raise ValueError(f"unknown holder flaw(s) {unknown}; the agent knows {HOLDER_FLAWS}")
        client = raw.get("client", {})
        if not isinstance(client, dict):
            raise ValueError("'client' must be a JSON object")
        timed = raw.get("timed_sinks", [])
        if not isinstance(timed, list) or not all(isinstance(t, str) for t in timed):
            raise ValueError("'timed_sinks' must be a list of sink names")
        return cls(float(ttl), frozenset(flaws), client, frozenset(timed))


@dataclass(slots=True)
class _Lease:
    lock: str
    epoch: int
    ttl: float
    renewed: float  # monotonic time the lease was last known to (re)start, by this agent's clock
    lost: bool = False
    stop: threading.Event = field(default_factory=threading.Event)

    def remaining(self, now: float) -> float:
        """Seconds of validity left by this agent's clock (<= 0 when expired or lost)."""
        return -1.0 if self.lost else self.renewed + self.ttl - now


_INFO: Final = {"ok": False, "error": UNAVAILABLE, "info": True}
_TRUSTED_SHARE: Final = 0.5
"""The share of a lease in which the agent trusts its own clock alone for a timed sink."""


class Agent:
    """The holder's state and the handlers of the wire protocol (see the module docstring)."""

    def __init__(self, node: str, client: HolderClient, config: AgentConfig) -> None:
        self.node = node
        self._client = client
        self._ttl = config.ttl
        self._retry_on_reject = config.retry_on_reject
        # Sinks written only after the lock service confirms the lease (none: trust-own-timer).
        self._confirmed_sinks = (
            frozenset() if TRUST_OWN_TIMER in config.flaws else config.timed_sinks
        )
        self._state = threading.Lock()
        self._leases: dict[str, _Lease] = {}
        self._refused: set[tuple[str, int]] = set()
        self._working: dict[str, str] = {}  # write id -> lock, while in the critical section
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "acquire": self._acquire,
            "release": self._release,
            "write": self._write,
            "read": self._read,
            "holds": self._holds,
            "ping": self._ping,
        }

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one protocol request."""
        handler = self._handlers.get(str(request.get("op")))
        if handler is None:
            raise wire.BadRequest(
                f"unknown op {request.get('op')!r}; one of {list(self._handlers)}"
            )
        return handler(request)

    def _acquire(self, request: dict[str, Any]) -> dict[str, Any]:
        lock = wire.text(request, "lock")
        wait = wire.number(request, "wait", 0.0)
        held = self._drop(lock)
        if held is not None:
            self._hand_back(lock, held.epoch, "acquiring it again")
        sent = time.monotonic()
        try:
            result = self._client.acquire(lock, self._ttl, wait)
        except Exception as problem:
            return {**_INFO, "message": str(problem)}
        if isinstance(result, Refused):
            return {"ok": False, "error": result.reason}
        if not isinstance(result, Grant):
            return {**_INFO, "message": _unknown_reason(result)}
        epoch = result.epoch
        reply: dict[str, Any] = {"ok": True, "epoch": epoch}
        if result.waited > 0:
            # How long the service held the request before the lease began, in the history's
            # unit: the checker takes the invoke plus this as the earliest the lease began.
            reply["waited"] = int(result.waited * 1e9)
        if result.grant_seq is not None:
            reply["grant_seq"] = result.grant_seq
        ended = result.lease_ended
        if ended is not None:
            # The holder's own evidence: the checker weighs the grant against the lease's end.
            reply["lease_ended"] = _lease_ended(ended)
            wire.log(f"lease {lock} epoch {epoch}: granted after the session saw its lease end")
            # A careful holder does not trust a lease its session saw end: it gives it back.
            threading.Thread(
                target=self._hand_back, args=(lock, epoch, "its session saw it end"), daemon=True
            ).start()
            return reply
        lease = _Lease(lock, epoch, self._ttl, sent + result.waited)
        with self._state:
            replaced = self._leases.get(lock)
            if replaced is not None:
                # A concurrent acquire (the controller retried after a timeout) got here first.
                replaced.stop.set()
            self._leases[lock] = lease
        threading.Thread(target=self._renew, args=(lease,), daemon=True).start()
        return reply

    def _renew(self, lease: _Lease) -> None:
        while not lease.stop.wait(lease.ttl / 3):
            sent = time.monotonic()
            try:
                renewed: bool | None = self._client.renew(lease.lock, lease.epoch)
            except Exception:
                renewed = None  # unknown: the lease may still run out by our own clock
            with self._state:
                if lease.stop.is_set():
                    return
                if renewed:
                    lease.renewed = max(lease.renewed, sent)
                elif renewed is False:
                    lease.lost = True
                    wire.log(f"lease {lease.lock} epoch {lease.epoch}: renewal refused, lost")
                    return
                if lease.remaining(time.monotonic()) <= 0:
                    lease.lost = True
                    wire.log(f"lease {lease.lock} epoch {lease.epoch}: expired by our clock, lost")
                    return

    def _drop(self, lock: str, epoch: int | None = None) -> _Lease | None:
        """Forget and stop renewing the lease on ``lock`` (only if it has ``epoch``, when given)."""
        with self._state:
            lease = self._leases.get(lock)
            if lease is None or (epoch is not None and lease.epoch != epoch):
                return None
            del self._leases[lock]
            lease.stop.set()
        return lease

    def _release(self, request: dict[str, Any]) -> dict[str, Any]:
        lock = wire.text(request, "lock")
        epoch = wire.integer(request, "epoch") if "epoch" in request else None
        lease = self._drop(lock, epoch)
        if lease is None:
            return {"ok": False, "error": "not-held"}
        try:
            released = self._client.release(lock, lease.epoch)
        except Exception as problem:
            return {**_INFO, "message": str(problem)}
        return {"ok": True} if released else {"ok": False, "error": "not-held"}

    def _lease_check(self, lock: str, epoch: int) -> tuple[str | None, str]:
        """Whether this holder may act under ``epoch`` of ``lock``: ``(refusal, note)``, the
        refusal ``not-held`` or ``lease-expired`` (else None) and a note for the log.

        Call with ``_state`` held. With ``retry_on_reject`` a refused epoch passes unchecked.
        """
        if self._retry_on_reject and (lock, epoch) in self._refused:
            return None, "retry of a refused epoch"
        lease = self._leases.get(lock)
        if lease is None or lease.epoch != epoch:
            return "not-held", ""
        left = lease.remaining(time.monotonic())
        if left <= 0:
            return "lease-expired", ""
        return None, f"lease valid {left:.3f}s"

    def _write(self, request: dict[str, Any]) -> dict[str, Any]:
        lock = wire.text(request, "lock")
        epoch = wire.integer(request, "epoch")
        sink = wire.text(request, "sink")
        key = wire.text(request, "key")
        write_id = wire.text(request, "id")
        work = wire.number(request, "work_ms", 0.0) / 1000
        also = _also(request)
        if also and not isinstance(self._client, SpansKeys):
            return {
                "ok": False,
                "error": "bad-request",
                "message": "this system's client cannot write several keys at once",
            }
        with self._state:
            if request.get("check_lease", True) is False:
                # The rest of a unit whose first write passed the check: a client fanning one
                # checked result out to several sinks does not look at its lease again.
                refusal, note = None, "continuing a checked unit"
            else:
                refusal, note = self._lease_check(lock, epoch)
            if refusal is not None:
                return {"ok": False, "error": refusal}
            confirm = self._needs_confirming(lock, sink, request.get("check_lease", True))
        if confirm:
            refusal, note = self._confirm(lock, epoch)
            if refusal is not None:
                return {"ok": False, "error": refusal}
        with self._state:
            self._working[write_id] = lock
        wire.log(
            f"write {write_id} {sink}/{key} epoch {epoch}: {note}, working {work * 1000:.0f} ms"
        )
        try:
            if work > 0:
                # The critical section: a pause here outlives the lease. (Not for no work: even
                # sleep(0) gives the CPU away, a wait of a whole time slice on a busy machine.)
                time.sleep(work)
            if also and isinstance(self._client, SpansKeys):
                items = [(key, write_id), *also]
                outcome = self._client.write_keys(lock, sink, items, epoch)
            else:
                outcome = self._client.write(lock, sink, key, write_id, epoch, request.get("prev"))
        except Exception as problem:
            return {**_INFO, "message": str(problem)}
        finally:
            with self._state:
                self._working.pop(write_id, None)
        if isinstance(outcome, Accepted):
            return _accepted(outcome, also)
        if not isinstance(outcome, Refused):
            return {**_INFO, "message": _unknown_reason(outcome)}
        if outcome.stale:
            self._fenced_off(lock, epoch, "its write was refused")
        return {"ok": False, "error": outcome.reason}

    def _needs_confirming(self, lock: str, sink: str, checked: object) -> bool:
        """Whether a checked write to ``sink`` waits for the lock service's word on the lease:
        a timed sink, past the share of the lease our own clock is trusted for (module
        docstring). Call with ``_state`` held."""
        lease = self._leases.get(lock)
        if sink not in self._confirmed_sinks or checked is False or lease is None:
            return False
        return lease.remaining(time.monotonic()) < self._ttl * (1 - _TRUSTED_SHARE)

    def _confirm(self, lock: str, epoch: int) -> tuple[str | None, str]:
        """Whether the lock service still holds ``epoch`` of ``lock`` for us, asked with a
        renewal (our own clock may run slow): ``(refusal, note)`` as :meth:`_lease_check`."""
        sent = time.monotonic()
        try:
            renewed: bool | None = self._client.renew(lock, epoch)
        except Exception:
            renewed = None
        with self._state:
            lease = self._leases.get(lock)
            if renewed is None:
                return UNAVAILABLE, ""
            if lease is None or lease.epoch != epoch:
                return "not-held", ""
            if not renewed:
                lease.lost = True
                wire.log(f"lease {lock} epoch {epoch}: the service says it ended, lost")
                return "lease-expired", ""
            lease.renewed = max(lease.renewed, sent)
        return None, "lease confirmed by the lock service"

    def _fenced_off(self, lock: str, epoch: int, why: str) -> None:
        """A sink refused ``epoch`` as stale. A correct holder stops: no renewals, and the lease
        goes back; with ``retry_on_reject`` it keeps the lease and remembers the refusal."""
        if self._retry_on_reject:
            with self._state:
                self._refused.add((lock, epoch))
        elif self._drop(lock, epoch) is not None:
            # In the background: a slow lock service must not delay the refusal's answer.
            threading.Thread(target=self._hand_back, args=(lock, epoch, why), daemon=True).start()

    def _hand_back(self, lock: str, epoch: int, why: str) -> None:
        """Release a lease this agent no longer uses; failures only matter to the log."""
        wire.log(f"lease {lock} epoch {epoch}: releasing it, {why}")
        try:
            self._client.release(lock, epoch)
        except Exception as problem:
            wire.log(f"lease {lock} epoch {epoch}: release failed: {problem}")

    def _read(self, request: dict[str, Any]) -> dict[str, Any]:
        sink = wire.text(request, "sink")
        key = wire.text(request, "key")
        fenced = "lock" in request or "epoch" in request
        lock = wire.text(request, "lock") if fenced else None
        epoch = wire.integer(request, "epoch") if fenced else None
        if lock is not None and epoch is not None:
            with self._state:
                refusal, note = self._lease_check(lock, epoch)
            if refusal is not None:
                return {"ok": False, "error": refusal}
            wire.log(f"fenced read {sink}/{key} epoch {epoch}: {note}")
        try:
            answer = self._client.read(sink, key, lock, epoch)
        except Exception as problem:
            answer = None
            message = str(problem)
        if isinstance(answer, Read):
            return {"ok": True, "entries": [entry.to_json() for entry in answer.entries]}
        if isinstance(answer, Refused):
            if lock is not None and epoch is not None and answer.stale:
                self._fenced_off(lock, epoch, "its read was refused")
            return {"ok": False, "error": answer.reason}
        if answer is not None:
            message = _unknown_reason(answer)
        if fenced:  # unknown: the read may have raised the sink's mark
            return {**_INFO, "message": message}
        # A plain read changes nothing, so a read that did not answer simply failed.
        return {"ok": False, "error": UNAVAILABLE, "message": message}

    def _holds(self, request: dict[str, Any]) -> dict[str, Any]:
        now = time.monotonic()
        with self._state:
            holds = {
                lock: lease.epoch
                for lock, lease in self._leases.items()
                if lease.remaining(now) > 0
            }
            working = sorted(self._working)
        return {"ok": True, "node": self.node, "holds": holds, "working": working}

    def _ping(self, request: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "node": self.node, "pid": os.getpid()}


def _lease_ended(ended: LeaseEnd) -> dict[str, Any]:
    """The ``lease_ended`` of an acquire's answer (``docs/design.md`` §4), times in ns."""
    data: dict[str, Any] = {"after": max(0, int(ended.after * 1e9)), "how": ended.how}
    if ended.grant_seq is not None:
        data["grant_seq"] = ended.grant_seq
    return data


def _also(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The other ``(key, id)`` items of a write spanning keys (empty for a plain write)."""
    raw = request.get("also")
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise wire.BadRequest("field 'also' must be a list of {key, id} objects")
    return [(wire.text(item, "key"), wire.text(item, "id")) for item in raw]


def _accepted(outcome: Accepted, also: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The answer to an accepted write; a write spanning keys lists its other items in
    ``also``, each with its ``seq`` when the sink reported them."""
    answer: dict[str, Any] = {"ok": True}
    if outcome.seq is not None:
        answer["seq"] = outcome.seq
    if also:
        seqs = outcome.also_seqs if len(outcome.also_seqs) == len(also) else ()
        answer["also"] = [
            {"key": key, "id": write_id, **({"seq": seqs[at]} if seqs else {})}
            for at, (key, write_id) in enumerate(also)
        ]
    return answer


def _unknown_reason(result: object) -> str:
    """The message of an unknown outcome: the client's reason, or what it wrongly returned."""
    reason = getattr(result, "reason", None)
    return str(reason) if reason is not None else f"the client returned {result!r}"


def load_client(path: str, config: dict[str, Any]) -> HolderClient:
    """Import the client module at ``path`` and build its ``Client(config)``."""
    spec = importlib.util.spec_from_file_location("fencecheck_client", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load a Python module from {path!r}")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: a dataclass in it looks its module up there.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    factory = getattr(module, "Client", None)
    if factory is None:
        raise ImportError(f"{path} defines no Client class; the agent needs Client(config)")
    client: HolderClient = factory(config)
    return client


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until killed."""
    parser = wire.with_listen_options("fencecheck agent: a lock holder on a worker")
    parser.add_argument("--node", required=True, help="this worker's node name, e.g. w1")
    parser.add_argument("--client", required=True, help="path of the system's client module")
    parser.add_argument("--config", required=True, help="JSON: ttl, flaws, client")
    args = parser.parse_args(argv)
    # First: the client's imports bind the clock functions they use.
    clock.follow_control_file()
    try:
        config = AgentConfig.from_json(args.config)
    except ValueError as problem:
        parser.error(f"--config: {problem}")
    try:
        client = load_client(args.client, {"node": args.node, **config.client})
    except (ImportError, OSError, KeyError, ValueError) as problem:
        parser.error(f"--client {args.client}: {problem}")
    banner = (
        f"agent {args.node}, client {args.client}, ttl {config.ttl:.3f}s, "
        f"holder flaws {sorted(config.flaws) or 'none'}"
    )
    wire.serve(
        args.host, args.port, Agent(args.node, client, config).handle, banner, args.secret_file
    )


if __name__ == "__main__":
    main()
