"""The holder client API: what a system's client module gives the agent, with typed results.

A system ships one stdlib-only Python module to the worker nodes; it defines a class
``Client(config)`` implementing :class:`HolderClient`. The agent (:mod:`harness.nodeside.agent`)
loads it and calls it for every lease and every write of a holder. This module is copied to the
nodes beside the agent, so client modules import it as ``from harness.nodeside import client``.

Every call ends in one of four ways, and the difference matters to the checker:

- :data:`ACCEPTED`: the service did it (a grant, a write that landed, a read's entries).
- a definite refusal (:class:`Refused`): the service certainly did *not* do it. :data:`STALE`
  means the fence refused the epoch; :data:`UNAVAILABLE` means the request was never sent (the
  connection could not be opened); any other word is another definite refusal (``timeout`` for an
  acquire that waited in vain, ``bad-request``...).
- :data:`UNKNOWN` (:class:`Unknown`, or any exception the client raises): the request may or may
  not have been acted on, e.g. it was sent and no answer came. The checker then treats the write
  as possibly landed, at any later time. Reporting a write that may have landed as refused makes
  the checker wrong: when in doubt, say unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

__all__ = [
    "ACCEPTED",
    "STALE",
    "UNAVAILABLE",
    "UNKNOWN",
    "Accepted",
    "Entry",
    "Grant",
    "HolderClient",
    "LeaseEnd",
    "Read",
    "Refused",
    "SpansKeys",
    "Unknown",
]

ACCEPTED: Final = "ok"
"""The wire word for a request the service carried out."""
STALE: Final = "stale-epoch"
"""The refusal of a fenced sink: the request's epoch is below one it has already seen."""
UNAVAILABLE: Final = "unavailable"
"""The refusal of a request that was certainly never sent (no connection could be opened)."""
UNKNOWN: Final = "unknown"
"""The outcome of a request that may or may not have been acted on."""


@dataclass(frozen=True, slots=True)
class LeaseEnd:
    """What the holder's session was told while its acquire was open: its lease had ended.

    ``after`` is seconds after the acquire's request went out, by the holder's clock; ``how`` is
    ``"expired"`` (a keepalive answered so) or ``"lost"`` (the session was gone: the service no
    longer knew it); ``grant_seq`` is the service's ``grant_seq`` of the lock when it ended the
    lease, when its answer says so. The checker compares it with the grant's own ``grant_seq``: a
    higher grant came after the end (``grant-after-expiry``), a lower one only answered late."""

    after: float
    how: str = "expired"
    grant_seq: int | None = None


@dataclass(frozen=True, slots=True)
class Grant:
    """A lease granted with ``epoch``; ``waited`` is how long (by the service's clock) the
    service held the request before the lease began. The holder counts its lease from when it
    sent the request plus ``waited``, never earlier than the service does. ``grant_seq`` is the
    lock service's own order of the grants of that lock (a revision, a zxid, a grant counter),
    when it has one: strictly increasing per lock, for ever. ``lease_ended`` is set when the
    holder's own session saw its lease end before the grant was answered."""

    epoch: int
    waited: float = 0.0
    grant_seq: int | None = None
    lease_ended: LeaseEnd | None = None


@dataclass(frozen=True, slots=True)
class Accepted:
    """A write the sink accepted. ``seq`` is the sink's own acceptance order across all its keys
    (e.g. etcd's ``mod_revision``), when the sink reports one."""

    seq: int | None = None
    also_seqs: tuple[int, ...] = ()
    """For a write spanning keys (:class:`SpansKeys`): the ``seq`` of each item after the first,
    in the request's order; empty when the sink reports no seq."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a key as a read returns it: the write's id and epoch, and its ``seq``."""

    id: str
    epoch: int
    seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The entry as the agent sends it (``seq`` only when known)."""
        data: dict[str, Any] = {"id": self.id, "epoch": self.epoch}
        if self.seq is not None:
            data["seq"] = self.seq
        return data


@dataclass(frozen=True, slots=True)
class Read:
    """A read's answer: the key's entries in the sink's order."""

    entries: tuple[Entry, ...] = ()


@dataclass(frozen=True, slots=True)
class Refused:
    """A definite refusal: the service certainly did not act. ``reason`` is :data:`STALE`,
    :data:`UNAVAILABLE` or another word (``timeout``, ``bad-request``...)."""

    reason: str

    @property
    def stale(self) -> bool:
        """True when the fence refused the epoch."""
        return self.reason == STALE


@dataclass(frozen=True, slots=True)
class Unknown:
    """The request may or may not have been acted on; ``reason`` says what happened."""

    reason: str = UNKNOWN


class HolderClient(Protocol):
    """What a system's client module gives the agent (its class ``Client(config)``).

    The agent passes ``config``: the ``client`` object the adapter put in its deployment, plus
    ``node`` (the holder's node name). Raising an exception from any method means
    :data:`UNKNOWN`. A client keeps connections open between calls if it likes, but a call
    abandoned on a timeout must not confuse the next one.
    """

    def acquire(self, lock: str, ttl: float, wait: float) -> Grant | Refused | Unknown:
        """A new lease on ``lock`` for ``ttl`` seconds with a strictly higher epoch than any
        granted before, waiting up to ``wait`` seconds for the lock to be free."""
        ...

    def renew(self, lock: str, epoch: int) -> bool:
        """Extend the lease of ``epoch``; False when the service says it is no longer held."""
        ...

    def release(self, lock: str, epoch: int) -> bool:
        """Give the lease of ``epoch`` back; False when it was no longer held."""
        ...

    def write(
        self, lock: str, sink: str, key: str, id: str, epoch: int, prev: Any
    ) -> Accepted | Refused | Unknown:
        """Append ``id`` to ``key`` of ``sink`` carrying ``epoch`` of ``lock`` (``prev`` is the id
        the write was based on, or None). A fenced sink refuses it as :data:`STALE` when it has
        seen a higher epoch of ``lock``."""
        ...

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> Read | Refused | Unknown:
        """The entries of ``key`` in ``sink``, in the sink's order.

        With ``lock`` and ``epoch`` (always both) a *fenced* read: the sink refuses it as
        :data:`STALE` below its highest-seen epoch of ``lock``, else raises that mark to
        ``epoch`` as a write would.
        """
        ...


@runtime_checkable
class SpansKeys(Protocol):
    """Optional: a client whose sinks take one write across several keys, all or nothing.

    The agent sends writes that span keys (``--keys-per-write``) only through this method; a
    client without it gets them refused as ``bad-request`` (the runner refuses such a run first,
    for a system that does not declare the capability).
    """

    def write_keys(
        self, lock: str, sink: str, items: Sequence[tuple[str, str]], epoch: int
    ) -> Accepted | Refused | Unknown:
        """Append each ``(key, id)`` of ``items`` to its key of ``sink`` carrying ``epoch`` of
        ``lock``, atomically: a fenced sink refuses all of them as :data:`STALE` when it has seen
        a higher epoch of ``lock``. ``Accepted.seq`` is the first item's, ``also_seqs`` the
        others'."""
        ...
