"""A holder client that imports a package absent from the controller (and from the node image
of the tests), as a psycopg2 client would: importing it here fails, and must never be tried."""

from __future__ import annotations

import fencecheck_absent_driver  # noqa: F401  (only the nodes would have it)

__all__: list[str] = []
