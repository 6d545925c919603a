"""The zookeeper system's holder client, loaded by the agent on each worker node.

It talks to the three-member ensemble through kazoo (Debian's ``python3-kazoo``, installed on the
nodes: imported when a :class:`Client` is made, so the controller can ship this file without it).
One ZooKeeper session per holder, its timeout the lease TTL; the lease of a lock is kazoo's
``Lock`` recipe under ``/locks/L``, and **the token is the lock node's czxid**, the zxid of the
transaction that created it: global and strictly increasing for as long as the ensemble lives.
After a release the holder removes the lock's parent when nobody else waits on it, as users do to
keep the tree clean (Curator makes lock parents container nodes, which the server removes when
empty): a harmless habit while the token is the czxid.

The grant's ``grant_seq`` is the czxid too (the recipe serves the queue in creation order), and
the client reports no ``lease_ended``: the server ends a session by deleting its ephemeral nodes
as it closes it, so no lock node comes first under an ended session; a grant whose node is gone
by the time it is read is refused as ``session-expired`` (``docs/design.md`` §4).

Sinks, both on ZooKeeper itself, one znode per entry under ``/S/K`` (sequential children named
``<id>-NNNNNNNNNN``, data ``id epoch``), in the key's order (the sequence):

- **store** (fenced): a multi that checks the holder's lock node still exists, raises the lock's
  mark (``/marks/L``, the highest epoch accepted, by a compare-and-set on its version) and creates
  the entry, atomically on the leader. A refusal is ``stale-epoch`` when the mark is above the
  request's epoch, else ``not-owner`` (a lapsed session is no proof of a newer grant). Entries
  carry ``seq``: their czxid, the ensemble's acceptance order across all keys.
- **log** (unfenced): a plain create.
- **ref-store** (fenced, off ZooKeeper): the reference store (:mod:`systems.reference`) on the
  store node, which refuses an epoch below the lock's highest (or equal to it from another
  holder: each request names this holder); its ``seq`` is its acceptance order.

With the run's secret (``secret_file``), the session authenticates as ``fencecheck`` (digest) and
every znode it creates carries a digest ACL for that identity only: a client without the secret
can neither read nor change the locks and sinks.

Its configuration (the ``client`` object of the agent's ``--config``): ``hosts`` (holder name ->
``host:port`` list, its own member first: the lock session uses only that one), ``node`` (the
holder's name), ``store`` (the reference store's ``host:port``), ``secret_file``, ``timeout``
(seconds to wait for a reply), ``bugs``:
``trust-is-acquired`` (store writes go out when kazoo's ``Lock.is_acquired`` says so, unchecked
by the server), ``sequence-token`` (the lock node's sequence number is the token), and
``follower-read-check`` (ownership is checked with a plain read of the lock node, then the store
write goes out unchecked on a data session of its own; a plain read is served by whichever member
the lock session is on, from its last state).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from harness.nodeside import client as api
from harness.nodeside import wire

__all__ = ["ACL_USER", "Client", "digest_credentials"]

TRUST_IS_ACQUIRED = "trust-is-acquired"
SEQUENCE_TOKEN = "sequence-token"
FOLLOWER_READ_CHECK = "follower-read-check"

ACL_USER = "fencecheck"
"""The digest identity the holders (and the adapter) authenticate as with the run's secret."""

_STORE = "store"
_LOG = "log"
_REF_STORE = "ref-store"
_SINKS = (_STORE, _LOG, _REF_STORE)
# The lock node of the grant is gone, yet the store has seen no higher epoch: not STALE, which
# promises that it has (a session can expire before anyone else is granted the lock).
_NOT_OWNER = api.Refused("not-owner")
_STALE = api.Refused(api.STALE)
# A grant whose lock node vanished (its session expired) before its czxid could be read.
_SESSION_LOST = api.Refused("session-expired")
_NEVER_SENT = api.Refused(api.UNAVAILABLE)
_BAD_REQUEST = api.Refused("bad-request")
_TIMED_OUT = api.Refused("timeout")
_SEQUENCE_DIGITS = 10
_CONNECT_WAIT_S = 1.0
_POLL_S = 0.05


class _Held:
    """A lock this holder was granted: kazoo's recipe object, its lock node and the token."""

    def __init__(self, recipe: Any, path: str, epoch: int) -> None:
        self.recipe = recipe
        self.path = path
        self.epoch = epoch


class Client:
    """Talks to the ensemble for one holder (kazoo's client is thread-safe)."""

    def __init__(self, config: dict[str, Any]) -> None:
        from kazoo import exceptions
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        self._errors = exceptions
        self._owner = str(config.get("node", "?"))
        self._timeout = float(config.get("timeout", 10.0))
        bugs = set(config.get("bugs", ()))
        self._trust_is_acquired = TRUST_IS_ACQUIRED in bugs
        self._sequence_token = SEQUENCE_TOKEN in bugs
        self._plain_read_check = FOLLOWER_READ_CHECK in bugs
        self._holder_checks = self._trust_is_acquired or self._plain_read_check
        hosts = config["hosts"]
        listed = str(hosts[self._owner] if isinstance(hosts, dict) else hosts).split(",")
        secret_file = config.get("secret_file")
        credentials = digest_credentials(wire.read_secret(str(secret_file))) if secret_file else {}

        def session(order: list[str]) -> Any:
            # Reconnect for ever: the holder outlives any fault; hosts tried in the given order.
            return KazooClient(
                hosts=",".join(order),
                timeout=float(config["session_timeout"]),
                connection_retry=KazooRetry(max_tries=-1, max_delay=0.5),
                randomize_hosts=False,
                **credentials,
            )

        # The lease is a session on the holder's own member only, as behind a per-zone endpoint:
        # kazoo would otherwise move it to the next member after any slow ping.
        self._zk = session(listed[:1])
        # With follower-read-check the store's writes go out on a data session of their own (any
        # member, from the other end of the list), as a store client beside the lock's would:
        # they neither wait behind the lock session's reads nor hold them up.
        self._data = session(listed[::-1]) if self._plain_read_check else self._zk
        # The reference store; the run's secret is this process's (the agent's --secret-file).
        store = config.get("store")
        self._ref = wire.Pool(wire.parse_address(str(store)), self._timeout) if store else None
        self._zk.start(timeout=self._timeout)
        if self._data is not self._zk:
            self._data.start(timeout=self._timeout)
        # What a client that trusts its own ownership check writes with: retried through
        # reconnections (and new sessions) until the deadline.
        self._retry = KazooRetry(max_tries=-1, max_delay=0.5, deadline=self._timeout)
        self._held: dict[str, _Held] = {}
        self._keys: set[str] = set()  # store keys whose parent znode is known to exist
        self._state = threading.Lock()

    def _connected(self) -> bool:
        """Whether the session is up: a request made while it is not would never be sent."""
        return bool(self._zk.connected)

    def _await_connection(self, limit: float) -> bool:
        """Wait up to ``limit`` seconds for the session to be up (kazoo reconnects by itself, as
        after a member's restart), as a real holder's request would wait; False if it is not."""
        deadline = time.monotonic() + limit
        while not self._connected():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True

    def acquire(self, lock: str, ttl: float, wait: float) -> api.Grant | api.Refused | api.Unknown:
        """Take ``/locks/lock`` with kazoo's recipe, waiting up to ``wait`` seconds."""
        if not self._await_connection(min(wait, _CONNECT_WAIT_S)):
            return _NEVER_SENT
        parent = f"/locks/{lock}"
        start = time.monotonic()
        while True:
            recipe = self._zk.Lock(parent, self._owner)
            try:
                granted = recipe.acquire(timeout=max(wait - (time.monotonic() - start), 0.001))
            except self._errors.LockTimeout:
                return _TIMED_OUT
            except self._errors.NoNodeError:
                # Another holder removed the empty parent between our ensure_path and our create.
                continue
            if not granted:
                return _TIMED_OUT
            break
        path = f"{parent}/{recipe.node}"
        stat = self._zk.exists(path)
        if stat is None:
            # The session expired between the grant and this read: the lease is already gone.
            recipe.release()
            return _SESSION_LOST
        # The lock node's czxid is ZooKeeper's own order of the grants (the recipe serves the
        # queue in creation order), whatever the token is.
        order = int(stat.czxid)
        epoch = int(recipe.node[-_SEQUENCE_DIGITS:]) if self._sequence_token else order
        with self._state:
            self._held[lock] = _Held(recipe, path, epoch)
        return api.Grant(epoch, time.monotonic() - start, order)

    def _grant(self, lock: str, epoch: int) -> _Held | None:
        with self._state:
            held = self._held.get(lock)
        return held if held is not None and held.epoch == epoch else None

    def _owns(self, held: _Held) -> bool:
        """Whether the lock node still exists, read through the leader's latest state (``sync``
        first). With ``follower-read-check`` a plain read of the session's member decides; with
        ``trust-is-acquired``, kazoo's belief."""
        if self._trust_is_acquired:
            return bool(held.recipe.is_acquired)
        if not self._plain_read_check:
            self._zk.sync(held.path)
        return self._zk.exists(held.path) is not None

    def renew(self, lock: str, epoch: int) -> bool:
        """The session keeps the lease alive; renewing checks that the lock node still exists."""
        held = self._grant(lock, epoch)
        return held is not None and self._owns(held)

    def release(self, lock: str, epoch: int) -> bool:
        """Delete the lock node, then the lock's parent if nobody else waits on it."""
        held = self._grant(lock, epoch)
        if held is None:
            return False
        with self._state:
            self._held.pop(lock, None)
        existed = self._zk.exists(held.path) is not None
        held.recipe.release()
        with contextlib.suppress(self._errors.NotEmptyError, self._errors.NoNodeError):
            self._zk.delete(held.path.rpartition("/")[0])
        return existed

    def write(
        self, lock: str, sink: str, key: str, id: str, epoch: int, prev: Any
    ) -> api.Accepted | api.Refused | api.Unknown:
        """Accepted (``store``: with the entry's czxid as ``seq``), or refused as ``stale-epoch``
        (``store``: it has seen a higher epoch of the lock), ``not-owner`` (the grant's lock node
        is gone, or was never this holder's, and no higher epoch seen) or never sent; an
        exception when the outcome is unknown."""
        if sink not in _SINKS:
            return _BAD_REQUEST
        data = f"{id} {epoch}".encode()
        # The write's id in the name lets a retry find an attempt that landed (Curator's
        # "protected" create); the sequence suffix orders the key's entries.
        entry = f"/{sink}/{key}/{id}-"
        if sink == _REF_STORE:
            request = {"op": "write", "sink": _STORE, "lock": lock, "epoch": epoch}
            request.update(key=key, id=id, prev=prev, holder=self._owner)
            reply = self._ref_call(request)
            if not isinstance(reply, dict):
                return reply
            seqs = reply.get("seqs")
            return api.Accepted(int(seqs[0]) if isinstance(seqs, list) and seqs else None)
        if sink == _LOG:
            if not self._await_connection(_CONNECT_WAIT_S):
                return _NEVER_SENT
            self._zk.create(entry, data, sequence=True, makepath=True)
            return api.Accepted()
        held = self._grant(lock, epoch)
        if self._holder_checks and held is not None:
            return self._checked_by_holder(held, entry, data)
        if not self._await_connection(_CONNECT_WAIT_S):
            return _NEVER_SENT
        if key not in self._keys:
            self._zk.ensure_path(f"/{sink}/{key}")
            with self._state:
                self._keys.add(key)
        done = self._fenced(held, lock, epoch, (entry, data))
        return done if isinstance(done, api.Refused) else self._accepted(str(done[-1]))

    def _mark(self, lock: str) -> tuple[int, int]:
        """The store's mark for ``lock`` (the highest epoch it accepted or read with, -1 before
        any) and the mark node's version, for a compare-and-set."""
        path = f"/marks/{lock}"
        try:
            value, stat = self._zk.get(path)
        except self._errors.NoNodeError:
            with contextlib.suppress(self._errors.NodeExistsError):
                self._zk.create(path, b"-1", makepath=True)
            value, stat = self._zk.get(path)
        return int(value), int(stat.version)

    def _fenced(
        self, held: _Held | None, lock: str, epoch: int, entry: tuple[str, bytes] | None
    ) -> list[Any] | api.Refused:
        """One multi: the grant's lock node still exists, the mark rises to ``epoch`` (a
        compare-and-set on its version, retried when another holder moved it), and ``entry``
        (path prefix, data) is created. The multi's results, or the refusal: ``stale-epoch``
        when the mark is above ``epoch``, else ``not-owner``. Without a grant of ``epoch`` here
        (an older one, long gone) there is no lock node to check: only the refusal is chosen."""
        while True:
            mark, version = self._mark(lock)
            if held is None:
                return _STALE if epoch < mark else _NOT_OWNER
            transaction = self._zk.transaction()
            transaction.check(held.path, -1)
            if epoch > mark:
                transaction.set_data(f"/marks/{lock}", str(epoch).encode(), version)
            if entry is not None:
                transaction.create(entry[0], entry[1], sequence=True)
            results: list[Any] = transaction.commit()
            failed = [result for result in results if isinstance(result, Exception)]
            if not failed:
                return results
            if isinstance(results[0], self._errors.NoNodeError):
                return _STALE if epoch < self._mark(lock)[0] else _NOT_OWNER
            if not isinstance(results[1], self._errors.BadVersionError):
                raise failed[0]

    def _accepted(self, created: str) -> api.Accepted:
        """The entry ``created`` was accepted; its czxid is the store's ``seq``."""
        stat = self._data.exists(created)
        # Only a later delete could remove it, and nothing deletes entries.
        return api.Accepted(None if stat is None else int(stat.czxid))

    def _checked_by_holder(
        self, held: _Held, entry: str, data: bytes
    ) -> api.Accepted | api.Refused:
        """The planted mistakes: the holder decides it still owns the lock (kazoo's belief, or a
        plain read), then writes with retries, as a client that trusts its check would."""
        if not self._owns(held):
            return _NOT_OWNER
        return self._accepted(self._retry(self._create_once, entry, data))

    def _create_once(self, entry: str, data: bytes) -> str:
        """Create ``entry`` (a sequential node), unless an earlier attempt that lost its answer
        already did: a retried create must not write twice."""
        parent, _, prefix = entry.rpartition("/")
        with contextlib.suppress(self._errors.NoNodeError):
            for child in self._data.get_children(parent):
                if child[:-_SEQUENCE_DIGITS] == prefix:
                    return f"{parent}/{child}"
        return str(self._data.create(entry, data, sequence=True, makepath=True))

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> api.Read | api.Refused | api.Unknown:
        """The key's entries in creation order (``store``'s with ``seq``: their czxid).

        A fenced read (``lock`` and ``epoch``) first runs the store's multi without an entry: the
        grant's lock node must exist, and the mark rises; ``log`` cannot fence a read.
        """
        if sink not in _SINKS or (lock is not None and sink == _LOG):
            return _BAD_REQUEST
        if sink == _REF_STORE:
            request: dict[str, Any] = {"op": "read", "sink": _STORE, "key": key}
            if lock is not None or epoch is not None:
                request.update(lock=lock, epoch=epoch, holder=self._owner)
            reply = self._ref_call(request)
            if not isinstance(reply, dict):
                return reply
            return api.Read(
                tuple(
                    api.Entry(str(e["id"]), int(e["epoch"]), e.get("seq")) for e in reply["entries"]
                )
            )
        if not self._await_connection(_CONNECT_WAIT_S):
            return _NEVER_SENT
        if lock is not None and epoch is not None:
            held = self._grant(lock, epoch)
            if self._holder_checks and held is not None:
                if not self._owns(held):
                    return _NOT_OWNER
            else:
                done = self._fenced(held, lock, epoch, None)
                if isinstance(done, api.Refused):
                    return done
        parent = f"/{sink}/{key}"
        try:
            children = sorted(self._zk.get_children(parent), key=lambda c: c[-_SEQUENCE_DIGITS:])
        except self._errors.NoNodeError:
            return api.Read()
        pending = [self._zk.get_async(f"{parent}/{child}") for child in children]
        entries = []
        for answer in pending:
            value, stat = answer.get(timeout=self._timeout)
            write_id, written = value.decode().split()
            seq = int(stat.czxid) if sink == _STORE else None
            entries.append(api.Entry(write_id, int(written), seq))
        return api.Read(tuple(entries))

    def _ref_call(self, request: dict[str, Any]) -> dict[str, Any] | api.Refused:
        """The reference store's answer when it accepted, else its refusal (``stale-epoch``...)
        or never sent; an exception when the outcome is unknown."""
        if self._ref is None:
            return _BAD_REQUEST
        try:
            reply = self._ref.call(request)
        except wire.NotDelivered:
            return _NEVER_SENT
        return reply if reply.get("ok") else api.Refused(str(reply.get("error", "refused")))


def digest_credentials(secret: str) -> dict[str, Any]:
    """kazoo's ``auth_data`` and ``default_acl`` for the run's ``secret``: the session is
    ``fencecheck`` and what it creates is that identity's alone (no world permissions)."""
    from kazoo.security import make_digest_acl

    return {
        "auth_data": [("digest", f"{ACL_USER}:{secret}")],
        "default_acl": [make_digest_acl(ACL_USER, secret, all=True)],
    }
