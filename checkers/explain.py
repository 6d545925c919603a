"""One sentence per anomaly, rendered from its evidence (Elle's manner).

"w2's write w2-15 (epoch 7) was accepted after w3's write w3-4 (epoch 8); w2 was paused from
12.1 s to 18.4 s; lease TTL 2 s". Every fact in a sentence comes from the evidence data, so the
report and the JSON can never disagree with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from checkers.evidence import Anomaly, FaultWindow, OpRef

__all__ = ["describe_fault", "explain", "seconds"]

_FAULT_VERBS: Final[dict[str, str]] = {
    "pause": "paused",
    "freeze": "frozen",
    "throttle": "throttled",
    "partition": "partitioned",
    "kill": "killed",
    "restart": "restarted",
    "clock": "skewed",
}
_FAULTS_QUOTED: Final = 2


def seconds(ns: int | None) -> str:
    """``12100000000`` -> ``"12.1 s"``: at most three decimals, trailing zeros dropped."""
    if ns is None:
        return "an unknown time"
    text = f"{ns / 1e9:.3f}".rstrip("0").rstrip(".")
    return f"{text} s"


def describe_fault(window: FaultWindow) -> str:
    """``"w2 was paused from 12.1 s to 18.4 s"`` (or ``"... until the end"``)."""
    who = ", ".join(window.targets) if window.targets else "the cluster"
    verb = _FAULT_VERBS.get(window.kind)
    what = f"{who} {'were' if len(window.targets) > 1 else 'was'} {verb}" if verb else None
    if what is None:
        what = f"{window.kind} on {who}"
    if window.end == window.start:
        text = f"{what} at {seconds(window.start)}"
    elif window.end is None:
        text = f"{what} from {seconds(window.start)} until the end"
    else:
        text = f"{what} from {seconds(window.start)} to {seconds(window.end)}"
    return text if window.applied else f"{text} (failed to apply)"


def explain(anomaly: Anomaly) -> str:
    """The sentence for ``anomaly``: its particular clause, then faults and the lease TTL."""
    render = _RENDERERS.get(anomaly.name, _generic)
    parts = [render(anomaly)]
    parts.extend(describe_fault(window) for window in _quoted_faults(anomaly))
    if anomaly.lease_ttl is not None and anomaly.name in _TTL_MATTERS:
        parts.append(f"lease TTL {seconds(anomaly.lease_ttl)}")
    return "; ".join(parts)


def _quoted_faults(anomaly: Anomaly) -> list[FaultWindow]:
    nodes = {op.node for op in anomaly.ops if op.node is not None}
    aimed = [window for window in anomaly.faults if nodes.intersection(window.targets)]
    return (aimed or list(anomaly.faults))[:_FAULTS_QUOTED]


def _write(op: OpRef | None) -> str:
    if op is None:
        return "an unknown write"
    epoch = f" (epoch {op.epoch})" if op.epoch is not None else ""
    return f"{op.holder}'s write {op.id}{epoch}"


def _place(anomaly: Anomaly) -> str:
    return f"{anomaly.sink}/{anomaly.key}"


def _read(op: OpRef | None) -> str:
    if op is None:
        return "a read"
    return f"the read by {op.holder} completed at {seconds(op.time)} (index {op.index})"


def _stale_write(anomaly: Anomaly) -> str:
    stale, newer = anomaly.op("stale"), anomaly.op("newer")
    details = anomaly.details
    if details.get("fenced", True):
        guard = "fenced"
    else:
        guard = f"unfenced ({details.get('mitigation', 'none')})"
    return f"{_write(stale)} was accepted by {guard} {_place(anomaly)} after {_write(newer)}"


def _epoch_reuse(anomaly: Anomaly) -> str:
    first, second = anomaly.op("first"), anomaly.op("second")
    if first is None or second is None:
        return _generic(anomaly)
    if first.f == "acquire":
        return (
            f"lock {anomaly.lock} granted epoch {second.epoch} twice: to {first.holder} at "
            f"{seconds(first.time)} and to {second.holder} at {seconds(second.time)}"
        )
    return (
        f"epoch {second.epoch} of lock {anomaly.lock} was accepted from two holders: "
        f"{_write(first)} and {_write(second)}"
    )


def _grant_regression(anomaly: Anomaly) -> str:
    earlier, later = anomaly.op("earlier"), anomaly.op("later")
    if earlier is None or later is None:
        return _generic(anomaly)
    return (
        f"{later.holder}'s acquire of {anomaly.lock} began at {seconds(later.invoke_time)}, after "
        f"{earlier.holder}'s grant of epoch {earlier.epoch} completed at "
        f"{seconds(earlier.time)}, yet was granted epoch {later.epoch}"
    )


def _lost_write(anomaly: Anomaly) -> str:
    lost, read = anomaly.op("lost"), anomaly.op("read")
    acked = seconds(lost.time) if lost is not None else "an unknown time"
    entries = anomaly.details.get("final_entries")
    shown = " (an earlier read had shown it)" if anomaly.details.get("shown_before") else ""
    began = seconds(read.invoke_time) if read is not None else "an unknown time"
    return (
        f"{_write(lost)} was acknowledged at {acked} but is missing from the final read of "
        f"{_place(anomaly)}, which began at {began} and returned {entries} entries{shown}"
    )


def _phantom_write(anomaly: Anomaly) -> str:
    phantom, read = anomaly.op("phantom"), anomaly.op("read")
    position = anomaly.details.get("position")
    where = f"{_read(read)} of {_place(anomaly)} (position {position})"
    reason = anomaly.details.get("reason")
    if reason == "failed" and phantom is not None:
        error = f" ({phantom.error})" if phantom.error else ""
        return f"{_write(phantom)} failed{error} at {seconds(phantom.time)} yet appears in {where}"
    if reason == "misplaced" and phantom is not None:
        return f"{_write(phantom)} was sent to {phantom.sink}/{phantom.key} yet appears in {where}"
    return f"entry {anomaly.details.get('id')} appears in {where} but no holder wrote it there"


def _duplicate_write(anomaly: Anomaly) -> str:
    positions = anomaly.details.get("positions", ())
    where = " and ".join(str(position) for position in positions)
    return (
        f"write {anomaly.details.get('id')} appears twice in {_read(anomaly.op('read'))} of "
        f"{_place(anomaly)} (positions {where})"
    )


def _divergent_reads(anomaly: Anomaly) -> str:
    reference, read = anomaly.op("reference"), anomaly.op("read")
    details = anomaly.details
    position = details.get("position")
    theirs = details.get("reference_id") or "nothing"
    ours = details.get("read_id") or "nothing"
    return (
        f"{_read(reference)} and {_read(read)} of {_place(anomaly)} are not prefixes of one "
        f"another: position {position} holds {theirs} in the first and {ours} in the second"
    )


def _realtime_order(anomaly: Anomaly) -> str:
    first, second = anomaly.op("first"), anomaly.op("second")
    done = seconds(first.time) if first is not None else "an unknown time"
    began = seconds(second.invoke_time) if second is not None else "an unknown time"
    return (
        f"{_write(first)} completed at {done} before {_write(second)} began at {began}, yet "
        f"{_place(anomaly)} orders the second first"
    )


def _retry_after_reject(anomaly: Anomaly) -> str:
    refused, retry = anomaly.op("refused"), anomaly.op("retry")
    if refused is None or retry is None:
        return _generic(anomaly)
    return (
        f"{retry.holder} sent write {retry.id} with epoch {retry.epoch} of lock {anomaly.lock} at "
        f"{seconds(retry.invoke_time)} after its write {refused.id} with epoch {refused.epoch} "
        f"was refused as stale at {seconds(refused.time)}"
    )


def _lost_update(anomaly: Anomaly) -> str:
    first, second = anomaly.op("first"), anomaly.op("second")
    return (
        f"{_write(first)} and {_write(second)} were both accepted by {_place(anomaly)}, both "
        f"based on the read that ended at {anomaly.details.get('prev')}"
    )


def _generic(anomaly: Anomaly) -> str:
    ops = ", ".join(f"{op.role} {op.f} at index {op.index}" for op in anomaly.ops)
    return f"{anomaly.name}: {ops}"


_RENDERERS: Final[dict[str, Callable[[Anomaly], str]]] = {
    "stale-write": _stale_write,
    "epoch-reuse": _epoch_reuse,
    "grant-regression": _grant_regression,
    "lost-write": _lost_write,
    "phantom-write": _phantom_write,
    "duplicate-write": _duplicate_write,
    "divergent-reads": _divergent_reads,
    "realtime-order": _realtime_order,
    "retry-after-reject": _retry_after_reject,
    "lost-update": _lost_update,
}
_TTL_MATTERS: Final = frozenset(("stale-write", "grant-regression", "epoch-reuse", "lost-update"))
