"""Property tests: histories of a correct fenced system are valid; one planted mistake is caught.

Plans are lists of small steps (acquire, write, read, pause...) that the model of
:mod:`tests.support.simulation` plays, so Hypothesis shrinks a failure to the few steps that matter.
Each mutation plants one mistake in what the model recorded and must yield exactly its anomaly.
"""

from __future__ import annotations

import copy
import itertools
import random
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, assume, find, given, settings
from hypothesis import strategies as st

from checkers import Verdict, check
from harness.record import Sink, event_from_dict
from tests.support.simulation import MS, FencedSystem

Raw = list[dict[str, Any]]
Step = tuple[str, int, int, int, int]

INVENTORY = {"store": Sink("store", fenced=True), "recorder": Sink("recorder", fenced=False)}
KINDS = (
    "acquire",
    "release",
    "read",
    "write",
    "rmw",
    "info-landed",
    "info-lost",
    "wait",
    "pause",
    "takeover",
)

steps = st.tuples(
    st.sampled_from(KINDS),
    st.integers(0, 3),  # holder
    st.integers(0, 1),  # sink
    st.integers(0, 2),  # key
    st.integers(0, 6),  # wait (quarter TTLs) or pause length (steps)
)
plans = st.lists(steps, max_size=40)


@st.composite
def plans_with_takeover(draw: st.DrawFn) -> list[Step]:
    """A plan with at least one stale holder refused by the fenced store."""
    plan = draw(plans)
    at = draw(st.integers(0, len(plan)))
    return [
        *plan[:at],
        ("takeover", draw(st.integers(0, 3)), 0, draw(st.integers(0, 2)), 0),
        *plan[at:],
    ]


def play(plan: list[Step], holders: int = 3, **model: Any) -> Raw:
    """The history the model records for ``plan``."""
    events: Raw = []
    model.setdefault("sequenced", ("store",))
    system = FencedSystem(holders, events.append, unfenced=("recorder",), **model)
    resume: dict[int, int] = {}
    for number, (kind, holder, sink_at, key_at, amount) in enumerate(plan):
        for paused, when in list(resume.items()):
            if when <= number:
                system.stop_pause(paused)
                del resume[paused]
        holder %= holders
        sink, key = system.sinks[sink_at % len(system.sinks)], f"k{key_at}"
        if kind in ("acquire", "release"):
            getattr(system, kind)(holder)
        elif kind == "read":
            system.read(holder, sink, key)
        elif kind in ("write", "rmw"):
            system.write(holder, sink, key, rmw=kind == "rmw")
        elif kind.startswith("info"):
            system.write(holder, sink, key, outcome=kind)  # type: ignore[arg-type]
        elif kind == "wait":
            system.wait(amount * system.ttl // 4)
        elif kind == "pause":
            if system.start_pause(holder, sink, key, rmw=amount % 2 == 1):
                resume[holder] = number + 1 + amount
        else:
            takeover(system, holder, key, resume)
    system.finish()
    return events


def takeover(system: FencedSystem, holder: int, key: str, resume: dict[int, int]) -> None:
    """``holder`` writes, is paused mid-write past its lease, another holder writes the key."""
    other = (holder + 1) % len(system.holders)
    for number in (holder, other, *resume):
        system.stop_pause(number)
    resume.clear()
    system.wait(2 * system.ttl)
    system.acquire(holder)
    system.write(holder, "store", key)
    system.start_pause(holder, "store", key, rmw=True)
    system.wait(2 * system.ttl)
    system.acquire(other)
    system.write(other, "store", key, rmw=True)
    system.stop_pause(holder)


def judge(raw: Raw) -> Verdict:
    events = [event_from_dict(item, line) for line, item in enumerate(raw, 1)]
    return check(events, inventory=INVENTORY)


def renumbered(raw: Raw) -> Raw:
    for index, event in enumerate(raw):
        event["index"] = index
    return raw


# -- a correct system is always valid ---------------------------------------------------------


def tied(raw: Raw, quantum: int) -> Raw:
    """The same history with times rounded down to ``quantum``: many events share a time, and
    only the index orders them."""
    raw = copy.deepcopy(raw)
    for event in raw:
        event["time"] -= event["time"] % quantum
    return raw


@settings(max_examples=300, deadline=None)
@given(plans, st.integers(1, 4), st.booleans(), st.sampled_from((1, 2 * MS, 1000 * MS)))
def test_histories_of_a_correct_fenced_system_are_valid(
    plan: list[Step], holders: int, sequenced: bool, quantum: int
) -> None:
    raw = tied(play(plan, holders, sequenced=("store",) if sequenced else ()), quantum)
    result = judge(raw)
    assert result.anomaly_types == []
    assert result.valid is (True if result.counts.accepted_writes else "unknown")
    stored = any(event["value"]["sink"] == "store" for event in writes(raw, "ok")) or any(
        read["value"]["entries"] for read in reads_of_all(raw) if read["value"]["sink"] == "store"
    )
    assert result.sinks["store"].seq_observable is (sequenced and stored)


@settings(max_examples=100, deadline=None)
@given(plans_with_takeover(), st.data())
def test_a_history_cut_short_is_never_invalid(plan: list[Step], data: st.DataObject) -> None:
    raw = play(plan)
    cut = data.draw(st.integers(0, len(raw)))
    assert judge(raw[:cut]).valid is not False


# -- mutations: each plants one mistake ---------------------------------------------------------


def writes(raw: Raw, kind: str) -> list[dict[str, Any]]:
    return [event for event in raw if event["f"] == "write" and event["type"] == kind]


def reads_of(raw: Raw, sink: str, key: str) -> list[dict[str, Any]]:
    return [
        event
        for event in raw
        if event["f"] == "read"
        and event["type"] == "ok"
        and (event["value"]["sink"], event["value"]["key"]) == (sink, key)
    ]


def drop_acked_entry(raw: Raw) -> tuple[Raw, set[str]]:
    """Remove one acknowledged write from every read that shows it: a lost write."""
    raw = copy.deepcopy(raw)
    lost = writes(raw, "ok")[0]["value"]
    for read in reads_of(raw, lost["sink"], lost["key"]):
        entries = read["value"]["entries"]
        entries[:] = [entry for entry in entries if entry["id"] != lost["id"]]
    return raw, {"lost-write"}


def swap_across_epoch_boundary(raw: Raw) -> tuple[Raw, set[str]]:
    """Swap two neighbours of a fenced log whose epochs rise: a stale write (and maybe a
    real-time violation, when the first had completed before the second began)."""
    raw = copy.deepcopy(raw)
    final: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for read in reads_of_all(raw):
        final[read["value"]["sink"], read["value"]["key"]] = read["value"]["entries"]
    pair = next(
        (place, at)
        for place, entries in sorted(final.items())
        if place[0] == "store"
        for at in range(len(entries) - 1)
        if entries[at]["epoch"] < entries[at + 1]["epoch"]
    )
    (sink, key), at = pair
    first, second = final[sink, key][at]["id"], final[sink, key][at + 1]["id"]
    for read in reads_of(raw, sink, key):
        entries = read["value"]["entries"]
        ids = [entry["id"] for entry in entries]
        if second in ids:
            where = ids.index(first)
            entries[where], entries[where + 1] = entries[where + 1], entries[where]
        elif first in ids:
            entries.remove(entries[ids.index(first)])
    # Real-time order is index order: times may tie, and then the index decides.
    done = {e["value"]["id"]: e["index"] for e in writes(raw, "ok")}
    began = {e["value"]["id"]: e["index"] for e in writes(raw, "invoke")}
    expected = {"stale-write"}
    if first in done and done[first] < began[second]:
        expected.add("realtime-order")
    return raw, expected


def reads_of_all(raw: Raw) -> list[dict[str, Any]]:
    return [event for event in raw if event["f"] == "read" and event["type"] == "ok"]


def reuse_an_epoch(raw: Raw) -> tuple[Raw, set[str]]:
    """Make a holder's writes carry the previous holder's epoch: one epoch, two holders."""
    raw = copy.deepcopy(raw)
    accepted = {(event["node"], event["value"]["epoch"]) for event in writes(raw, "ok")}
    grants = sorted(
        {
            (event["value"]["epoch"], event["node"])
            for event in raw
            if event["f"] == "acquire" and event["type"] == "ok"
        }
    )
    (epoch, _), (later, holder) = next(
        (before, after)
        for before, after in itertools.pairwise(grants)
        if before[1] != after[1]
        and before in {(e, n) for n, e in accepted}
        and (after[1], after[0]) in accepted
    )
    moved = set()
    for event in raw:
        value = event["value"]
        if event["f"] == "write" and event["node"] == holder and value["epoch"] == later:
            value["epoch"] = epoch
            moved.add(value["id"])
    for read in reads_of_all(raw):
        for entry in read["value"]["entries"]:
            if entry["id"] in moved:
                entry["epoch"] = epoch
    return raw, {"epoch-reuse"}


def retry_a_refused_write(raw: Raw) -> tuple[Raw, set[str]]:
    """Send a write again with the epoch the fence just refused."""
    raw = copy.deepcopy(raw)
    at, refused = next(
        (at, event)
        for at, event in enumerate(raw)
        if event["f"] == "write" and event.get("error") == "stale-epoch"
    )
    value = {**refused["value"], "id": refused["value"]["id"] + "-again"}
    retry = [
        {**refused, "type": "invoke", "value": value, "error": None},
        {**refused, "value": value},
    ]
    del retry[0]["error"]
    raw[at + 1 : at + 1] = retry
    return renumbered(raw), {"retry-after-reject"}


def appended(raw: Raw, node: str, process: int, f: str, kind: str, value: dict[str, Any]) -> None:
    """Append one event after the last, 1 ms later."""
    event = {"index": len(raw), "time": raw[-1]["time"] + MS, "process": process, "node": node}
    raw.append({**event, "type": kind, "f": f, "value": value})


def fresh_process(raw: Raw) -> int:
    return max(event["process"] for event in raw if event["process"] != "nemesis") + 100


def accept_a_refused_write_on_another_key(raw: Raw) -> tuple[Raw, set[str]]:
    """The fence lets the stale holder's refused write in, on a key of its own: a stale write
    across keys, which only the sink's seq shows (it was sent before the pause)."""
    raw = copy.deepcopy(raw)
    refused = next(
        event for event in raw if event["f"] == "write" and event.get("error") == "stale-epoch"
    )
    seq = 1 + max(
        (entry.get("seq", 0) for read in reads_of_all(raw) for entry in read["value"]["entries"]),
        default=0,
    )
    wid = refused["value"]["id"]
    for event in raw:
        if event["f"] == "write" and event["value"]["id"] == wid:
            event["value"] = {**event["value"], "key": "elsewhere"}
    del refused["error"]
    refused["type"] = "ok"
    refused["value"]["seq"] = seq
    reader = fresh_process(raw)
    appended(raw, "w1", reader, "read", "invoke", {"sink": "store", "key": "elsewhere"})
    entries = [{"id": wid, "epoch": refused["value"]["epoch"], "seq": seq}]
    value = {"sink": "store", "key": "elsewhere", "entries": entries}
    appended(raw, "w1", reader, "read", "ok", value)
    return raw, {"stale-write"}


def refuse_a_write_nothing_overtook(raw: Raw) -> tuple[Raw, set[str]]:
    """A fence refuses a write no higher epoch had overtaken (say, comparing epochs as text)."""
    raw = copy.deepcopy(raw)
    highest = -1
    sent: dict[int, int] = {}
    chosen = None
    for at, event in enumerate(raw):
        value = event["value"]
        if (
            event["process"] == "nemesis"
            or "epoch" not in value
            or event["f"] not in ("write", "read")
        ):
            continue
        if event["type"] == "invoke":
            sent[event["process"]] = value["epoch"]
            continue
        epoch = sent.pop(event["process"])
        later = [
            e for e in raw[at + 1 :]
            if e["f"] == "write" and e["type"] == "invoke" and e["node"] == event["node"]
            and e["value"]["epoch"] <= epoch
        ]  # fmt: skip
        overtaken = max((highest, *sent.values())) > epoch
        if event["f"] == "write" and event["type"] == "ok" and not overtaken and not later:
            chosen = event
            break
        if event["type"] != "fail":
            highest = max(highest, epoch)
    assume(chosen is not None)
    assert chosen is not None
    wid = chosen["value"]["id"]
    chosen.update(type="fail", error="stale-epoch")
    chosen["value"].pop("seq", None)
    for read in reads_of_all(raw):
        entries = read["value"]["entries"]
        entries[:] = [entry for entry in entries if entry["id"] != wid]
    return raw, {"wrongful-refusal"}


def retry_after_a_re_grant(raw: Raw) -> tuple[Raw, set[str]]:
    """The refused holder is granted a fresh epoch and sends its refused epoch again anyway."""
    raw = copy.deepcopy(raw)
    refused = next(
        event for event in raw if event["f"] == "write" and event.get("error") == "stale-epoch"
    )
    epochs = [e["value"]["epoch"] for e in raw if e["f"] == "acquire" and e["type"] == "ok"]
    holder, process = refused["node"], fresh_process(raw)
    appended(raw, holder, process, "acquire", "invoke", {"lock": "L"})
    appended(raw, holder, process, "acquire", "ok", {"lock": "L", "epoch": max(epochs) + 1})
    again = {**refused["value"], "id": refused["value"]["id"] + "-again"}
    appended(raw, holder, process, "write", "invoke", again)
    appended(raw, holder, process, "write", "fail", again)
    raw[-1]["error"] = "stale-epoch"
    return raw, {"retry-after-reject"}


def diverge_then_go_stale(raw: Raw) -> tuple[Raw, set[str]]:
    """A last read of a fenced key that forks from the others and orders a newer epoch first:
    the fork must not hide the stale write inside it."""
    raw = copy.deepcopy(raw)
    final: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for read in reads_of_all(raw):
        final[read["value"]["sink"], read["value"]["key"]] = read["value"]["entries"]
    (sink, key), at = next(
        (place, at)
        for place, entries in sorted(final.items())
        if place[0] == "store"
        for at in range(len(entries) - 1)
        if entries[at]["epoch"] < entries[at + 1]["epoch"]
    )
    entries = copy.deepcopy(final[sink, key])
    first, second = entries[at]["id"], entries[at + 1]["id"]
    entries[at], entries[at + 1] = entries[at + 1], entries[at]
    reader = fresh_process(raw)
    appended(raw, "w1", reader, "read", "invoke", {"sink": sink, "key": key})
    appended(raw, "w1", reader, "read", "ok", {"sink": sink, "key": key, "entries": entries})
    done = {e["value"]["id"]: e["index"] for e in writes(raw, "ok")}
    began = {e["value"]["id"]: e["index"] for e in writes(raw, "invoke")}
    expected = {"divergent-reads", "stale-write"}
    if first in done and done[first] < began[second]:
        expected.add("realtime-order")
    return raw, expected


def swap_in_a_tied_history(raw: Raw) -> tuple[Raw, set[str]]:
    """The epoch swap in a history whose times tie in bulk: the index alone orders them."""
    return swap_across_epoch_boundary(tied(raw, 1000 * MS))


MUTATIONS: dict[str, Callable[[Raw], tuple[Raw, set[str]]]] = {
    "drop an acknowledged entry": drop_acked_entry,
    "swap across an epoch boundary": swap_across_epoch_boundary,
    "reuse an epoch": reuse_an_epoch,
    "retry a refused write": retry_a_refused_write,
    "accept a refused write on another key": accept_a_refused_write_on_another_key,
    "refuse a write nothing overtook": refuse_a_write_nothing_overtook,
    "retry after a re-grant": retry_after_a_re_grant,
    "diverge, then go stale": diverge_then_go_stale,
    "swap in a tied history": swap_in_a_tied_history,
}


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(plans_with_takeover(), st.sampled_from(sorted(MUTATIONS)))
def test_each_mutation_yields_exactly_its_anomaly(plan: list[Step], mutation: str) -> None:
    raw = play(plan)
    assert judge(raw).valid is True
    mutated, expected = MUTATIONS[mutation](raw)
    result = judge(mutated)
    assert result.valid is False
    assert set(result.anomaly_types) == expected
    for anomalies in result.anomalies.values():
        assert all(anomaly.explanation for anomaly in anomalies)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans_with_takeover())
def test_without_seq_a_stale_write_across_keys_is_said_to_be_unobservable(
    plan: list[Step],
) -> None:
    raw, _ = accept_a_refused_write_on_another_key(play(plan, sequenced=()))
    for event in raw:
        event["value"].pop("seq", None)
        for entry in event["value"].get("entries", ()):
            entry.pop("seq", None)
    result = judge(raw)
    assert result.anomaly_types == []
    assert "cross-key staleness not observable" in result.sinks["store"].coverage[0]


@settings(max_examples=60, deadline=None)
@given(plans_with_takeover(), st.integers(1, 3))
def test_a_grant_counter_that_resets_is_grant_regression(plan: list[Step], after: int) -> None:
    raw = play(plan, first_epoch=1000, reset_after=after)
    regressed = any(
        event["f"] == "acquire" and event["type"] == "ok" and event["value"]["epoch"] < 1000
        for event in raw
    )
    assume(regressed)
    result = judge(raw)
    assert result.anomaly_types == ["grant-regression"]


def test_shrinking_gives_a_minimal_plan() -> None:
    def loses(plan: list[Step]) -> bool:
        raw = play(plan)
        if not writes(raw, "ok"):
            return False
        return "lost-write" in judge(drop_acked_entry(raw)[0]).anomaly_types

    budget = settings(max_examples=200, database=None)
    smallest = find(plans, loses, settings=budget, random=random.Random(0))
    assert len(smallest) <= 2
    for at in range(len(smallest)):
        assert not loses(smallest[:at] + smallest[at + 1 :]), "every step must be needed"
