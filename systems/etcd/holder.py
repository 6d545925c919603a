"""The etcd system's holder client, loaded by the harness's agent on each worker node.

Node-side: the standard library, :mod:`harness.nodeside.client` (shipped beside it) and, for the
``postgres`` sink, Debian's ``python3-psycopg2`` (imported when first used, so the controller can
import this module without it). etcd is spoken through its v3 JSON gateway over urllib: Debian's
python3-etcd3 ``Lock`` crashes on bookworm when contended (SYSTEMS.md §etcd).

The lock is etcd's own mutex recipe (``concurrency.Mutex``): grant a lease, create the key
``<prefix>/<lock>/<lease id in hex>`` bound to it if absent, and hold the lock when that key has the
lowest create revision under the lock's prefix. **The epoch is that key's create revision**: global
and strictly increasing, so a later grant always has a higher one. Renewing is a lease keepalive
plus a look at the key: a keepalive reporting no TTL, or a key gone or recreated, means the lease
is lost. A holder that comes first in the queue a TTL or more after its last refresh (it was
stopped while it waited) asks its lease once more, and a lease found gone is its evidence on the
grant (``LeaseEnd``, ``expired``, with the keepalive's header revision); a lease that ends while
its key still waits is queued again under a new lease, whose grant that end does not concern.

Sinks:

- ``etcd-txn`` (fenced): one txn per write, ``If(value(fence) > epoch) Then nothing Else put(fence,
  epoch), put(entry)``. etcd compares values as bytes and a compare on a missing key is false, so
  epochs are zero-padded and the refusing branch is the ``Then`` one (the first write goes through).
  ``seq`` is the txn's revision, an entry's ``seq`` its ``mod_revision``.
- ``postgres`` (fenced): in one transaction a guarded upsert of the lock's highest epoch
  (``... DO UPDATE ... WHERE fence.epoch <= EXCLUDED.epoch``, no row = refused) and an insert into
  the log; ``seq`` is the log's ``bigserial``, taken while the lock's fence row is locked, so it
  follows the commit order of that lock's writes.
- ``etcd-put`` (unfenced, mitigation none): a plain put.
- ``etcd-delayed`` (unfenced, mitigation lock-delay; in the inventory only with a lock-delay): a
  plain put too. What protects it is the grace period etcd users add after acquiring: a holder
  that finds itself first in the queue keeps its lease alive and waits ``lock_delay`` seconds
  before it reports the grant, so its first write comes at least ``lock_delay`` after the
  previous lease ran out. A holder that stops as soon as a keepalive reports its lease gone, or
  its own clock says the lease ran out, then writes nothing later than ``lock_delay`` after its
  last check, unless a pause outlasts the lock-delay.

Configuration (the ``client`` object of the deployment): ``etcd`` (worker name -> the members'
client URLs, the one that worker's holder is pinned to first, see :class:`Gateway`),
``postgres`` (``host``, ``port``, ``user``, ``dbname``), ``secret_file`` (the run's secret on the
node: the password of etcd's :data:`USER` and of PostgreSQL's ``user``; none, no authentication),
``timeout`` (seconds per request),
``lock_delay`` (seconds a new holder waits after its grant, 0 for none), ``bugs`` (the
holder-side bug switches of :mod:`systems.etcd.adapter` that are on).
"""

from __future__ import annotations

import base64
import contextlib
import importlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from typing import Any, Final, NamedTuple, TypeVar

from harness.nodeside import client as api
from harness.nodeside import wire

__all__ = [
    "CHECK_THEN_WRITE",
    "ETCD_DELAYED",
    "ETCD_PUT",
    "ETCD_TXN",
    "IGNORE_EXPIRED_REFRESH",
    "LEASE_ID_TOKEN",
    "LOCK_PREFIX",
    "PG_CHECK_THEN_ACT",
    "POSTGRES",
    "SHARED_LEASE",
    "USER",
    "Client",
    "EtcdError",
    "Gateway",
    "NotSent",
]

ETCD_TXN: Final = "etcd-txn"
ETCD_PUT: Final = "etcd-put"
ETCD_DELAYED: Final = "etcd-delayed"
POSTGRES: Final = "postgres"

LEASE_ID_TOKEN: Final = "lease-id-token"
CHECK_THEN_WRITE: Final = "check-then-write"
IGNORE_EXPIRED_REFRESH: Final = "ignore-expired-refresh"
SHARED_LEASE: Final = "shared-lease"
PG_CHECK_THEN_ACT: Final = "pg-check-then-act"

USER: Final = "root"
"""The etcd user the holders (and the adapter) log in as, with the run's secret as password."""
LOCK_PREFIX: Final = "/fencecheck/lock/"
_FENCE_PREFIX: Final = "/fencecheck/fence/"
_DATA_PREFIX: Final = "/fencecheck/data/"
_EPOCH_DIGITS: Final = 20  # int64 fits: byte order is number order
_POLL: Final = 0.1  # seconds between looks at the lock's queue while waiting
# gRPC codes etcd answers with that certainly changed nothing (the rest may have been applied).
_DEFINITE_CODES: Final = frozenset({3, 5, 9})  # InvalidArgument, NotFound, FailedPrecondition
_LEASE_EXISTS: Final = 9
_INVALID_TOKEN: Final = 16  # Unauthenticated: "invalid auth token", refused before applying
_STATEMENT_TIMEOUT_MS: Final = 10_000
_PLAIN: Final = frozenset({ETCD_PUT, ETCD_DELAYED})  # unfenced: written by a plain put
_SINKS: Final = frozenset({ETCD_TXN, *_PLAIN})  # the sinks kept in etcd
_T = TypeVar("_T")

_GUARDED_FENCE: Final = (
    "INSERT INTO fence (lock, epoch) VALUES (%s, %s) ON CONFLICT (lock) DO UPDATE "
    "SET epoch = EXCLUDED.epoch WHERE fence.epoch <= EXCLUDED.epoch"
)
_UNGUARDED_FENCE: Final = (
    "INSERT INTO fence (lock, epoch) VALUES (%s, %s) ON CONFLICT (lock) DO UPDATE "
    "SET epoch = EXCLUDED.epoch"
)
_APPEND: Final = (
    "INSERT INTO log (key, id, epoch, lock, prev) VALUES (%s, %s, %s, %s, %s) RETURNING seq"
)
_ENTRIES: Final = "SELECT id, epoch, seq FROM log WHERE key = %s ORDER BY seq"


class NotSent(Exception):
    """The request certainly did not reach the service (no connection could be opened)."""


class EtcdError(Exception):
    """etcd answered with an error; ``definite`` when it certainly changed nothing."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.definite = code in _DEFINITE_CODES


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(data: str) -> str:
    return base64.b64decode(data).decode()


def _padded(epoch: int) -> str:
    return str(epoch).zfill(_EPOCH_DIGITS)


def _prefix_end(prefix: str) -> str:
    """The range end covering every key that starts with ``prefix`` (its last byte plus one)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class Gateway:
    """etcd's v3 JSON gateway: POST JSON, int64 fields as strings, keys and values base64, false
    and zero fields left out of answers.

    Requests go to the first of ``urls`` (the member this holder is pinned to); only a member
    that refuses the connection outright (killed) makes it try the next, as etcd's own client
    fails over. A member that is paused or cut off is waited for until ``timeout``.

    With a ``password`` (the run's secret) the gateway logs in as :data:`USER` on each member it
    talks to and sends the token with every request; a token etcd no longer knows (the member
    restarted, or it sat unused past etcd's token TTL) is refused before anything is applied, so
    the gateway logs in again and sends the request once more.
    """

    def __init__(self, urls: list[str], timeout: float, password: str | None = None) -> None:
        self._urls = [url.rstrip("/") for url in urls]
        self._timeout = timeout
        self._password = password
        self._tokens: dict[str, str] = {}  # member URL -> its auth token

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request; raises :class:`NotSent` (no member took it), :class:`EtcdError`, or
        anything else for an unknown outcome (a timeout, a connection lost after sending)."""
        data = json.dumps(body).encode()
        refused = []
        for url in self._urls:
            try:
                return self._authenticated(url, path, data)
            except NotSent as problem:
                refused.append(f"{url}: {problem}")
        raise NotSent("; ".join(refused))

    def _authenticated(self, url: str, path: str, data: bytes) -> dict[str, Any]:
        if self._password is None:
            return self._post(url + path, data)
        try:
            return self._post(url + path, data, self._token(url))
        except EtcdError as problem:
            if problem.code != _INVALID_TOKEN:
                raise
        self._tokens.pop(url, None)
        return self._post(url + path, data, self._token(url))

    def _token(self, url: str) -> str:
        """The auth token of member ``url``, logging in when there is none yet."""
        token = self._tokens.get(url)
        if token is None:
            login = json.dumps({"name": USER, "password": self._password}).encode()
            token = str(self._post(url + "/v3/auth/authenticate", login)["token"])
            self._tokens[url] = token
        return token

    def _post(self, url: str, data: bytes, token: str | None = None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = token
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as reply:
                answer: dict[str, Any] = json.loads(reply.read())
                return answer
        except urllib.error.HTTPError as problem:
            try:
                error = json.loads(problem.read())
            except ValueError:
                error = {}
            code, message = int(error.get("code", -1)), str(error.get("message", problem))
            raise EtcdError(code, message) from None
        except urllib.error.URLError as problem:
            if isinstance(problem.reason, ConnectionRefusedError | socket.gaierror):
                raise NotSent(str(problem.reason)) from None
            raise

    def grant(self, ttl: int, lease: int | None = None) -> int:
        """A new lease of ``ttl`` seconds (with the given ID when ``lease`` is set)."""
        body: dict[str, Any] = {"TTL": ttl}
        if lease is not None:
            body["ID"] = lease
        return int(self.call("/v3/lease/grant", body)["ID"])

    def keepalive(self, lease: int) -> int:
        """Refresh ``lease``; its remaining TTL, 0 when it has expired (etcd then leaves it out)."""
        return self.keepalive_at(lease)[0]

    def keepalive_at(self, lease: int) -> tuple[int, int]:
        """Refresh ``lease``: its remaining TTL (0 when it has expired or is not found: etcd
        answers both alike) and the revision of the answer's header (etcd's revision then)."""
        result = self.call("/v3/lease/keepalive", {"ID": lease}).get("result", {})
        return int(result.get("TTL", 0)), _revision(result)

    def revoke(self, lease: int) -> bool:
        """Revoke ``lease`` (its keys go with it); False when it no longer existed."""
        try:
            self.call("/v3/lease/revoke", {"ID": lease})
        except EtcdError as problem:
            if problem.code == 5:
                return False
            raise
        return True

    def txn(
        self, compare: list[dict[str, Any]], success: list[Any], failure: list[Any]
    ) -> tuple[bool, dict[str, Any]]:
        """Whether the compare held, and the whole answer."""
        answer = self.call(
            "/v3/kv/txn", {"compare": compare, "success": success, "failure": failure}
        )
        return bool(answer.get("succeeded", False)), answer

    def put(self, key: str, value: str) -> int:
        """A plain put; the revision it made."""
        return _revision(self.call("/v3/kv/put", _put(key, value)["request_put"]))

    def range(self, key: str, prefix: bool = False, **options: Any) -> list[dict[str, Any]]:
        """The key-values of ``key`` (or every key under it when ``prefix``)."""
        return list(self.call("/v3/kv/range", _range(key, prefix, **options)).get("kvs", []))


def _range(key: str, prefix: bool, **options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"key": _b64(key), **options}
    if prefix:
        body["range_end"] = _b64(_prefix_end(key))
    return body


def _put(key: str, value: str, lease: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
    if lease is not None:
        body["lease"] = lease
    return {"request_put": body}


def _revision(answer: dict[str, Any]) -> int:
    return int(answer["header"]["revision"])


def _entries(kvs: list[dict[str, Any]]) -> api.Read:
    """A sink's entries as a read returns them: in etcd's acceptance order (mod revision)."""
    entries = []
    for kv in sorted(kvs, key=lambda kv: int(kv["mod_revision"])):
        value = json.loads(_text(kv["value"]))
        entries.append(api.Entry(str(value["id"]), int(value["epoch"]), int(kv["mod_revision"])))
    return api.Read(tuple(entries))


def _definite(send: Callable[[], _T]) -> _T | api.Refused:
    """``send()``, with etcd's definite failures as refusals; any other failure is raised (the
    outcome is unknown)."""
    try:
        return send()
    except NotSent:
        return api.Refused(api.UNAVAILABLE)
    except EtcdError as problem:
        if problem.definite:
            return api.Refused(f"etcd-error-{problem.code}")
        raise


class _Held(NamedTuple):
    """A lock this holder was granted: the lease, its key in the queue and that key's revision.

    (A NamedTuple, not a dataclass: the agent loads this module without registering it in
    ``sys.modules``, where ``dataclass`` looks its module up.)
    """

    lease: int
    key: str
    revision: int


class Client:
    """One holder's view of etcd and PostgreSQL (thread-safe: the agent calls from several)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self._node = str(config.get("node", "?"))
        self._timeout = float(config.get("timeout", 10.0))
        # Each holder talks to one member, as an etcd client pinned to one endpoint does.
        secret_file = config.get("secret_file")
        secret = wire.read_secret(str(secret_file)) if secret_file else None
        urls = [str(url) for url in config["etcd"][self._node]]
        self._etcd = Gateway(urls, self._timeout, secret)
        self._postgres: dict[str, Any] = dict(config.get("postgres", {}))
        if secret is not None:
            self._postgres["password"] = secret
        self._bugs = frozenset(str(bug) for bug in config.get("bugs", ()))
        self._lock_delay = float(config.get("lock_delay", 0.0))
        self._state = threading.Lock()
        self._held: dict[tuple[str, int], _Held] = {}
        self._idle: list[Any] = []  # open PostgreSQL connections not in use

    # -- the lock ---------------------------------------------------------------------------

    def acquire(self, lock: str, ttl: float, wait: float) -> api.Grant | api.Refused | api.Unknown:
        """Queue for ``lock`` under a fresh lease and wait (up to ``wait``) to be first."""
        start = time.monotonic()
        deadline = start + wait
        seconds = max(1, round(ttl))
        prefix = f"{LOCK_PREFIX}{lock}/"
        first_try = True
        while first_try or time.monotonic() < deadline:
            first_try = False
            # Taken before the grant is sent: the lease cannot start earlier than that.
            anchor = time.monotonic()
            try:
                lease = self._lease(lock, seconds)
            except NotSent:
                return api.Refused(api.UNAVAILABLE)
            key = f"{prefix}{lease:016x}"
            revision = self._enqueue(key, lease)
            while True:
                first = self._etcd.range(
                    prefix, True, sort_target="CREATE", sort_order="ASCEND", limit=1
                )
                lowest = int(first[0]["create_revision"]) if first else None
                if lowest == revision:
                    settled = self._grace(lease, anchor, seconds)
                    if settled is None:
                        break  # the lease ran out during the grace period: queue again
                    anchor = settled
                    held = _Held(lease, key, revision)
                    epoch = lease if LEASE_ID_TOKEN in self._bugs else revision
                    with self._state:
                        self._held[(lock, epoch)] = held
                    # The lease runs from the last refresh sent, not from when the lock came.
                    # The lock key's create revision is etcd's own order of the grants: the
                    # queue is served in it, whatever the token is.
                    ended = self._confirmed(lease, anchor, seconds, start)
                    return api.Grant(epoch, max(0.0, anchor - start), revision, ended)
                if lowest is None or lowest > revision:
                    break  # our lease ran out while we waited: queue again under a new one
                if time.monotonic() >= deadline:
                    self._etcd.revoke(lease)
                    return api.Refused("timeout")
                time.sleep(_POLL)
                refreshed = self._refreshed(lease, anchor, seconds)
                if refreshed is None:
                    break
                anchor = refreshed
        return api.Refused("timeout")

    def _confirmed(
        self, lease: int, anchor: float, seconds: int, start: float
    ) -> api.LeaseEnd | None:
        """The holder's evidence of its lease on finding itself first: when its last refresh
        went out a TTL ago or more (it was stopped while it waited), one more keepalive, and
        the end it reports (``how`` ``expired``, etcd's header revision as the sequence: as of
        the answer, so it can only raise the bound); ``None`` when the lease lives."""
        if time.monotonic() - anchor < seconds:
            return None
        remaining, revision = self._etcd.keepalive_at(lease)
        if remaining > 0:
            return None
        return api.LeaseEnd(time.monotonic() - start, "expired", revision)

    def _refreshed(self, lease: int, anchor: float, seconds: int) -> float | None:
        """Keep ``lease`` alive while waiting: once a third of its TTL has passed since
        ``anchor`` (when the last refresh was sent), refresh it. The new anchor, or None when the
        lease is gone."""
        if time.monotonic() - anchor < seconds / 3:
            return anchor
        sent = time.monotonic()
        if self._etcd.keepalive(lease) <= 0:
            return None
        return sent

    def _grace(self, lease: int, anchor: float, seconds: int) -> float | None:
        """Wait ``lock_delay`` after becoming first before using the lock, keeping the lease
        alive: whoever held it before may still write for that long (``etcd-delayed`` relies on
        it). The lease's anchor, or None when it ran out meanwhile."""
        until = time.monotonic() + self._lock_delay
        settled: float | None = anchor
        while settled is not None and time.monotonic() < until:
            time.sleep(min(_POLL, max(0.0, until - time.monotonic())))
            settled = self._refreshed(lease, settled, seconds)
        return settled

    def _lease(self, lock: str, ttl: int) -> int:
        """A lease for one acquisition; with ``shared-lease`` every holder of ``lock`` shares one
        (as two threads sharing a process's session do)."""
        if SHARED_LEASE not in self._bugs:
            return self._etcd.grant(ttl)
        shared = zlib.crc32(lock.encode()) + 1
        try:
            return self._etcd.grant(ttl, shared)
        except EtcdError as problem:
            if problem.code != _LEASE_EXISTS:
                raise
        self._etcd.keepalive(shared)
        return shared

    def _enqueue(self, key: str, lease: int) -> int:
        """Create ``key`` bound to ``lease`` unless it exists; the key's create revision."""
        created, answer = self._etcd.txn(
            [{"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
            [_put(key, self._node, lease)],
            [{"request_range": {"key": _b64(key)}}],
        )
        if created:
            return _revision(answer)
        # The key exists: the same lease queued before (etcd's lock API calls that one acquisition).
        kvs = answer["responses"][0]["response_range"].get("kvs", [])
        if not kvs:
            raise EtcdError(-1, f"lock key {key} vanished between compare and read")
        return int(kvs[0]["create_revision"])

    def renew(self, lock: str, epoch: int) -> bool:
        """Keep the lease alive; False when etcd reports it expired or the lock key is gone."""
        with self._state:
            held = self._held.get((lock, epoch))
        if held is None:
            return False
        alive = self._etcd.keepalive(held.lease) > 0
        if IGNORE_EXPIRED_REFRESH in self._bugs:
            # The mistake: a refresh of an expired lease does not raise, so nothing stops.
            return True
        if alive:
            kvs = self._etcd.range(held.key)
            alive = bool(kvs) and int(kvs[0]["create_revision"]) == held.revision
        if not alive:
            with self._state:
                self._held.pop((lock, epoch), None)
        return alive

    def release(self, lock: str, epoch: int) -> bool:
        """Revoke the lease (its lock key goes with it); False when it had already expired."""
        with self._state:
            held = self._held.pop((lock, epoch), None)
        if held is None:
            return False
        return self._etcd.revoke(held.lease)

    # -- the sinks --------------------------------------------------------------------------

    def write(
        self, lock: str, sink: str, key: str, id: str, epoch: int, prev: Any
    ) -> api.Accepted | api.Refused | api.Unknown:
        """Append ``id`` to ``key`` of ``sink`` carrying ``epoch`` of ``lock``."""
        if sink == POSTGRES:
            return self._pg_write(lock, key, id, epoch, prev)
        if sink not in _SINKS:
            return api.Refused("bad-request")
        entry = f"{_DATA_PREFIX}{sink}/{key}/{id}"
        value = json.dumps({"id": id, "epoch": epoch, "prev": prev})

        def send() -> api.Accepted | api.Refused:
            if sink in _PLAIN or CHECK_THEN_WRITE in self._bugs:
                # check-then-write, the mistake: the holder trusts its lock key (its renewals
                # look that the key is still there, it checks its lease before each unit).
                return api.Accepted(self._etcd.put(entry, value))
            refused, answer = self._fenced(sink, lock, epoch, [_put(entry, value)])
            return api.Refused(api.STALE) if refused else api.Accepted(_revision(answer))

        return _definite(send)

    def _fenced(
        self, sink: str, lock: str, epoch: int, then: list[dict[str, Any]]
    ) -> tuple[bool, dict[str, Any]]:
        """One txn: refuse below the highest epoch seen for ``lock``, else raise it and do ``then``.
        Whether it was refused, and the answer."""
        fence = _b64(f"{_FENCE_PREFIX}{sink}/{lock}")
        mark = _padded(epoch)
        compare = [{"key": fence, "target": "VALUE", "result": "GREATER", "value": _b64(mark)}]
        return self._etcd.txn(compare, [], [_put(f"{_FENCE_PREFIX}{sink}/{lock}", mark), *then])

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> api.Read | api.Refused | api.Unknown:
        """The entries of ``key`` in ``sink``; a fenced read raises the sink's mark first."""
        if sink == POSTGRES:
            return self._pg_read(key, lock, epoch)
        if sink not in _SINKS:
            return api.Refused("bad-request")
        prefix = f"{_DATA_PREFIX}{sink}/{key}/"

        def send() -> api.Read | api.Refused:
            if sink in _PLAIN or lock is None or epoch is None:
                return _entries(self._etcd.range(prefix, True))
            scan = {"request_range": _range(prefix, True)}
            refused, answer = self._fenced(sink, lock, epoch, [scan])
            if refused:
                return api.Refused(api.STALE)
            return _entries(answer["responses"][1]["response_range"].get("kvs", []))

        return _definite(send)

    # -- PostgreSQL -------------------------------------------------------------------------

    def _pg_write(
        self, lock: str, key: str, id: str, epoch: int, prev: Any
    ) -> api.Accepted | api.Refused:
        def transaction(cursor: Any) -> api.Accepted | api.Refused:
            if PG_CHECK_THEN_ACT in self._bugs:
                # The mistake: the epoch was compared when the row was read; the UPDATE that
                # acts on that comparison carries no guard.
                cursor.execute(_UNGUARDED_FENCE, (lock, epoch))
            elif not self._pg_fence(cursor, lock, epoch):
                return api.Refused(api.STALE)
            cursor.execute(_APPEND, (key, id, epoch, lock, None if prev is None else str(prev)))
            return api.Accepted(int(cursor.fetchone()[0]))

        return self._pg(transaction)

    def _pg_read(self, key: str, lock: str | None, epoch: int | None) -> api.Read | api.Refused:
        def transaction(cursor: Any) -> api.Read | api.Refused:
            if lock is not None and epoch is not None and not self._pg_fence(cursor, lock, epoch):
                return api.Refused(api.STALE)
            cursor.execute(_ENTRIES, (key,))
            return api.Read(tuple(api.Entry(str(i), int(e), int(s)) for i, e, s in cursor))

        return self._pg(transaction)

    def _pg_fence(self, cursor: Any, lock: str, epoch: int) -> bool:
        """Raise the lock's highest epoch to ``epoch`` unless it is higher; False if it is."""
        if PG_CHECK_THEN_ACT in self._bugs:
            # The check half of the mistake: SELECT the epoch and compare in the client.
            cursor.execute("SELECT epoch FROM fence WHERE lock = %s", (lock,))
            row = cursor.fetchone()
            return row is None or int(row[0]) <= epoch
        cursor.execute(_GUARDED_FENCE, (lock, epoch))
        return bool(cursor.rowcount)

    def _pg(self, transaction: Callable[[Any], _T]) -> _T | api.Refused:
        """Run ``transaction(cursor)`` and commit (roll back on a refusal). A failure before the
        commit is a definite refusal; one during the commit leaves the outcome unknown.

        A kept connection that turns out broken (PostgreSQL restarted since) is replaced once:
        nothing of the transaction was committed, so trying again is safe.
        """
        psycopg2 = importlib.import_module("psycopg2")
        for kept in (True, False):
            try:
                connection = self._connection(psycopg2, kept)
            except psycopg2.OperationalError:
                return api.Refused(api.UNAVAILABLE)
            try:
                with connection.cursor() as cursor:
                    result = transaction(cursor)
                break
            except psycopg2.Error as problem:
                self._discard(connection)
                if problem.pgcode is None and kept:
                    continue
                return api.Refused(f"postgres-error-{problem.pgcode or 'connection'}")
        try:
            if isinstance(result, api.Refused):
                connection.rollback()
            else:
                connection.commit()
        except psycopg2.Error:
            self._discard(connection)
            raise
        with self._state:
            self._idle.append(connection)
        return result

    def _connection(self, psycopg2: Any, kept: bool) -> Any:
        """A kept connection if ``kept`` and one is idle, else a new one."""
        with self._state:
            if kept and self._idle:
                return self._idle.pop()
        return psycopg2.connect(
            connect_timeout=max(1, round(self._timeout)),
            options=f"-c statement_timeout={_STATEMENT_TIMEOUT_MS}",
            **self._postgres,
        )

    @staticmethod
    def _discard(connection: Any) -> None:
        # A broken connection may fail to close; it is dropped either way.
        with contextlib.suppress(Exception):
            connection.close()
