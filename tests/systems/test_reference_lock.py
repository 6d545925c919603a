"""The reference lock service: epochs, leases, lock-delay and restarts, as a real server process.

Time appears only as lower bounds on when a grant may happen (a safety property: a slow machine
can only make the bound easier to meet), never as an upper bound on how fast anything runs.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.nodeside.client import Grant, Refused
from systems.reference.client import Client
from systems.reference.lock_server import LockService
from tests.support.localcluster import MakeCluster, wait_until


def grant(client: Client, lock: str, ttl: float, wait: float) -> int:
    """Acquire ``lock``; fail the test unless it is granted."""
    result = client.acquire(lock, ttl, wait)
    assert isinstance(result, Grant), result
    assert result.waited >= 0
    return result.epoch


def test_epochs_strictly_increase_and_survive_a_restart(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(lease_ttl=0.3)
    client = cluster.client()
    granted = []
    for _ in range(3):
        epoch = grant(client, "L", 0.3, 5.0)
        granted.append(epoch)
        assert client.release("L", epoch)
    assert granted == sorted(set(granted))
    assert grant(client, "M", 0.3, 5.0) == 1  # each lock has its own counter

    cluster.kill_and_restart("l1")
    after = grant(client, "L", 0.3, 10.0)
    assert after > max(granted)


def test_epoch_in_memory_starts_again_after_a_restart(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(lease_ttl=0.3, bugs=["epoch-in-memory"])
    client = cluster.client()
    first = grant(client, "L", 0.3, 5.0)
    assert client.release("L", first)
    second = grant(client, "L", 0.3, 5.0)
    assert second > first
    cluster.kill_and_restart("l1")
    assert grant(client, "L", 0.3, 5.0) == first  # the same epoch, granted twice


def test_after_a_restart_no_grant_before_an_old_lease_could_have_ended(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(lease_ttl=0.5, lock_delay=0.5)
    client = cluster.client()
    held = grant(client, "L", 0.5, 5.0)
    killed = time.monotonic()
    cluster.kill_and_restart("l1")
    newer = grant(client, "L", 0.5, 10.0)
    assert newer > held
    assert time.monotonic() - killed >= 0.5 + 0.5  # the grace: TTL + lock-delay from start-up


def test_an_expired_lease_passes_to_the_next_holder(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    first, second = cluster.client("a"), cluster.client("b")
    before = time.monotonic()
    old = grant(first, "L", 0.4, 5.0)
    new = grant(second, "L", 0.4, 10.0)  # blocks until the unrenewed lease runs out
    assert time.monotonic() - before >= 0.4
    assert new == old + 1
    assert first.renew("L", old) is False
    assert first.release("L", old) is False
    assert second.renew("L", new) is True


def test_lock_delay_holds_the_lock_after_an_expiry(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(lease_ttl=0.3, lock_delay=0.5)
    client = cluster.client()
    before = time.monotonic()
    old = grant(client, "L", 0.3, 5.0)
    assert grant(client, "L", 0.3, 10.0) == old + 1
    assert time.monotonic() - before >= 0.3 + 0.5


def test_lock_delay_refuses_a_short_wait_and_skips_a_clean_release(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(lease_ttl=0.2, lock_delay=60.0)
    client = cluster.client()
    released = grant(client, "R", 0.2, 5.0)
    assert client.release("R", released)
    assert grant(client, "R", 0.2, 5.0) == released + 1  # no delay after a clean release

    grant(client, "E", 0.2, 5.0)
    wait_until(lambda: cluster.lock_status("E")["holder"] is None, "the lease on E to expire")
    assert cluster.lock_status("E")["grantable_in"] > 0
    assert client.acquire("E", 0.2, 0.2) == Refused("timeout")


def test_short_lock_delay_applies_a_tenth_of_the_ttl(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(lease_ttl=0.3, lock_delay=60.0, bugs=["short-lock-delay"])
    client = cluster.client()
    old = grant(client, "L", 0.3, 5.0)
    assert grant(client, "L", 0.3, 20.0) == old + 1  # not the configured 60 s


def test_renewal_keeps_a_lease_from_a_waiting_acquirer(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    holder, other = cluster.client("a"), cluster.client("b")
    epoch = grant(holder, "L", 5.0, 5.0)
    assert holder.renew("L", epoch)
    assert other.acquire("L", 5.0, 0.0) == Refused("timeout")
    assert cluster.lock_status("L")["holder"]["owner"] == "a"
    assert holder.release("L", epoch)
    assert grant(other, "L", 5.0, 0.0) == epoch + 1


def test_a_corrupt_epoch_file_stops_the_lock_server(tmp_path: Path) -> None:
    (tmp_path / "epochs.json").write_text('{"L": {"epoch": "seven"}}')
    with pytest.raises(SystemExit, match="is corrupt"):
        LockService(tmp_path, lock_delay=0.0, durable=True)


def test_grant_seq_counts_the_grants_of_each_lock_and_survives_a_restart(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(lease_ttl=0.3)
    client = cluster.client()
    seqs = []
    for _ in range(3):
        result = client.acquire("L", 0.3, 5.0)
        assert isinstance(result, Grant), result
        seqs.append(result.grant_seq)
        assert client.release("L", result.epoch)
    assert seqs == [1, 2, 3]
    cluster.kill_and_restart("l1")
    after = client.acquire("L", 0.3, 10.0)
    assert isinstance(after, Grant), after
    assert after.grant_seq == 4


def test_token_before_lease_lets_a_later_lease_carry_the_lower_epoch(tmp_path: Path) -> None:
    service = LockService(tmp_path, lock_delay=0.0, durable=True, early_tokens=True)
    request = {"op": "acquire", "lock": "L", "ttl": 5.0, "owner": "h"}
    first = service.handle({**request, "wait": 0.0})
    answers: list[dict[str, object]] = []
    waiter = threading.Thread(
        target=lambda: answers.append(service.handle({**request, "owner": "a", "wait": 10.0}))
    )
    waiter.start()  # a draws epoch 2 on arrival and waits for h's lease
    wait_until(lambda: service.handle({"op": "status", "lock": "L"})["epoch"] == 2, "a's draw")
    # The service's own lock is reentrant: h's release and c's acquire happen as one step, so
    # c (arriving later, drawing 3) wins the free lock before the waiter wakes.
    with service._cond:
        assert service.handle({"op": "release", "lock": "L", "epoch": first["epoch"]})["ok"]
        later = service.handle({**request, "owner": "c", "wait": 0.0})
    assert (later["epoch"], later["grant_seq"]) == (3, 2)
    assert service.handle({"op": "release", "lock": "L", "epoch": 3})["ok"]
    waiter.join(timeout=10)
    (answer,) = answers
    assert (answer["epoch"], answer["grant_seq"]) == (2, 3)  # the later lease, the lower epoch


def waiter_session(
    service: LockService, ttl: float, wait: float
) -> tuple[str, threading.Thread, list[dict[str, object]]]:
    """Opens a session for L and starts an acquire waiting under it, never kept alive."""
    session = str(service.handle({"op": "session", "lock": "L", "ttl": ttl})["session"])
    request = {"op": "acquire", "lock": "L", "ttl": 5.0, "wait": wait, "owner": "w"}
    answers: list[dict[str, object]] = []
    waiter = threading.Thread(
        target=lambda: answers.append(service.handle({**request, "session": session}))
    )
    waiter.start()
    return session, waiter, answers


@pytest.mark.parametrize("bug", [False, True])
def test_a_waiter_whose_session_ends_is_refused_unless_the_bug_grants_it(
    tmp_path: Path, bug: bool
) -> None:
    service = LockService(tmp_path, lock_delay=0.0, durable=True, grant_expired=bug)
    held = service.handle({"op": "acquire", "lock": "L", "ttl": 5.0, "wait": 0.0, "owner": "h"})
    session, waiter, answers = waiter_session(service, ttl=0.2, wait=10.0)
    waiter.join(timeout=10)  # no keepalive: the session ends while h still holds L
    (answer,) = answers
    ended = service.handle({"op": "keepalive", "session": session})
    assert ended == {"ok": False, "error": "expired", "grant_seq": 1}  # h's grant, no more
    released = service.handle({"op": "release", "lock": "L", "epoch": held["epoch"]})
    if bug:
        # Granted at once, over h's live lease, after the service had ended the session.
        assert answer["ok"] is True and answer["grant_seq"] == 2
        assert released["ok"] is False
    else:
        assert answer == {"ok": False, "error": "expired"}
        assert released["ok"] is True
    assert service.handle({"op": "keepalive", "session": "unknown"})["error"] == "lost"


def test_a_granted_session_ends_with_its_lease_after_the_grant(tmp_path: Path) -> None:
    service = LockService(tmp_path, lock_delay=0.0, durable=True)
    session, waiter, answers = waiter_session(service, ttl=0.2, wait=1.0)
    waiter.join(timeout=10)
    (answer,) = answers
    assert answer["grant_seq"] == 1
    wait_until(lambda: service.handle({"op": "status", "lock": "L"})["holder"] is None, "lease end")
    # A reply held past the lease's end: the service's count then is the grant's own, not above.
    assert service.handle({"op": "keepalive", "session": session})["grant_seq"] == 1


def test_the_client_keeps_its_session_alive_through_a_long_wait(make_cluster: MakeCluster) -> None:
    cluster = make_cluster()
    holder, waiter = cluster.client("a"), cluster.client("b")
    held = grant(holder, "L", 0.3, 5.0)
    renewing = threading.Event()

    def renew() -> None:
        while not renewing.wait(0.1):
            holder.renew("L", held)

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    threading.Timer(1.0, renewing.set).start()  # a holds L for about 1 s: 3 of b's TTLs
    result = waiter.acquire("L", 0.3, 10.0)
    renewer.join()
    assert isinstance(result, Grant), result
    assert result.lease_ended is None  # b's keepalives kept its session through the wait
