"""The redis system: Redis 7 (Debian's) as lock service, fenced stores and an unfenced sink.

The lock and its epoch are taken in one server-side script (``SET NX PX``, then ``INCR``); the
fenced store is a script comparing numeric epochs; persistence is ``appendonly yes``. Bug switches
plant the mistakes Redis users make: the lock's random value as token (redis-py's ``Lock``,
Redlock), default persistence (a crash forgets the counter), unchecked release and extend.
"""

from systems.redis.adapter import BUG_SWITCHES, PACKAGES, RedisSystem

__all__ = ["BUG_SWITCHES", "PACKAGES", "RedisSystem"]
