"""One sentence per anomaly, rendered from its evidence (Elle's manner).

"w2's write w2-15 (epoch 7) was accepted after w3's write w3-4 (epoch 8); w2 was paused from
12.1 s to 18.4 s; lease TTL 2 s". Every fact in a sentence comes from the evidence data, so the
report and the JSON can never disagree with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from harness.record.verdict import Anomaly, FaultWindow, OpRef

__all__ = [
    "describe_fault",
    "divergent_reads",
    "duplicate_write",
    "epoch_reuse",
    "generic",
    "grant_after_expiry",
    "grant_regression",
    "lost_update",
    "lost_write",
    "phantom_write",
    "realtime_order",
    "retry_after_reject",
    "seconds",
    "stale_write",
    "wrongful_refusal",
]

RESTARTED: Final = "restarted"


def seconds(ns: int | None) -> str:
    """``12100000000`` -> ``"12.1 s"``: at most three decimals, trailing zeros dropped."""
    if ns is None:
        return "an unknown time"
    # In integers: a time may be arbitrarily large (docs/design.md §4), beyond any float.
    millis, rest = divmod(abs(ns), 1_000_000)
    if rest > 500_000 or (rest == 500_000 and millis % 2):
        millis += 1  # half to even, as a float's format rounds
    whole, fraction = divmod(millis, 1000)
    text = f"{whole}.{fraction:03d}".rstrip("0").rstrip(".")
    return f"{'-' if ns < 0 and millis else ''}{text} s"


def describe_fault(window: FaultWindow) -> str:
    """``"w2 was paused from 12.1 s to 18.4 s"`` (or ``"... until the end"``); a fault whose
    events say what happened in a sentence is told by them (``"l1's clock jumped 3 s forward at
    12.1 s, and l1's clock jumped 3 s back at 15.4 s"``); a compound fault
    says each of its parts: ``"w2 was paused from 5.9 s to 9 s; store was killed at 8.4 s and
    listening again at 8.9 s"``; what a stop alone says is added: ``"w2 was held from 1.4 s to
    2.5 s (w2's write w2-13 (epoch 2) was held 1.06 s; ...)"``. A power loss says what it
    dropped: ``"s1 lost power at 12.1 s: 3 unsynced writes (412 bytes) dropped, and s1's power
    came back at 14 s"``."""
    if window.parts:
        text = "; ".join(describe_fault(part) for part in window.parts)
        return text if window.applied else f"{text} (failed to apply)"
    who = ", ".join(window.targets) if window.targets else "the cluster"
    if window.kind == RESTARTED:
        return (
            f"{who} was killed at {seconds(window.start)} and listening again at "
            f"{seconds(window.end)}"
        )
    if window.opened:
        text = _at(window.opened, window.start)
        if window.closed and window.end is not None:
            text += f", and {_at(window.closed, window.end)}"
        return text if window.applied else f"{text} (failed to apply)"
    if window.verb:
        what = f"{who} {'were' if len(window.targets) > 1 else 'was'} {window.verb}"
    else:
        what = f"{window.kind} on {who}"
    if window.end == window.start:
        text = f"{what} at {seconds(window.start)}"
    elif window.end is None:
        text = f"{what} from {seconds(window.start)} until the end"
    else:
        text = f"{what} from {seconds(window.start)} to {seconds(window.end)}"
    if window.closed:  # what the stop saw, e.g. which request a hold kept and how long
        text += f" ({window.closed})"
    return text if window.applied else f"{text} (failed to apply)"


def _at(said: str, when: int | None) -> str:
    """A fault event's own sentence with its time: after the sentence, or before the details a
    colon opens (``"s1 lost power at 12.1 s: 3 unsynced writes (412 bytes) dropped"``)."""
    head, colon, details = said.partition(": ")
    return f"{head} at {seconds(when)}{colon}{details}"


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


def stale_write(anomaly: Anomaly) -> str:
    """Which order showed the stale write after the newer one: the key's, the sink's ``seq``, or
    real time (the newer write acknowledged before the stale one was sent)."""
    stale, newer = anomaly.op("stale"), anomaly.op("newer")
    details = anomaly.details
    if details.get("fenced", True):
        guard = "fenced"
    else:
        guard = f"unfenced ({details.get('mitigation', 'none')})"
    rule = details.get("rule", "key order")
    if rule == "realtime" and newer is not None and stale is not None:
        return (
            f"{_write(stale)} was accepted by {guard} {_place(anomaly)} although "
            f"{_write(newer)} to {newer.sink}/{newer.key} was acknowledged at "
            f"{seconds(newer.time)}, before it was sent at {seconds(stale.invoke_time)}"
        )
    if rule == "seq" and newer is not None:
        seqs = details.get("seqs", [None, None])
        return (
            f"{_write(stale)} was accepted by {guard} {_place(anomaly)} at seq {seqs[1]}, after "
            f"{_write(newer)} to {newer.sink}/{newer.key} at seq {seqs[0]}"
        )
    return f"{_write(stale)} was accepted by {guard} {_place(anomaly)} after {_write(newer)}"


def wrongful_refusal(anomaly: Anomaly) -> str:
    """The refused operation and the highest epoch of its lock that could have reached a fence."""
    refused = anomaly.op("refused")
    if refused is None:
        return generic(anomaly)
    what = f"{_write(refused)}" if refused.f == "write" else f"{refused.holder}'s fenced read"
    if refused.f != "write":
        what += f" (epoch {refused.epoch})"
    highest = anomaly.details.get("highest")
    known = (
        f"the highest epoch of {anomaly.lock} sent before it was {highest}"
        if highest is not None
        else f"no epoch of {anomaly.lock} had been sent before it"
    )
    failed = anomaly.details.get("failed")
    if failed:
        listed = ", ".join(str(epoch) for epoch in failed)
        known += f" (epoch {listed}, in flight then, failed: it never reached a fence)"
    return (
        f"{_place(anomaly)} refused {what} as stale at {seconds(refused.time)}, though no "
        f"operation with a higher epoch had reached it: {known}"
    )


def epoch_reuse(anomaly: Anomaly) -> str:
    """One epoch granted twice, or accepted from two holders."""
    first, second = anomaly.op("first"), anomaly.op("second")
    if first is None or second is None:
        return generic(anomaly)
    if first.f == "acquire":
        return (
            f"lock {anomaly.lock} granted epoch {second.epoch} twice: to {first.holder} at "
            f"{seconds(first.time)} and to {second.holder} at {seconds(second.time)}"
        )
    return (
        f"epoch {second.epoch} of lock {anomaly.lock} was accepted from two holders: "
        f"{_write(first)} and {_write(second)}"
    )


def grant_regression(anomaly: Anomaly) -> str:
    """A grant begun after a higher one completed, or placed after it by the lock service's own
    order, with its epochs and times."""
    earlier, later = anomaly.op("earlier"), anomaly.op("later")
    if earlier is None or later is None:
        return generic(anomaly)
    seqs = anomaly.details.get("grant_seqs")
    if anomaly.details.get("order") == "grant_seq" and seqs:
        return (
            f"the lock service ordered {later.holder}'s grant of {anomaly.lock} (grant_seq "
            f"{seqs[1]}, answered at {seconds(later.time)}) after {earlier.holder}'s (grant_seq "
            f"{seqs[0]}, epoch {earlier.epoch}, answered at {seconds(earlier.time)}), yet it "
            f"carries epoch {later.epoch}"
        )
    began = anomaly.details.get("lease_began")
    if began is not None:
        return (
            f"{later.holder}'s lease of {anomaly.lock} began at {seconds(began)} (its acquire, "
            f"sent at {seconds(later.invoke_time)}, waited), after {earlier.holder}'s grant of "
            f"epoch {earlier.epoch} completed at {seconds(earlier.time)}, yet was granted epoch "
            f"{later.epoch}"
        )
    return (
        f"{later.holder}'s acquire of {anomaly.lock} began at {seconds(later.invoke_time)}, after "
        f"{earlier.holder}'s grant of epoch {earlier.epoch} completed at "
        f"{seconds(earlier.time)}, yet was granted epoch {later.epoch}"
    )


def grant_after_expiry(anomaly: Anomaly) -> str:
    """A grant the lock service made after it had ended the waiter's own lease."""
    granted = anomaly.op("granted")
    details = anomaly.details
    if granted is None or "ended_grant_seq" not in details:
        return generic(anomaly)
    told = (
        "its session was told its lease had expired"
        if details.get("how") == "expired"
        else ("it lost its session")
    )
    return (
        f"the lock service granted {anomaly.lock} to {granted.holder} (grant_seq "
        f"{details.get('grant_seq')}, epoch {granted.epoch}, answered at "
        f"{seconds(granted.time)}) after it had ended that holder's lease: {told} at "
        f"{seconds(details.get('ended_at'))}, when the service's grant_seq was "
        f"{details.get('ended_grant_seq')}"
    )


def stale_holder_accepted(anomaly: Anomaly) -> str:
    """A write accepted from a holder the lock service's order had already superseded."""
    accepted, own, later = anomaly.op("accepted"), anomaly.op("superseded"), anomaly.op("later")
    seqs = anomaly.details.get("grant_seqs")
    if accepted is None or own is None or later is None or not seqs:
        return generic(anomaly)
    return (
        f"{_place(anomaly)} accepted {_write(accepted)}, sent at "
        f"{seconds(accepted.invoke_time)} under its grant of epoch {own.epoch} (grant_seq "
        f"{seqs[0]}), after the lock service had granted {anomaly.lock} to {later.holder} "
        f"(grant_seq {seqs[1]}, epoch {later.epoch}, answered at {seconds(later.time)}): the "
        "tokens ran against the lease order, so no fence could refuse it"
    )


def current_holder_refused(anomaly: Anomaly) -> str:
    """A write refused from the holder the lock service's order names current."""
    refused, grant = anomaly.op("refused"), anomaly.op("grant")
    if refused is None or grant is None:
        return generic(anomaly)
    return (
        f"{_place(anomaly)} refused {_write(refused)} as stale at {seconds(refused.time)}, "
        f"though its grant of {anomaly.lock} (grant_seq {anomaly.details.get('grant_seq')}, "
        f"answered at {seconds(grant.time)}) was the latest in the lock service's order: the "
        "higher epoch the fence had seen came from a grant the service ordered earlier"
    )


def lost_write(anomaly: Anomaly) -> str:
    """The acknowledged write and the final read that lacks it."""
    lost, read = anomaly.op("lost"), anomaly.op("read")
    acked = seconds(lost.time) if lost is not None else "an unknown time"
    entries = anomaly.details.get("final_entries")
    shown = " (an earlier read had shown it)" if anomaly.details.get("shown_before") else ""
    began = seconds(read.invoke_time) if read is not None else "an unknown time"
    return (
        f"{_write(lost)} was acknowledged at {acked} but is missing from the final read of "
        f"{_place(anomaly)}, which began at {began} and returned {entries} entries{shown}"
    )


def phantom_write(anomaly: Anomaly) -> str:
    """An entry whose write failed, went elsewhere, or was never sent."""
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


def duplicate_write(anomaly: Anomaly) -> str:
    """One id at two positions of one read."""
    positions = anomaly.details.get("positions", ())
    where = " and ".join(str(position) for position in positions)
    return (
        f"write {anomaly.details.get('id')} appears twice in {_read(anomaly.op('read'))} of "
        f"{_place(anomaly)} (positions {where})"
    )


def divergent_reads(anomaly: Anomaly) -> str:
    """Two reads of one key and the first position where they differ."""
    reference, read = anomaly.op("reference"), anomaly.op("read")
    details = anomaly.details
    position = details.get("position")
    theirs = details.get("reference_id") or "nothing"
    ours = details.get("read_id") or "nothing"
    return (
        f"{_read(reference)} and {_read(read)} of {_place(anomaly)} are not prefixes of one "
        f"another: position {position} holds {theirs} in the first and {ours} in the second"
    )


def realtime_order(anomaly: Anomaly) -> str:
    """A write completed before another began, yet ordered after it."""
    first, second = anomaly.op("first"), anomaly.op("second")
    done = seconds(first.time) if first is not None else "an unknown time"
    began = seconds(second.invoke_time) if second is not None else "an unknown time"
    return (
        f"{_write(first)} completed at {done} before {_write(second)} began at {began}, yet "
        f"{_place(anomaly)} orders the second first"
    )


def retry_after_reject(anomaly: Anomaly) -> str:
    """A holder sending again an epoch the fence had refused."""
    refused, retry = anomaly.op("refused"), anomaly.op("retry")
    if refused is None or retry is None:
        return generic(anomaly)
    return (
        f"{retry.holder} sent write {retry.id} with epoch {retry.epoch} of lock {anomaly.lock} at "
        f"{seconds(retry.invoke_time)} after its write {refused.id} with epoch {refused.epoch} "
        f"was refused as stale at {seconds(refused.time)}"
    )


def lost_update(anomaly: Anomaly) -> str:
    """Two accepted read-modify-writes based on the same entry."""
    first, second = anomaly.op("first"), anomaly.op("second")
    return (
        f"{_write(first)} and {_write(second)} were both accepted by {_place(anomaly)}, both "
        f"based on the read that ended at {anomaly.details.get('prev')}"
    )


def generic(anomaly: Anomaly) -> str:
    """The name and the operations, for an anomaly with too little evidence for its own
    sentence."""
    ops = ", ".join(f"{op.role} {op.f} at index {op.index}" for op in anomaly.ops)
    return f"{anomaly.name}: {ops}"
