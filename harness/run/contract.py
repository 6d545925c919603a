"""The adapter contract battery behind ``fencecheck adapter check``: short, on a real cluster.

A third party runs it before their first real test. On a fresh cluster of the system's topology it
sets the system up, starts the harness's agents, and checks through them, in order:

1. grants come with strictly increasing epochs;
2. a write with the current epoch is accepted by every sink of the inventory;
3. a write with an older epoch is refused as stale by every fenced sink;
4. a fenced read raises the sink's mark (an older epoch's write is refused after it);
5. every unfenced sink really accepts a stale write (so the inventory is honest);
6. a client without the run's secret is refused: the system's own holder client, run on a
   worker (inside the run's network) with another secret in place of the run's, is granted no
   lock and lands no write on any sink, and the run's secret is nowhere in the client's config;
7. where the system can restart its daemons (:class:`systems.Restarts`): after a kill and restart
   of each, marks are kept (a stale write is still refused) and epochs are kept (the next grant
   is higher than every earlier one);
7. where the holder client reports ``grant_seq`` (the lock service's own order of grants), every
   grant carries it and it rises strictly per lock, across the restarts too;
8. where the system says where its daemons keep their data (:class:`systems.TakesDiskFaults`):
   each such directory sits on the lazy file system, and after a power loss of each daemon
   (SIGKILL, every unsynced byte dropped, restart) marks and epochs are kept as after a restart;
9. where a sink claims ``seq`` (``Sink(seq=True)``), every accepted write and every read entry
   carries it, strictly increasing in acceptance order across keys; a fenced sink without it is
   a warning: stale writes across its keys cannot be judged;
9. the holders' traffic passes through the write-path proxy (:mod:`harness.run.proxies`; the
   battery always runs with it in place): the proxy on the worker counted requests and replies
   to the lock service and to the sinks, so the proxy fault kinds reach them.

An item about a part the system does not have (an unfenced sink, restarts) is shown as skipped,
never as held.

Each failed item says what the adapter must fix. Writes of an older epoch are sent through the
agent unchecked (``check_lease: false``), as a holder that outlived its lease would.
"""

from __future__ import annotations

import itertools
import json
import secrets
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeGuard

from harness.node import Node, NodeError
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.images import system_image
from harness.nodeside.client import STALE
from harness.nodeside.wire import NotDelivered, call
from harness.record.verdict import UNJUDGED_ACROSS_KEYS
from harness.run.agents import AgentSet, client_path, deploy_system, stop_agents
from harness.run.proxies import stop_proxies, traffic
from nemeses.disk import ask_node
from nemeses.protocol import NemesisError
from systems import (
    AdapterError,
    Deployment,
    ProcessTarget,
    Restarts,
    Sink,
    System,
    SystemConfig,
    TakesDiskFaults,
    deploy,
    packages_of,
    topology,
)

__all__ = [
    "ContractItem",
    "ContractReport",
    "ItemKind",
    "check_adapter",
    "check_deployed",
]

_TTL: Final = 5.0  # long enough that no lease lapses during the battery
_RESTART_FIX: Final = (
    "restart(node, daemon) must start the daemon again with the same command line on the same "
    "data and return once it serves"
)
_CALL_TIMEOUT: Final = 20.0
_GONE_WAIT: Final = 10.0
_OUTSIDER_EPOCH: Final = 10**12  # above any epoch of the battery: a fenced sink would take it
_OUTSIDER_SECRET: Final = f"{deploy.INSTALL_DIR}/outsider-secret"
# Runs on a worker, as a process of another run would: the system's holder client, loaded as the
# agent loads it, with no wire credential and the secret file swapped; each attempt's outcome.
_OUTSIDER: Final = """
import json, sys
sys.path.insert(0, sys.argv[1])
from agent import load_client
from harness.nodeside.client import Accepted, Grant, Refused
client_file, config, lock, sinks, epoch = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], \
    json.loads(sys.argv[5]), int(sys.argv[6])
def outcome(attempt, success, word):
    try:
        result = attempt()
    except Exception as problem:
        return f"{type(problem).__name__}: {problem}"[:200]
    if isinstance(result, success):
        return word
    return result.reason if isinstance(result, Refused) else repr(result)[:200]
answers = {}
client = None
def connect():
    global client
    client = load_client(client_file, config)
    return client
answers["connect"] = outcome(connect, object, "connected")
if client is not None:
    answers["acquire"] = outcome(lambda: client.acquire(lock, 5.0, 1.0), Grant, "granted")
    for sink in sinks:
        write = lambda: client.write(lock, sink, "k-outsider", f"outsider-{sink}", epoch, None)
        answers[f"write {sink}"] = outcome(write, Accepted, "accepted")
print(json.dumps(answers))
"""


ItemKind = Literal["checked", "skipped", "warning"]
"""An item checked (held or not); skipped (the system has no part it is about); a warning (it
holds, but leaves something the checker cannot judge)."""


@dataclass(frozen=True, slots=True)
class ContractItem:
    """One checked promise: what was checked, whether it held, what was seen, what to fix; its
    ``kind`` says whether it was checked at all or holds with a warning."""

    name: str
    ok: bool
    detail: str = ""
    fix: str = ""
    kind: ItemKind = "checked"


@dataclass(slots=True)
class ContractReport:
    """Every item checked, in order; :attr:`ok` when all held."""

    system: str
    items: list[ContractItem] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every item held (and at least one was checked)."""
        return bool(self.items) and all(item.ok for item in self.items)

    def failed(self) -> list[ContractItem]:
        """The items that did not hold."""
        return [item for item in self.items if not item.ok]

    def warnings(self) -> list[ContractItem]:
        """The items that hold with a warning (the verdict repeats them)."""
        return [item for item in self.items if item.kind == "warning"]


class _Agents:
    """Requests to the harness's agents; any answer other than a definite one is a failure."""

    def __init__(self, agents: AgentSet) -> None:
        self._endpoints = agents.endpoints
        self._token = agents.token
        self.workers = sorted(agents.endpoints)
        self._ids = itertools.count(1)

    def ask(self, worker: str, request: dict[str, Any]) -> dict[str, Any]:
        endpoint = self._endpoints[worker]
        try:
            return call((endpoint.host, endpoint.port), request, _CALL_TIMEOUT, self._token)
        except (OSError, NotDelivered) as problem:
            return {"ok": False, "error": f"no answer from the agent on {worker}: {problem}"}

    def acquire(self, worker: str, lock: str) -> dict[str, Any]:
        return self.ask(worker, {"op": "acquire", "lock": lock, "wait": 3 * _TTL})

    def release(self, worker: str, lock: str) -> None:
        self.ask(worker, {"op": "release", "lock": lock})

    def write(self, worker: str, lock: str, epoch: int, sink: str, key: str) -> dict[str, Any]:
        request = {
            "op": "write",
            "lock": lock,
            "epoch": epoch,
            "sink": sink,
            "key": key,
            "id": f"check-{next(self._ids)}",
            "prev": None,
            "work_ms": 0,
            # Sent as a holder past its lease sends: the agent does not look at its lease.
            "check_lease": False,
        }
        return self.ask(worker, request)


def _natural(value: object) -> TypeGuard[int]:
    return type(value) is int and value >= 0


def _said(reply: Mapping[str, Any]) -> str:
    if reply.get("ok"):
        return "accepted"
    word = str(reply.get("error", "?"))
    return f"{word} (outcome unknown)" if reply.get("info") else word


class _Battery:
    """The items of the module docstring, against one deployed system."""

    def __init__(
        self,
        system: System,
        nodes: Mapping[str, Node],
        agents: _Agents,
        deployment: Deployment,
        secret: tuple[str, str] | None,
    ) -> None:
        self.system = system
        self.nodes = nodes
        self.agents = agents
        self.deployment = deployment
        self.secret = secret
        self.targets: Sequence[ProcessTarget] = deployment.targets
        self.inventory: Sequence[Sink] = system.inventory(SystemConfig(lease_ttl=_TTL))
        self.items: list[ContractItem] = []
        self.granted: list[int] = []
        # Per lock, each grant's grant_seq in order (None when it had none).
        self.grant_seqs: dict[str, list[object]] = {}

    def note(self, name: str, problems: list[str], fix: str, detail: str = "") -> None:
        ok = not problems
        self.items.append(ContractItem(name, ok, detail if ok else "; ".join(problems), fix))

    def grant(self, worker: str, lock: str) -> int | None:
        reply = self.acquire(worker, lock)
        if not reply.get("ok"):
            return None
        epoch = int(reply["epoch"])
        self.agents.release(worker, lock)
        return epoch

    def acquire(self, worker: str, lock: str) -> dict[str, Any]:
        """Acquire ``lock``, noting the grant's ``grant_seq``."""
        reply = self.agents.acquire(worker, lock)
        if reply.get("ok"):
            self.grant_seqs.setdefault(lock, []).append(reply.get("grant_seq"))
        return reply

    def grant_seq_rises(self) -> None:
        """Where the client reports ``grant_seq``, every grant carries it, rising strictly per
        lock."""
        seqs = self.grant_seqs
        if all(seq is None for per_lock in seqs.values() for seq in per_lock):
            return  # not claimed: the checker says so in its coverage
        problems = []
        for lock, per_lock in seqs.items():
            numbers = [seq for seq in per_lock if type(seq) is int and seq >= 0]
            if len(numbers) < len(per_lock):
                problems.append(f"{lock}: grants without an integer grant_seq >= 0: {per_lock}")
            elif any(b <= a for a, b in itertools.pairwise(numbers)):
                problems.append(f"{lock}: grant_seq does not rise strictly: {per_lock}")
        self.note(
            "grant_seq is present on every grant and rises strictly",
            problems,
            "Grant(epoch, waited, grant_seq) must carry the lock service's own order of the "
            "grants of the lock (a revision, a zxid, a counter of grants kept on disk) on every "
            "grant, or on none",
            f"grant_seqs {seqs}",
        )

    def seq_proven(self, lock: str, worker: str, epoch: int) -> None:
        """Each sink claiming ``seq`` reports it on every accepted write and read entry, strictly
        increasing in acceptance order across keys; each fenced sink without it is a warning."""
        for sink in self.inventory:
            if sink.seq:
                self._seq_of(sink.name, lock, worker, epoch)
            elif sink.fenced:
                self.items.append(
                    ContractItem(
                        f"{sink.name} reports seq",
                        True,
                        f"warning: {sink.name} has no seq: {UNJUDGED_ACROSS_KEYS}",
                        "report the sink's own acceptance order across keys (a revision, a zxid, "
                        "a sequence) as seq on Accepted and Entry, and declare Sink(seq=True)",
                        kind="warning",
                    )
                )

    def _seq_of(self, sink: str, lock: str, worker: str, epoch: int) -> None:
        problems: list[str] = []
        keys = ("k-seq-a", "k-seq-b", "k-seq-a")
        seqs: list[object] = []
        for key in keys:
            reply = self.agents.write(worker, lock, epoch, sink, key)
            if not reply.get("ok"):
                problems.append(f"a write to {key} answered {_said(reply)}")
            seqs.append(reply.get("seq"))
        numbers = [seq for seq in seqs if _natural(seq)]
        if len(numbers) < len(seqs):
            problems.append(f"accepted writes without an integer seq >= 0: {seqs}")
        elif any(b <= a for a, b in itertools.pairwise(numbers)):
            problems.append(f"seq does not rise strictly across keys {keys}: {seqs}")
        for key in sorted(set(keys)):
            answer = self.agents.ask(worker, {"op": "read", "sink": sink, "key": key})
            entries = answer.get("entries") if answer.get("ok") else None
            if not isinstance(entries, list):
                problems.append(f"a read of {key} answered {_said(answer)}")
            elif any(not isinstance(e, dict) or not _natural(e.get("seq")) for e in entries):
                problems.append(f"read entries of {key} without an integer seq >= 0: {entries}")
        self.note(
            f"{sink} reports seq on every accepted write and read entry, rising across keys",
            problems,
            "inventory() claims Sink(seq=True): client.write must return Accepted(seq) and "
            "client.read Entry(id, epoch, seq) with the sink's own acceptance order across all "
            "its keys; or declare seq=False",
            f"seqs {seqs}",
        )

    def epochs_increase(self, lock: str) -> None:
        problems = []
        for worker in itertools.islice(itertools.cycle(self.agents.workers), 3):
            epoch = self.grant(worker, lock)
            if epoch is None:
                problems.append(f"{worker} was not granted {lock}")
                break
            if self.granted and epoch <= max(self.granted):
                problems.append(f"epoch {epoch} granted after {max(self.granted)}")
            self.granted.append(epoch)
        self.note(
            "grants come with strictly increasing epochs",
            problems,
            "the lock service must hand out a higher epoch with every grant (a counter per lock, "
            "kept on disk), and client.acquire must return it as Grant(epoch)",
            f"epochs {self.granted}",
        )

    def current_write_accepted(self, lock: str, worker: str, epoch: int) -> None:
        problems = []
        for sink in self.inventory:
            reply = self.agents.write(worker, lock, epoch, sink.name, "k-current")
            if not reply.get("ok"):
                problems.append(f"{sink.name} answered {_said(reply)} to epoch {epoch}")
        self.note(
            "a write with the current epoch is accepted by every sink",
            problems,
            "client.write must carry the epoch to the sink and return Accepted() when it lands; "
            "check the sink names in inventory() match what client.write understands",
        )

    def stale_refused(self, lock: str, worker: str, stale: int, name: str, key: str) -> None:
        problems = []
        for sink in (s for s in self.inventory if s.fenced):
            reply = self.agents.write(worker, lock, stale, sink.name, key)
            if reply.get("error") != STALE or reply.get("info"):
                problems.append(f"{sink.name} answered {_said(reply)} to stale epoch {stale}")
        self.note(
            name,
            problems,
            "a fenced sink must refuse an epoch below the highest it has seen for the lock and "
            "client.write must return Refused(STALE) for it; if the sink cannot, declare it "
            "fenced=False in inventory() with its mitigation",
        )

    def fenced_read_raises_mark(self, worker: str) -> None:
        lock = "check-read"
        first = self.grant(worker, lock)
        problems = []
        reply = self.acquire(worker, lock)
        if first is None or not reply.get("ok"):
            problems.append(f"{worker} was not granted {lock}")
        else:
            epoch = int(reply["epoch"])
            self.granted += [first, epoch]
            for sink in (s for s in self.inventory if s.fenced):
                read = {"op": "read", "sink": sink.name, "key": "k-read", "lock": lock}
                answer = self.agents.ask(worker, {**read, "epoch": epoch})
                if not answer.get("ok"):
                    problems.append(f"fenced read of {sink.name} answered {_said(answer)}")
                    continue
                stale = self.agents.write(worker, lock, first, sink.name, "k-read")
                if stale.get("error") != STALE:
                    problems.append(
                        f"{sink.name} answered {_said(stale)} to epoch {first} after a fenced "
                        f"read with epoch {epoch}"
                    )
            self.agents.release(worker, lock)
        self.note(
            "a fenced read raises the mark",
            problems,
            "client.read(sink, key, lock, epoch) must make the sink treat the read like a write "
            "of that epoch (refuse it below the mark, else raise the mark): the rmw workload "
            "needs it",
        )

    def unfenced_accepts_stale(self, lock: str, worker: str, stale: int) -> None:
        name = "every unfenced sink accepts a stale write (the inventory is honest)"
        if all(sink.fenced for sink in self.inventory):
            self.items.append(
                ContractItem(name, True, "skipped: the system has no unfenced sink", kind="skipped")
            )
            return
        problems = []
        for sink in (s for s in self.inventory if not s.fenced):
            reply = self.agents.write(worker, lock, stale, sink.name, "k-unfenced")
            if not reply.get("ok"):
                problems.append(f"{sink.name} answered {_said(reply)} to stale epoch {stale}")
        self.note(
            name,
            problems,
            "a sink that refuses stale epochs is fenced: declare it fenced=True in inventory()",
        )

    def outsider_refused(self, worker: str) -> None:
        """Item 6: the holder client of another run (another secret) on ``worker`` achieves
        nothing; the run's agent then reads every sink and finds none of its writes."""
        lock = "check-outsider"
        problems = []
        config = self.deployment.client.config
        if self.secret is None:
            problems.append("the battery ran without a run secret")
        else:
            token, secret_file = self.secret
            if token in json.dumps(config):
                problems.append(
                    "the run's secret is in the client's config, which shows on the agent's "
                    "command line"
                )
            answers = self._outsider(worker, _swapped(config, secret_file, _OUTSIDER_SECRET), lock)
            for attempt, answer in answers.items():
                if answer in ("granted", "accepted"):
                    problems.append(f"the outsider's {attempt} was {answer}")
            for sink in self.inventory:
                read = self.agents.ask(
                    worker, {"op": "read", "sink": sink.name, "key": "k-outsider"}
                )
                if any(
                    str(e.get("id", "")).startswith("outsider") for e in read.get("entries", ())
                ):
                    problems.append(f"{sink.name} holds the outsider's write")
            detail = "; ".join(f"{attempt}: {answer}" for attempt, answer in answers.items())
        self.note(
            "a client without the run's secret is refused",
            problems,
            "every port of the system must refuse a client without the run's secret: start its "
            "daemons with SystemConfig.secret_file (--secret-file for wire servers, or the "
            "system's own authentication with the secret as password) and let the holder client "
            "read the secret from that file, named in its config (never the secret itself)",
            detail if self.secret is not None else "",
        )

    def _outsider(self, worker: str, config: Any, lock: str) -> dict[str, str]:
        """Run the outsider (:data:`_OUTSIDER`) on ``worker``: each attempt and its outcome."""
        node = self.nodes[worker]
        node.put_file(_OUTSIDER_SECRET, secrets.token_hex(32).encode(), 0o600)
        argv = [
            "python3",
            "-c",
            _OUTSIDER,
            deploy.INSTALL_DIR,
            client_path(),
            json.dumps({**config, "node": worker}),
            lock,
            json.dumps([sink.name for sink in self.inventory]),
            str(_OUTSIDER_EPOCH),
        ]
        try:
            result = node.run(argv, timeout=6 * _CALL_TIMEOUT)
            answers = json.loads(result.stdout.strip().splitlines()[-1]) if result.ok else None
        except (NodeError, ValueError, IndexError) as problem:
            return {"run": f"the outsider could not be run on {worker}: {problem}"}
        if not isinstance(answers, dict):
            return {"run": f"the outsider failed on {worker}: {result.stderr.strip()[-300:]}"}
        return {str(attempt): str(answer) for attempt, answer in answers.items()}

    def restarts_keep_state(self, lock: str, worker: str, stale: int) -> None:
        if not isinstance(self.system, Restarts):
            self.items.append(
                ContractItem(
                    "restarts keep epochs and marks",
                    True,
                    "skipped: the system does not implement Restarts, so kill faults relaunch "
                    "its daemons' command lines without waiting for them",
                    kind="skipped",
                )
            )
            return
        for target in self.targets:
            node = self.nodes[target.node]
            where = f"{target.daemon} on {target.node}"
            try:
                _kill(node, target.daemon)
                self.system.restart(node, target.daemon)
            except (AdapterError, NodeError) as problem:
                self.note(f"{where} restarts", [str(problem)], _RESTART_FIX)
                continue
            self._state_kept(lock, worker, stale, f"a restart of {where}", "k-restart")

    def _state_kept(self, lock: str, worker: str, stale: int, after: str, key: str) -> None:
        """After ``after``: a stale write is still refused, and the next grant is higher."""
        self.stale_refused(lock, worker, stale, f"marks survive {after}", key)
        epoch = self.grant(worker, lock)
        before = max(self.granted)
        problems = []
        if epoch is None:
            problems.append(f"{worker} was not granted {lock} after {after}")
        elif epoch <= before:
            problems.append(f"epoch {epoch} granted after {after}, {before} before it")
        if epoch is not None:
            self.granted.append(epoch)
        self.note(
            f"epochs survive {after}",
            problems,
            "the lock service must keep its epoch counters on disk (write and fsync the file and "
            "its directory before answering a grant) and reload them on start",
        )

    def power_loss_keeps_state(self, lock: str, worker: str, stale: int) -> None:
        if not isinstance(self.system, TakesDiskFaults) or not isinstance(self.system, Restarts):
            self.items.append(
                ContractItem(
                    "power losses keep epochs and marks",
                    True,
                    "skipped: the system does not say where its daemons keep their data "
                    "(TakesDiskFaults) or cannot restart them (Restarts)",
                    kind="skipped",
                )
            )
            return
        dirs = self.system.disk_dirs()
        for target in self.targets:
            node = self.nodes[target.node]
            wanted = dirs.get(node.role)
            if wanted is None:
                continue
            where = f"{target.daemon} on {target.node}"
            try:
                mounted = ask_node(node, {"op": "report"})
                problems = [] if wanted in mounted else [f"lazy FS at {', '.join(mounted)} only"]
            except NemesisError as problem:
                problems = [str(problem)]
            self.note(
                f"{where} keeps its data ({wanted}) on the lazy file system",
                problems,
                "make the data directory with systems.deploy.data_dir(node, path, "
                "config.lazy_disks) before starting the daemon, and name that path in disk_dirs()",
            )
            if problems:
                continue
            try:
                _kill(node, target.daemon)
                ask_node(node, {"op": "drop"})
                self.system.restart(node, target.daemon)
            except (AdapterError, NodeError, NemesisError) as problem:
                self.note(f"{where} restarts after a power loss", [str(problem)], _RESTART_FIX)
                continue
            self._state_kept(lock, worker, stale, f"a power loss of {where}", "k-power")

    def through_proxy(self, worker: str) -> None:
        """The proxy on ``worker`` relayed requests and replies to the lock service and the
        sinks (a system whose lock service is its store has no store nodes: its lock nodes
        count for both)."""
        try:
            counted = traffic(self.nodes[worker])
        except NemesisError as problem:
            counted = {"connections": 0, "bytes": {}, "problem": str(problem)}
        roles = {node.role for node in self.nodes.values()} - {"worker"}
        problems = [counted["problem"]] if "problem" in counted else []
        for role in sorted(roles):
            seen = counted["bytes"].get(role, {})
            for way in ("request", "reply"):
                if not seen.get(way):
                    problems.append(f"no {way} bytes to the {role} nodes went through the proxy")
        shown = ", ".join(
            f"{role} {seen.get('request', 0)}/{seen.get('reply', 0)} B"
            for role, seen in sorted(counted["bytes"].items())
        )
        self.note(
            "the holders' traffic passes through the write-path proxy",
            problems,
            "the holder client must reach the lock and store nodes over TCP at their addresses "
            "on the run's network (the proxy redirects those); a client that reaches them "
            "another way escapes hold, delay, loss, reset and replay",
            f"{counted['connections']} connections; request/reply bytes: {shown}",
        )


def _swapped(value: Any, old: str, new: str) -> Any:
    """``value`` (a client config) with every string ``old`` replaced by ``new``."""
    if value == old:
        return new
    if isinstance(value, dict):
        return {key: _swapped(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_swapped(item, old, new) for item in value]
    return value


def _kill(node: Node, name: str) -> None:
    daemon = node.daemon(name)
    node.signal(daemon, signal.SIGKILL)
    deadline = time.monotonic() + _GONE_WAIT
    while node.process_state(daemon) not in (None, "Z", "X"):
        if time.monotonic() > deadline:
            raise AdapterError(f"{name} on {node.name} still runs {_GONE_WAIT:g}s after SIGKILL")
        time.sleep(0.05)


def check_deployed(system: System, nodes: Mapping[str, Node]) -> ContractReport:
    """Set ``system`` up on ``nodes``, run the battery, tear it down; the report of every item.

    Raises :class:`AdapterError` when the system cannot even be set up.
    """
    started = time.monotonic()
    report = ContractReport(system.name)
    config = SystemConfig(lease_ttl=_TTL, lazy_disks=isinstance(system, TakesDiskFaults))
    deployment, agents = deploy_system(system, nodes, config, proxy=True)
    try:
        secret = None if agents.token is None else (agents.token, deploy.SECRET_FILE)
        battery = _Battery(system, nodes, _Agents(agents), deployment, secret)
        _run(battery)
        report.items = battery.items
    finally:
        try:
            stop_agents(nodes)
            stop_proxies(nodes)
        finally:
            system.teardown(nodes)
    report.seconds = time.monotonic() - started
    return report


def _run(battery: _Battery) -> None:
    lock = "check"
    worker = battery.agents.workers[0]
    battery.epochs_increase(lock)
    if not battery.items[-1].ok:
        return  # without grants nothing else can be checked
    reply = battery.acquire(worker, lock)
    if not reply.get("ok"):
        battery.note("the lease is granted again", [_said(reply)], "see the lock service's log")
        return
    current = int(reply["epoch"])
    battery.granted.append(current)
    stale = battery.granted[0]
    battery.current_write_accepted(lock, worker, current)
    battery.seq_proven(lock, worker, current)
    battery.stale_refused(
        lock, worker, stale, "a write with an older epoch is refused by every fenced sink", "k"
    )
    battery.agents.release(worker, lock)
    battery.fenced_read_raises_mark(worker)
    battery.unfenced_accepts_stale(lock, worker, stale)
    battery.outsider_refused(worker)
    battery.restarts_keep_state(lock, worker, stale)
    battery.power_loss_keeps_state(lock, worker, stale)
    battery.grant_seq_rises()
    battery.through_proxy(worker)


def check_adapter(system: System, progress: Callable[[str], None] | None = None) -> ContractReport:
    """Run the battery on a fresh Docker cluster of the system's topology (two workers).

    Raises :class:`AdapterError` for a system that cannot be set up; engine and image problems
    raise theirs (:class:`harness.node.docker.engine.EngineError`,
    :class:`harness.node.docker.images.ImageError`).
    """
    say = progress or (lambda line: None)
    specs = [NodeSpec(name, role) for name, role in topology(system.roles(), 2)]
    image = system_image(packages_of(system))
    say(f"cluster of {', '.join(spec.name for spec in specs)} on {image}")
    with _cluster(specs, image, isinstance(system, TakesDiskFaults)) as nodes:
        return check_deployed(system, nodes)


@contextmanager
def _cluster(specs: Sequence[NodeSpec], image: str, fuse: bool) -> Iterator[Mapping[str, Node]]:
    with Cluster(f"check-{new_run_id()}", specs, image=image, fuse=fuse) as cluster:
        yield cluster.nodes
