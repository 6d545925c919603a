"""Check a whole history: stream its events through every checker and compose the verdict.

One pass in index order (which is real-time order: the reader refuses a history whose times go
back or whose indexes do not rise). Memory holds per-key logs (a compact row per accepted write),
the records of unresolved writes, per-lock, per-holder and per-epoch state, and the nemesis
events; never the history itself. The same pass counts the run's coverage (what it exercised,
:mod:`checkers.coverage`), so the one :class:`~harness.record.verdict.Verdict` carries both. The
verdict is never ``True`` by default: it takes at least one successful read and one accepted
write, every acknowledged write verified by a later read of its key, and every fault applied.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final

from checkers.coverage import CoverageTap
from checkers.expiry import ExpiryWatch
from checkers.faults import FaultTimeline
from checkers.findings import DEFAULT_MAX_EVIDENCE, Findings
from checkers.grants import GrantChecker, holder_of
from checkers.logs import ReadChecker
from checkers.refusals import FenceWatch
from checkers.service_order import ServiceOrder
from checkers.staleness import CrossKey
from checkers.tables import Names
from checkers.writes import WriteChecker
from harness.record import NEMESIS, Event, HistoryError, paired, read_history
from harness.record.inventory import Inventory, Sink, normalize_inventory
from harness.record.verdict import Counts, OpRef, SinkVerdict, Validity, Verdict
from harness.record.vocabulary import STALE_EPOCH

__all__ = ["FINAL_READ_ADVICE", "check", "check_file"]

_EXAMPLES: Final = 3
FINAL_READ_ADVICE: Final = ": end the workload with a final read of every key"
"""How the unknown reason for writes never read back ends: a runner whose run was cut short
before its final reads replaces this advice with the reason."""
_TYPES: Final = ("invoke", "ok", "fail", "info")
_FENCED_READ_FIX = 'a fenced read\'s value is {"sink": ..., "key": ..., "lock": L, "epoch": N >= 0}'
_NO_SEQ: Final = (
    "cross-key staleness not observable: the sink reports no seq, so only writes acknowledged "
    "before another was sent are compared across keys"
)
_SEQ_MISSING: Final = "the inventory says the sink reports seq, yet no write or read entry had one"
_NO_GRANT_SEQ: Final = (
    "grant order not observable: the lock service reports no grant_seq, so grants are ordered "
    "by real time only (a grant that waited overlaps the others and may be linearized first) "
    "and stale-holder-accepted and current-holder-refused cannot be judged"
)


def check(
    events: Iterable[Event],
    *,
    inventory: Inventory | None = None,
    lease_ttl: float | None = None,
    max_evidence: int = DEFAULT_MAX_EVIDENCE,
    roles: Mapping[str, str] | None = None,
) -> Verdict:
    """Judge ``events`` (in history order) and return the verdict with its evidence and the
    run's coverage, all from one pass.

    ``inventory`` maps sink names to :class:`~harness.record.Sink` (or ``(fenced,
    mitigation)`` pairs); without one every sink counts as fenced, and so does a sink it omits.
    ``lease_ttl`` (seconds) is quoted in explanations and tells a stop past the lease from a
    short one in the coverage. ``max_evidence`` caps the evidence kept per anomaly name (every
    occurrence is still counted). ``roles`` (node name -> role, from the run's topology) counts
    restarts per role and a worker that never answered as unreachable. Raises
    :class:`harness.record.HistoryError` for a malformed history.
    """
    return _Run(normalize_inventory(inventory), lease_ttl, max_evidence, roles).run(events)


def check_file(
    path: str | os.PathLike[str],
    *,
    inventory: Inventory | None = None,
    lease_ttl: float | None = None,
    max_evidence: int = DEFAULT_MAX_EVIDENCE,
    roles: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> Verdict:
    """:func:`check` a ``history.jsonl`` file, streaming it; what reading it found beside its
    events (a torn last line) is appended to ``notes``."""
    return check(
        read_history(path, notes=notes),
        inventory=inventory,
        lease_ttl=lease_ttl,
        max_evidence=max_evidence,
        roles=roles,
    )


class _Run:
    def __init__(
        self,
        inventory: dict[str, Sink],
        lease_ttl: float | None,
        max_evidence: int,
        roles: Mapping[str, str] | None,
    ) -> None:
        self.inventory = inventory
        self.lease_ttl = lease_ttl
        self.max_evidence = max_evidence
        self.findings = Findings(inventory, max_evidence)
        names = Names()
        self.cross = CrossKey(self.findings)
        self.fence = FenceWatch(self.findings)
        self.faults = FaultTimeline()
        self.order = ServiceOrder(self.findings)
        self.expiry = ExpiryWatch(self.findings)
        self.grants = GrantChecker(self.findings, names, self.order, self.expiry)
        self.writes = WriteChecker(self.findings, names, self.cross, self.order)
        self.reads = ReadChecker(self.findings, self.writes, names, self.cross)
        self.ops: Counter[tuple[str, str]] = Counter()
        self.holders: set[str | None] = set()
        self.coverage = CoverageTap(sinks=inventory, lease_ttl=lease_ttl, roles=roles)

    def run(self, events: Iterable[Event]) -> Verdict:
        ops, holders = self.ops, self.holders
        faults, grants, writes, reads = self.faults, self.grants, self.writes, self.reads
        fence = self.fence
        count = self.coverage.count
        for event, invoke in paired(events):
            count(event)
            f = event.f
            kind = event.type
            if event.process == NEMESIS:
                faults.add(event)
                continue
            ops[f, kind] += 1
            holders.add(event.node)
            if f == "write":
                if invoke is None:
                    record = writes.invoke(event)
                    fence.sent(event.process, record.lock, record.epoch, holder_of(event))
                else:
                    records = writes.complete(event, invoke)
                    record = records[0]
                    refused = kind == "fail" and record.error == STALE_EPOCH
                    fence.done(event.process, kind, record.ref("refused") if refused else None)
                    if kind == "ok":
                        for part in records:
                            if part.position is not None:
                                reads.acked(part)
            elif f == "read":
                if invoke is None:
                    self._read_sent(event)
                else:
                    fence.done(event.process, kind, _refused_read(event, invoke))
                    if kind == "ok":
                        reads.read_ok(event, invoke)
            elif f == "acquire":
                if invoke is None:
                    grants.invoke(event)
                elif grants.complete(event, invoke):
                    lock = GrantChecker.lock_of(event, invoke)
                    writes.granted(holder_of(event), lock, event.value["epoch"], event.index)
                    fence.granted(lock, event.value["epoch"], holder_of(event))
            elif f == "release" and invoke is not None:
                grants.released(event, invoke)
        return self._result()

    def _read_sent(self, event: Event) -> None:
        """A read was invoked; one carrying an epoch is fenced and may raise a fence's mark."""
        value = event.value
        epoch = value.get("epoch")
        if epoch is None:
            return
        lock = value.get("lock")
        if not (type(epoch) is int and epoch >= 0 and isinstance(lock, str)):
            raise HistoryError(
                event.line, "a fenced read needs a lock and an integer epoch >= 0", _FENCED_READ_FIX
            )
        self.fence.sent(event.process, lock, epoch, holder_of(event))

    def _result(self) -> Verdict:
        unverified = self.reads.finish()
        windows = self.faults.windows()
        ttl_ns = round(self.lease_ttl * 1e9) if self.lease_ttl is not None else None
        findings = self.findings
        holders = {node for node in self.holders if node is not None}
        counted = findings.anomalies(findings.counted, windows, ttl_ns, holders)
        expected = findings.anomalies(findings.expected, windows, ttl_ns, holders)
        reasons = self._unknown_reasons(unverified)
        valid: Validity = False if findings.counted.counts else ("unknown" if reasons else True)
        return Verdict(
            valid=valid,
            anomalies=counted,
            anomaly_counts=dict(findings.counted.counts),
            expected=expected,
            expected_counts=dict(findings.expected.counts),
            unknown_reasons=tuple(reasons),
            sinks=self._sinks(unverified),
            counts=self._counts(),
            faults=windows,
            lease_ttl=self.lease_ttl,
            max_evidence=self.max_evidence,
            grant_seq_observable=bool(self.grants.grants)
            and self.order.sequenced == self.grants.grants,
            grant_coverage=_grant_coverage(self.order.sequenced, self.grants.grants)
            + self.expiry.coverage(),
            coverage=self.coverage.coverage(),
        )

    def _unknown_reasons(self, unverified: Counter[tuple[str, str]]) -> list[str]:
        reasons: list[str] = []
        if not self.ops:
            reasons.append("nothing to judge: the history holds no client operations")
        if not self.reads.reads:
            reasons.append("no successful read: nothing shows what the sinks accepted")
        if not self.writes.accepted:
            reasons.append("no accepted write: no write was acknowledged or shown by a read")
        reasons.extend(self.faults.failures)
        if unverified:
            examples = ", ".join(f"{sink}/{key}" for sink, key in sorted(unverified)[:_EXAMPLES])
            more = ", ..." if len(unverified) > _EXAMPLES else ""
            reasons.append(
                f"{sum(unverified.values())} acknowledged write(s) on {len(unverified)} key(s) "
                f"({examples}{more}) were never read by a read begun after them" + FINAL_READ_ADVICE
            )
        return reasons

    def _sinks(self, unverified: Counter[tuple[str, str]]) -> dict[str, SinkVerdict]:
        keys: Counter[str] = Counter(sink for sink, _ in self.reads.logs)
        read: set[str] = {sink for (sink, _), log in self.reads.logs.items() if log.last}
        unknown: dict[str, list[str]] = {}
        for sink, key in sorted(unverified):
            unknown.setdefault(sink, []).append(key)
        counted = self.findings.counted.by_sink
        expected = self.findings.expected.by_sink
        accepted = self.writes.accepted_by_sink
        out: dict[str, SinkVerdict] = {}
        for sink in sorted({*self.inventory, *self.writes.sinks, *keys}):
            spec = self.findings.spec(sink)
            reasons = []
            if not accepted[sink]:
                reasons.append("no accepted write")
            if sink not in read:
                reasons.append("no successful read")
            if sink in unknown:
                reasons.append(f"{len(unknown[sink])} key(s) with writes no read verified")
            valid: Validity = False if counted.get(sink) else ("unknown" if reasons else True)
            seq = sink in self.cross.sequenced
            out[sink] = SinkVerdict(
                name=sink,
                fenced=spec.fenced,
                mitigation=spec.mitigation,
                declared=sink in self.inventory,
                valid=valid,
                keys=keys[sink],
                accepted_writes=accepted[sink],
                anomalies=dict(counted.get(sink, {})),
                expected=dict(expected.get(sink, {})),
                unknown_keys=tuple(unknown.get(sink, ())),
                reasons=tuple(reasons),
                seq_observable=seq,
                coverage=_seq_coverage(seq, spec.seq, accepted[sink]),
            )
        return out

    def _counts(self) -> Counts:
        ops: dict[str, dict[str, int]] = {}
        for (f, kind), number in self.ops.items():
            ops.setdefault(f, dict.fromkeys((*_TYPES, "open"), 0))[kind] = number
        for per_type in ops.values():
            per_type["open"] = (
                per_type["invoke"] - per_type["ok"] - per_type["fail"] - (per_type["info"])
            )
        return Counts(
            events=sum(self.ops.values()) + self.faults.events,
            nemesis=self.faults.events,
            ops=dict(sorted(ops.items())),
            grants=self.grants.grants,
            successful_reads=self.reads.reads,
            accepted_writes=self.writes.accepted,
            refused_writes=self.writes.refused,
            keys=len(self.reads.logs),
        )


def _refused_read(event: Event, invoke: Event) -> OpRef | None:
    """A fenced read a fence refused as stale, as evidence (``None`` for any other outcome)."""
    error = event.error if event.error is not None else event.value.get("error")
    if event.type != "fail" or error != STALE_EPOCH:
        return None
    value = invoke.value
    return OpRef.completed(
        "refused",
        event,
        invoke,
        lock=value.get("lock"),
        epoch=value.get("epoch"),
        sink=value.get("sink"),
        key=value.get("key"),
        error=STALE_EPOCH,
    )


def _seq_coverage(observed: bool, declared: bool, accepted: int) -> tuple[str, ...]:
    """What the sink's ``seq`` let the run observe; nothing to say of a sink no write reached."""
    if observed or not accepted:
        return ()
    return (_NO_SEQ, _SEQ_MISSING) if declared else (_NO_SEQ,)


def _grant_coverage(sequenced: int, grants: int) -> tuple[str, ...]:
    """What the grants' ``grant_seq`` let the run observe; nothing to say without grants."""
    if not grants or sequenced == grants:
        return ()
    if not sequenced:
        return (_NO_GRANT_SEQ,)
    return (f"{grants - sequenced} of {grants} grants carried no grant_seq: {_NO_GRANT_SEQ}",)
