"""The redis system's holder client, loaded by the agent on each worker node.

It talks to the Redis primary that Sentinel names, through redis-py (Debian's ``python3-redis``,
installed on the nodes: imported when a :class:`Client` is made, so the controller can ship this
file without having redis-py): a new connection asks Sentinel for the primary's address, and a
connection to a primary that was demoted since (Redis answers ``READONLY``) is closed, so the next
command follows the failover. Every step that must be atomic is one server-side Lua script:

- **acquire**: ``SET lock:L owner NX PX ttl`` and, only if it was set, ``INCR epoch:L``: the
  counter's value is the token, and the lock's value becomes ``owner/token`` so that renew, release
  and the ``owned`` sink can tell this grant from any other. The counter is also the grant's
  ``grant_seq``, Redis's own order of the lock's grants, taken in the step that wins the lease
  (with ``random-value-token`` the token is random and ``INCR grants:L`` counts the grants). A
  waiter holds nothing while it waits (it tries again every 20 ms), so no lease of its can end
  before its grant: the client never reports ``lease_ended``.
- **store** (fenced): compares the request's epoch with the highest seen for its lock
  (``mark:L``, numerically), refuses a lower one, and appends ``id epoch seq`` to the key's list,
  ``seq`` taken from the sink's own counter in the same script.
- **owned** (fenced by ownership): appends only while the lock's value is this grant's, the idiom
  of "check the lock is mine, then write" done atomically inside the lock's own server. A refusal
  is ``stale-epoch`` when the sink has accepted a higher epoch of the lock (its mark), else
  ``not-owner``: a lapsed grant alone is no proof that a newer one exists.
- **log** (unfenced): a plain ``RPUSH`` of ``id epoch``.

**Replication.** Each command that changes data goes out in one pipeline with ``WAIT 1 wait_ms`` on
the same connection, and counts only when the replica acknowledged it: a grant, a renewal, an
accepted write. Else a grant or renewal is refused, the outcome of a write or fenced read (which
raises the mark) is unknown (it may be lost in a failover), and a plain read is refused (a primary
without its replica may be one that a failover left behind). So every counted grant and write is on
both nodes, and a promoted replica never has a lower counter than a granted epoch. ``WAIT`` reports,
it does not prevent: the script has run on the primary either way, which is why a grant without the
acknowledgement is never used.

Its configuration (the ``client`` object of the agent's ``--config``): ``sentinels`` (a list of
``[host, port]``) and ``service`` (the primary's name there), ``secret_file`` (the run's secret on
the node: the password of Redis and of Sentinel, or none), ``node`` (the holder's name),
``timeout`` (seconds to wait for a reply), ``replica_acks`` (how many replicas must acknowledge;
0: replication is asynchronous), ``wait_ms`` (how long ``WAIT`` waits for them), and ``bugs``:
``random-value-token`` (the lock's random value is the token, as redis-py's ``Lock`` and Redlock
have it), ``unchecked-release`` (renew re-sets the lock and release deletes it, neither checking
whose it is) and ``owned-trusts-lease`` (the owned sink appends without checking the lock: it
relies on the holder writing only inside its lease).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.nodeside import client as api
from harness.nodeside import wire

__all__ = ["Client"]

RANDOM_VALUE_TOKEN = "random-value-token"
UNCHECKED_RELEASE = "unchecked-release"
OWNED_TRUSTS_LEASE = "owned-trusts-lease"

# KEYS: lock, counter. ARGV: owner, ttl ms. Returns the new epoch, or nil when the lock is held.
_ACQUIRE = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return nil end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '/' .. epoch, 'XX', 'KEEPTTL')
return epoch
"""
# KEYS: lock, counter. ARGV: owner/token, ttl ms. The lock's value is the token itself
# (random-value-token); the counter still counts the grants: their grant_seq, 0 when not granted.
_ACQUIRE_RANDOM = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
return redis.call('INCR', KEYS[2])
"""
# KEYS: lock. ARGV: owner/epoch, ttl ms. 1 when still this grant's and extended, else 0.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""
# The classic mistake: "extend" by setting the lock again, whoever holds it now.
_RENEW_UNCHECKED = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""
_RELEASE_UNCHECKED = """
redis.call('DEL', KEYS[1])
return 1
"""
# The sinks' scripts share one layout. KEYS: lock, the sink's mark for the lock (the highest
# epoch it accepted or read with), the key's list, the sink's seq counter. ARGV: the grant's lock
# value (owner/epoch), the epoch, the write's id. Epochs compare as numbers (tonumber): exact up
# to 2^53, which random tokens stay below. A guard answers -1 (stale: the mark is higher) or -2
# (not the owner), then the mark rises and the write appends ``id epoch seq`` or the read lists.
_MARK = """
local mark = tonumber(redis.call('GET', KEYS[2]) or '-1')
local epoch = tonumber(ARGV[2])
"""
_EPOCH_GUARD = """
if epoch < mark then return -1 end
"""
# The owned sink decides by ownership alone; the mark only names its refusal.
_OWNER_GUARD = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  if epoch < mark then return -1 end
  return -2
end
"""
_RAISE = """
if epoch > mark then redis.call('SET', KEYS[2], ARGV[2]) end
"""
_APPEND = """
local seq = redis.call('INCR', KEYS[4])
redis.call('RPUSH', KEYS[3], ARGV[3] .. ' ' .. ARGV[2] .. ' ' .. seq)
return seq
"""
_LIST = """
return redis.call('LRANGE', KEYS[3], 0, -1)
"""

_STORE = "store"
_OWNED = "owned"
_LOG = "log"
# An ownership check refused though the sink has seen no higher epoch: not STALE, which promises
# that it has (a lock can lapse with no newer grant, and a newer grant need not have written).
_NOT_OWNER = "not-owner"
_NEVER_SENT = api.Refused(api.UNAVAILABLE)
# What redis-py says when a command certainly had no effect: the connection could not be opened
# ("Error 111 connecting to ...", "Timeout connecting to ..."), Sentinel named no primary, or the
# server turned out to be a demoted primary, which refuses every write (READONLY).
_NO_EFFECT = ("connecting to", "no master found", "previous master is now a slave")
_BAD_REQUEST = api.Refused("bad-request")
_TIMED_OUT = api.Refused("timeout")
_POLL_S = 0.02
# Random tokens stay below 2^53, where Lua's numbers (doubles) are still exact integers.
_TOKEN_BITS = 52


class NotReplicated(Exception):
    """No replica acknowledged a change within the wait: it is on the primary only, and a failover
    may lose it."""


class Client:
    """Talks to the Redis primary for one holder (thread-safe: redis-py pools connections)."""

    def __init__(self, config: dict[str, Any]) -> None:
        import redis.sentinel  # Debian's python3-redis on the node; the controller builds no Client

        self._redis_errors: tuple[type[Exception], ...] = (redis.RedisError,)
        self._owner = str(config.get("node", "?"))
        bugs = set(config.get("bugs", ()))
        self._random_token = RANDOM_VALUE_TOKEN in bugs
        unchecked = UNCHECKED_RELEASE in bugs
        timeout = float(config.get("timeout", 10.0))
        secret_file = config.get("secret_file")
        password = wire.read_secret(str(secret_file)) if secret_file else None
        sockets = {"socket_timeout": timeout, "socket_connect_timeout": min(timeout, 2.0)}
        sentinel = redis.sentinel.Sentinel(
            [(str(host), int(port)) for host, port in config["sentinels"]],
            sentinel_kwargs={"password": password, **sockets},
            password=password,
            **sockets,
        )
        self._redis = sentinel.master_for(str(config["service"]), decode_responses=True)
        self._acks = int(config.get("replica_acks", 0))
        self._wait_ms = int(config.get("wait_ms", 1000))
        script = self._redis.register_script
        self._acquire_script = script(_ACQUIRE_RANDOM if self._random_token else _ACQUIRE)
        self._renew_script = script(_RENEW_UNCHECKED if unchecked else _RENEW)
        self._release_script = script(_RELEASE_UNCHECKED if unchecked else _RELEASE)
        # With owned-trusts-lease the owned sink checks nothing: the holder's lease is its guard.
        owner_guard = "" if OWNED_TRUSTS_LEASE in bugs else _OWNER_GUARD
        guards = {_STORE: _EPOCH_GUARD, _OWNED: owner_guard}
        self._writes = {
            sink: script(_MARK + guard + _RAISE + _APPEND) for sink, guard in guards.items()
        }
        self._reads = {
            sink: script(_MARK + guard + _RAISE + _LIST) for sink, guard in guards.items()
        }
        self._ttl_ms: dict[str, int] = {}
        self._state = threading.Lock()

    def _value(self, epoch: int) -> str:
        """The lock's value while grant ``epoch`` of this holder has it."""
        return f"{self._owner}/{epoch}"

    def _never_sent(self, problem: Exception) -> bool:
        """Whether redis-py's error means the request certainly had no effect (see _NO_EFFECT)."""
        message = str(problem).lower()
        return any(words in message for words in _NO_EFFECT)

    def _replicated(self, queue: Callable[[Any], object]) -> list[Any]:
        """Send the commands ``queue`` puts on a pipeline, then ``WAIT`` on the same connection;
        their replies, or :class:`NotReplicated` when too few replicas acknowledged them."""
        pipe = self._redis.pipeline(transaction=False)
        queue(pipe)
        if not self._acks:
            return list(pipe.execute())
        pipe.execute_command("WAIT", self._acks, self._wait_ms)
        replies = list(pipe.execute())
        acked = replies.pop()
        if int(acked) < self._acks:
            raise NotReplicated(
                f"{acked} of {self._acks} replicas acknowledged within {self._wait_ms} ms: the "
                "change is on the primary only and may be lost in a failover"
            )
        return replies

    def acquire(self, lock: str, ttl: float, wait: float) -> api.Grant | api.Refused | api.Unknown:
        """Poll the acquire script until it grants or ``wait`` runs out: ``timeout`` if the lock
        stayed held, ``unavailable`` if Redis did not answer at the last try."""
        ttl_ms = max(1, round(ttl * 1000))
        with self._state:
            self._ttl_ms[lock] = ttl_ms
        start = time.monotonic()
        while True:
            sent = time.monotonic()
            try:
                granted = self._grant(lock, ttl_ms)
            except NotReplicated:
                # Granted on the primary alone: never used, it lapses with its TTL.
                granted, refusal = None, _NEVER_SENT
            except self._redis_errors as problem:
                if not self._never_sent(problem):
                    raise
                # Redis is down (killed, cut off): keep trying within the wait, as a holder's
                # retry policy would, and say so only when the wait is over.
                granted, refusal = None, _NEVER_SENT
            else:
                refusal = _TIMED_OUT
            if granted is not None:
                epoch, grant_seq = granted
                # The lease began with the last try: everything before it held nothing.
                return api.Grant(epoch, sent - start, grant_seq)
            if time.monotonic() - start >= wait:
                return refusal
            time.sleep(_POLL_S)

    def _grant(self, lock: str, ttl_ms: int) -> tuple[int, int] | None:
        """One try: the grant's epoch and grant_seq (the lock's grant counter), or None."""
        if self._random_token:
            token = random.getrandbits(_TOKEN_BITS)
            keys = [f"lock:{lock}", f"grants:{lock}"]
            (counted,) = self._replicated(
                lambda pipe: self._acquire_script(
                    keys=keys, args=[self._value(token), ttl_ms], client=pipe
                )
            )
            return (token, int(counted)) if int(counted) > 0 else None
        keys = [f"lock:{lock}", f"epoch:{lock}"]
        (epoch,) = self._replicated(
            lambda pipe: self._acquire_script(keys=keys, args=[self._owner, ttl_ms], client=pipe)
        )
        return None if epoch is None else (int(epoch), int(epoch))

    def renew(self, lock: str, epoch: int) -> bool:
        """Extend the lock while it is still this grant's (with the switch: set it again)."""
        with self._state:
            ttl_ms = self._ttl_ms[lock]
        return self._changed(self._renew_script, [f"lock:{lock}"], [self._value(epoch), ttl_ms])

    def release(self, lock: str, epoch: int) -> bool:
        """Delete the lock if it is still this grant's (with the switch: whoever's it is)."""
        return self._changed(self._release_script, [f"lock:{lock}"], [self._value(epoch)])

    def _changed(self, script: Any, keys: list[str], args: list[Any]) -> bool:
        """Whether a renew or release script answered 1 and the replica has its effect."""
        try:
            (done,) = self._replicated(lambda pipe: script(keys=keys, args=args, client=pipe))
        except NotReplicated:
            return False
        return bool(done)

    def write(
        self, lock: str, sink: str, key: str, id: str, epoch: int, prev: Any
    ) -> api.Accepted | api.Refused | api.Unknown:
        """Accepted with the sink's ``seq`` (``log`` has none), refused as stale, as ``not-owner``
        (``owned``: the grant no longer holds the lock, and no higher epoch came) or as never
        sent; an exception when the outcome is unknown."""
        try:
            if sink == _LOG:
                self._replicated(lambda pipe: pipe.rpush(f"{_LOG}:{key}", f"{id} {epoch}"))
                return api.Accepted()
            if sink not in self._writes:
                return _BAD_REQUEST
            keys = [f"lock:{lock}", f"mark-{sink}:{lock}", f"{sink}:{key}", f"seq:{sink}"]
            script, args = self._writes[sink], [self._value(epoch), epoch, id]
            (seq,) = self._replicated(lambda pipe: script(keys=keys, args=args, client=pipe))
            seq = int(seq)
        except self._redis_errors as problem:
            if self._never_sent(problem):
                return _NEVER_SENT
            raise
        return _refusal(seq) or api.Accepted(seq)

    def read(
        self, sink: str, key: str, lock: str | None = None, epoch: int | None = None
    ) -> api.Read | api.Refused | api.Unknown:
        """The key's entries in the sink's order (with ``seq`` on the fenced sinks), or why not.

        A fenced read (``lock`` and ``epoch``) on ``store`` raises the lock's mark; on ``owned``
        it reads only while the grant holds the lock; ``log`` cannot fence a read. Without the
        replica's acknowledgement a plain read is refused (the server may be a primary that a
        failover left behind, missing what the new one accepted) and a fenced one's outcome is
        unknown.
        """
        try:
            if lock is None or epoch is None:
                (raw,) = self._replicated(lambda pipe: pipe.lrange(f"{sink}:{key}", 0, -1))
            elif sink in self._reads:
                keys = [f"lock:{lock}", f"mark-{sink}:{lock}", f"{sink}:{key}"]
                script, args = self._reads[sink], [self._value(epoch), epoch]
                (raw,) = self._replicated(lambda pipe: script(keys=keys, args=args, client=pipe))
            else:
                return _BAD_REQUEST
        except NotReplicated:
            if lock is None or epoch is None:
                return _NEVER_SENT  # a plain read changed nothing
            raise  # a fenced read raised the mark on the primary alone: unknown, like a write
        except self._redis_errors as problem:
            if self._never_sent(problem):
                return _NEVER_SENT
            raise
        if isinstance(raw, int):
            return _refusal(raw) or _BAD_REQUEST
        return api.Read(tuple(_entry(item) for item in raw))


def _refusal(code: int) -> api.Refused | None:
    """The refusal a script's negative answer means (None for a seq: accepted)."""
    if code == -1:
        return api.Refused(api.STALE)
    if code == -2:
        return api.Refused(_NOT_OWNER)
    return None


def _entry(item: str) -> api.Entry:
    """``id epoch [seq]`` as an entry of a read."""
    fields = item.split()
    return api.Entry(fields[0], int(fields[1]), int(fields[2]) if len(fields) > 2 else None)
