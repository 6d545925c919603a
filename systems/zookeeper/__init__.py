"""The zookeeper system: a three-member ZooKeeper ensemble, kazoo's lock recipe, czxid tokens.

The token of a grant is its lock node's czxid; the fenced store lives on ZooKeeper itself (a multi
that checks the lock node and creates the entry); an unfenced log sits beside it. Bug switches
plant the mistakes ZooKeeper users make: trusting ``Lock.is_acquired``, the sequence number as
token, an ownership check by a plain (follower) read.
"""

from systems.zookeeper.adapter import BUG_SWITCHES, MEMBERS, PACKAGES, ZooKeeperSystem

__all__ = ["BUG_SWITCHES", "MEMBERS", "PACKAGES", "ZooKeeperSystem"]
