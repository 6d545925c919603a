"""The words of history format v1: operation names and the error words of failed operations.

Workloads, the recorder, the checkers and the report all spell these the same way because they
import them from here. Node-side code speaks the wire protocol's words
(:mod:`harness.nodeside.client`), which use the same strings for the same outcomes.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACQUIRE",
    "LEASE_EXPIRED",
    "NOT_HELD",
    "OPERATIONS",
    "READ",
    "RELEASE",
    "STALE_EPOCH",
    "TIMEOUT",
    "UNAVAILABLE",
    "UNREACHABLE",
    "WRITE",
]

ACQUIRE: Final = "acquire"
RELEASE: Final = "release"
WRITE: Final = "write"
READ: Final = "read"
OPERATIONS: Final = (ACQUIRE, RELEASE, WRITE, READ)

# A fenced sink refused the operation because it has seen a higher epoch for the lock.
STALE_EPOCH: Final = "stale-epoch"
# The holder's lease was already gone by its own clock: nothing was sent.
LEASE_EXPIRED: Final = "lease-expired"
# The holder has no lease of that epoch: nothing was sent.
NOT_HELD: Final = "not-held"
# The lock service or sink did not answer.
UNAVAILABLE: Final = "unavailable"
# The controller could not reach the holder's agent.
UNREACHABLE: Final = "unreachable"
# An acquire that waited its whole budget without a grant.
TIMEOUT: Final = "timeout"
