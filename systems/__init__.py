"""System-under-test adapters.

A system is packaged as an adapter implementing :class:`System` (see :mod:`systems.base`: the
required contract and the optional abilities) and registered under the entry-point group
``fencecheck.systems``; :func:`load_system` builds one by name and :func:`available_systems` lists
the names. :mod:`systems.reference` is fencecheck's own system with a bug switch per known fencing
mistake; :mod:`systems.holder_flaws` are the mistakes of the holder, available with every system;
:mod:`systems.deploy` helps adapters install and start programs, and :mod:`systems.kit` offers
the parts adapters would otherwise write alike. ``docs/adding-a-system.md`` is the guide.
"""

from systems import base

# The contract's names are listed once, in systems.base.__all__; the package offers all of them.
from systems.base import *  # noqa: F403
from systems.holder_flaws import HOLDER_FLAWS
from systems.registry import (
    ENTRY_POINT_GROUP,
    UnknownSystemError,
    available_systems,
    load_system,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "HOLDER_FLAWS",
    "UnknownSystemError",
    "available_systems",
    "load_system",
]
__all__ += base.__all__
