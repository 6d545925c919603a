"""etcd (three members) as the lock service, etcd and PostgreSQL 15 as fenced stores.

:class:`EtcdSystem` is the adapter (registered as ``etcd``); :mod:`systems.etcd.holder` is the
holder client the harness ships to the workers; ``packages.txt`` lists the Debian packages of the
system's node image. See ``docs/systems/etcd.md``.
"""

from systems.etcd.adapter import BUG_SWITCHES, EtcdSystem

__all__ = ["BUG_SWITCHES", "EtcdSystem"]
