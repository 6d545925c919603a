"""The no-op system: an in-memory lock and fenced sink whose only purpose is measuring the harness.

:mod:`~systems.noop.server` (node-side, stdlib-only) grants leases with strictly increasing epochs
and fences writes to its sink ``memory``, all in memory with no disk; :mod:`~systems.noop.client`
is the agents' client; :class:`NoopSystem` installs them. Nothing survives a kill of the server,
so runs that kill it are refused (docs/systems/noop.md).
"""

from systems.noop.adapter import NoopSystem

__all__ = ["NoopSystem"]
