"""The reference system: fencecheck's own lock service, fenced store and audit sink.

Node-side programs (stdlib-only, run as ``python3 FILE --port ... --data-dir ...``):
:mod:`~systems.reference.lock_server` (leases, durable epochs, lock-delay),
:mod:`~systems.reference.store_server` (sinks ``store`` and ``store-batch``, fenced; ``audit``,
unfenced) and :mod:`~systems.reference.client` (the agents' client). The adapter,
:class:`ReferenceSystem`, installs them and plants the bug switches of :data:`BUG_SWITCHES`, one
per mistake of docs/design.md §1; with no switch the system is correct.
"""

from systems.reference.adapter import BUG_SWITCHES, Ports, ReferenceSystem

__all__ = ["BUG_SWITCHES", "Ports", "ReferenceSystem"]
