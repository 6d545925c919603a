"""The anomaly registry: one entry per anomaly, the one place that names and defines them.

``ANOMALY_NAMES``, the sentences, the help of ``fencecheck check``, which anomalies are expected on
an unguarded sink, and the definitions in ``docs/checker.md`` all derive from :data:`REGISTRY`;
adding an anomaly is one detector plus one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from checkers import explain

if TYPE_CHECKING:
    from harness.record.verdict import Anomaly

__all__ = ["ANOMALY_NAMES", "REGISTRY", "AnomalyKind", "markdown_table", "sentence"]


@dataclass(frozen=True, slots=True)
class AnomalyKind:
    """One anomaly: its stable name, what it means, who finds it and how it is said.

    ``detector`` is the module whose checker reports it. ``subject`` is the role of the operation
    that violated the property: the faults quoted are those on its holder (or on the servers)
    before it completed. ``expected_when_unguarded`` is true when an unfenced sink with no
    ordering mitigation shows it by design (reported, not counted against the run);
    ``ttl_matters`` when the lease TTL belongs in the sentence.
    """

    name: str
    meaning: str
    detector: str
    render: Callable[[Anomaly], str]
    subject: str
    expected_when_unguarded: bool = False
    ttl_matters: bool = False


REGISTRY: Final[dict[str, AnomalyKind]] = {
    kind.name: kind
    for kind in (
        AnomalyKind(
            "stale-write",
            "per sink and lock: an accepted write carries a lower epoch than a write accepted "
            "before it: before it in a key's order, in the sink's seq order across keys, or "
            "acknowledged before it was invoked (any key)",
            "checkers.logs, checkers.writes",
            explain.stale_write,
            "stale",
            expected_when_unguarded=True,
            ttl_matters=True,
        ),
        AnomalyKind(
            "wrongful-refusal",
            "a sink refused a write (or fenced read) as stale though no operation with a higher "
            "epoch for that lock (or its epoch from another holder, when the lock service granted "
            "it to two) had reached a fence before the refusal completed: a broken fence, even "
            "if it errs on the safe side",
            "checkers.refusals",
            explain.wrongful_refusal,
            "refused",
        ),
        AnomalyKind(
            "current-holder-refused",
            "a sink refused as stale a write from the holder whose grant was the latest in the "
            "lock service's own order (grant_seq), sent with that grant's epoch: the higher "
            "epoch came from a grant the service ordered earlier",
            "checkers.service_order",
            explain.current_holder_refused,
            "refused",
        ),
        AnomalyKind(
            "epoch-reuse",
            "one epoch granted to two different grants, or accepted from two different holders",
            "checkers.grants, checkers.writes",
            explain.epoch_reuse,
            "second",
            ttl_matters=True,
        ),
        AnomalyKind(
            "grant-regression",
            "a grant that began after another grant completed, or that the lock service's own "
            "order (grant_seq) places after it, carries a lower or equal epoch (same lock)",
            "checkers.grants, checkers.service_order",
            explain.grant_regression,
            "later",
            ttl_matters=True,
        ),
        AnomalyKind(
            "stale-holder-accepted",
            "a write accepted from a holder after another holder's grant that the lock "
            "service's own order (grant_seq) places later, with an epoch at or above that "
            "grant's: tokens ran against the lease order, so no fence could refuse it",
            "checkers.service_order",
            explain.stale_holder_accepted,
            "accepted",
            ttl_matters=True,
        ),
        AnomalyKind(
            "grant-after-expiry",
            "a grant answered to a holder after its own session had seen its lease end, which "
            "the lock service's own order (grant_seq) places after that end; a grant the "
            "service made before the end, whose reply the network or a pause merely delayed, "
            "is not counted",
            "checkers.expiry",
            explain.grant_after_expiry,
            "granted",
            ttl_matters=True,
        ),
        AnomalyKind(
            "lost-write",
            "a write acknowledged ok is missing from the final read of its sink and key",
            "checkers.logs",
            explain.lost_write,
            "lost",
        ),
        AnomalyKind(
            "phantom-write",
            "a write that failed, or that no holder sent to that sink and key, appears in a read",
            "checkers.logs, checkers.writes",
            explain.phantom_write,
            "phantom",
        ),
        AnomalyKind(
            "duplicate-write",
            "one write id appears twice in a read",
            "checkers.logs",
            explain.duplicate_write,
            "read",
        ),
        AnomalyKind(
            "divergent-reads",
            "two reads of one key are not prefixes of one another (the log forked or was "
            "truncated)",
            "checkers.logs",
            explain.divergent_reads,
            "read",
        ),
        AnomalyKind(
            "realtime-order",
            "write A completed before write B began, both accepted, yet B precedes A in the "
            "sink's order",
            "checkers.logs",
            explain.realtime_order,
            "second",
        ),
        AnomalyKind(
            "retry-after-reject",
            "a holder sent a write with an epoch at or below one the fence refused from it, "
            "unless that epoch was granted to it after the refusal",
            "checkers.writes",
            explain.retry_after_reject,
            "retry",
        ),
        AnomalyKind(
            "lost-update",
            "two accepted read-modify-writes were based on the same read",
            "checkers.logs",
            explain.lost_update,
            "second",
            expected_when_unguarded=True,
            ttl_matters=True,
        ),
    )
}
ANOMALY_NAMES: Final[tuple[str, ...]] = tuple(REGISTRY)
_FAULTS_QUOTED: Final = 3


def sentence(anomaly: Anomaly) -> str:
    """The sentence for ``anomaly``: its particular clause, the faults that could have caused
    it, and the lease TTL where it matters."""
    kind = REGISTRY.get(anomaly.name)
    parts = [kind.render(anomaly) if kind is not None else explain.generic(anomaly)]
    parts.extend(explain.describe_fault(window) for window in anomaly.faults[:_FAULTS_QUOTED])
    if anomaly.lease_ttl is not None and kind is not None and kind.ttl_matters:
        parts.append(f"lease TTL {explain.seconds(anomaly.lease_ttl)}")
    return "; ".join(parts)


def markdown_table() -> str:
    """The anomaly table of ``docs/checker.md``, generated so that the docs cannot drift."""
    rows = ["| name | meaning | expected on an unguarded sink |", "| --- | --- | --- |"]
    for kind in REGISTRY.values():
        expected = "yes" if kind.expected_when_unguarded else "no"
        rows.append(f"| `{kind.name}` | {kind.meaning} | {expected} |")
    return "\n".join(rows)
