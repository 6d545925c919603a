"""Carrying out one fencing test: plan → images → cluster → system → workload under faults →
heal → final reads → logs → judge → store directory.

This is the execute part of a run. Everything checked before a container starts (and the first
``test.json``, and the rerun command) is :mod:`harness.run.plan`'s; checking the history and
concluding the verdict is :mod:`harness.run.judge`'s. What stays here starts things, runs them
and takes them down again.

The history is streamed to the run directory from the first event, so whatever happens later (an
exception, Ctrl-C, SIGTERM) what was recorded is kept and still checked. Faults are always healed
and the cluster always torn down (unless asked to keep it) before the check runs.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rich.console import Console

from checkers import Verdict
from harness.node import Daemon, Node, NodeError
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.engine import EngineError
from harness.node.docker.images import ImageError, image_exists, system_image, system_tag
from harness.node.interrupts import (
    Interrupted,
    hurried,
    interrupts_deferred,
    interrupts_once,
    shielded,
)
from harness.node.ssh import HostsFile, SshCluster
from harness.record import HistoryWriter
from harness.record.run_record import Interruption, RunRecord
from harness.record.spec import TestSpec
from harness.run.agent_link import AgentLink
from harness.run.agents import AGENT_DAEMON, AgentSet, deploy_system, stop_agents
from harness.run.holder_ops import HolderBoard, HolderOps
from harness.run.judge import Judged, RunOutcome, conclude_run, judge_recorded, write_results
from harness.run.plan import Plan, RunError, op_timeout_for, plan_run, workload_options
from harness.run.progress import RunProgress
from harness.run.proxies import stop_proxies
from harness.run.recorder import Recorder
from harness.run.store import (
    LatestLink,
    RunDir,
    new_run_dir,
    why_unwritable,
)
from nemeses import (
    NemesisError,
    NemesisPlayer,
    NoopNemesis,
    Schedule,
    standard_nemesis,
)
from nemeses.processes import ProcessImage, restart
from nemeses.protocol import Nemesis
from systems import (
    AdapterError,
    ChecksReady,
    CollectsData,
    Deployment,
    KnowsClientMember,
    KnowsLeader,
    Restarts,
    System,
    packages_of,
)
from workloads import (
    final_read_count,
    final_reads,
)

__all__ = ["collect_logs", "kill_restarter", "run_test"]

_FINAL_READ_TRIES: Final = 3
_SIGNAL_POLL_S: Final = 0.1
"""How long the main thread waits on other threads at a time, so a signal is handled promptly."""
_LOST_AFTER: Final = 3
"""A final reader whose agent is unreachable this many times in a row stops: the agent is lost."""
_READERS_PER_AGENT: Final = 8
"""Final reads run this many connections per agent at once (a run may have 100,000 keys)."""
_READER_BASE: Final = 1_000_000
"""Process numbers of the final readers start here, a block per copy, clear of the holders'."""


def run_test(
    spec: TestSpec,
    *,
    console: Console | None = None,
    progress: bool = True,
    keep_cluster: bool = False,
    command: Sequence[str] | None = None,
    hosts: HostsFile | None = None,
    schedule: Schedule | None = None,
) -> RunOutcome:
    """Carry out ``spec`` on a fresh Docker cluster (or on ``hosts``) and return the checked
    outcome. ``schedule`` (a replay's or a shrink candidate's) is played instead of the seed's.

    Raises :class:`RunError` for a spec that cannot run (nothing is started then), and for a run
    whose folder was deleted under it (nothing is left to check). Otherwise, once the run
    directory exists, failures, interruptions and a full disk still end in a checked history.
    """
    console = console or Console(stderr=True)
    plan = plan_run(spec, hosts, schedule)
    if plan.unexposed is not None:
        console.print(
            f"[yellow]warning:[/] {plan.unexposed}; going ahead as a control run (--control): "
            "its verdict will not test that bug",
            soft_wrap=True,
            highlight=False,
        )
    try:
        image = _image(plan.system, console) if hosts is None else None
    except KeyboardInterrupt as stop:
        name = stop.signal if isinstance(stop, Interrupted) else "SIGINT"
        raise RunError(
            f"interrupted by {name} during the image build: nothing "
            "was run (the next run builds the images again)"
        ) from None
    try:
        run_dir = new_run_dir(spec.test_name, spec.store)
    except OSError as problem:
        raise RunError(f"cannot create the run folder: {why_unwritable(problem)}") from None
    run_id = new_run_id()
    record = plan.record(run_id, run_dir, command)
    state = _RunState(run_dir, record, console)
    with interrupts_once() as interruption:
        state.interruption = interruption
        try:
            state.save()
            # soft_wrap: a path broken across lines of an 80-column log cannot be copied.
            console.print(
                f"[bold]run[/] {spec.test_name}  seed {spec.seed}  → {run_dir.path}",
                soft_wrap=True,
            )
            state.enter("cluster start")
            with (
                HistoryWriter(run_dir.history) as writer,
                contextlib.closing(Recorder(writer)) as recorder,
            ):
                state.recorder = recorder
                fuse = plan.config.lazy_disks
                with _nodes(run_id, plan.nodes, image, keep_cluster, hosts, fuse) as running:
                    state.enter("system setup")
                    console.print(f"cluster {run_id} up: {', '.join(running)}")
                    _exercise(plan, running, state, progress)
        except KeyboardInterrupt:
            pass
        except Exception as problem:  # kept and checked: whatever broke, the history stands
            state.fail(problem)
        # From here the first signal (if none came yet) is recorded, never raised: the check
        # runs on what was recorded and its results are written, whatever comes.
        with shielded():
            if state.recorder is not None and state.recorder.failure is not None:
                state.fail(state.recorder.failure)
            state.enter("the check")
            judged, result = state.check()
    return RunOutcome(run_dir, result, bool(interruption), record.error, record, judged)


@dataclass
class _RunState:
    """What the runner knows about a run in progress: where it is, how it is going and what went
    wrong, kept so that an interruption or a full disk still ends in a checked history."""

    run_dir: RunDir
    record: RunRecord
    console: Console
    recorder: Recorder | None = None
    phase: str = "cluster start"
    interruption: list[Interrupted] = field(default_factory=list)
    """Filled by the signal handler the moment a stop signal comes (see interrupts_once)."""

    def enter(self, phase: str) -> None:
        """Note that the run moved on to ``phase``; once interrupted, the phase the signal came
        in is kept, since that is the one the results must name."""
        if not self.interruption:
            self.phase = phase
            self.console.print(f"[dim]phase: {phase}[/]", highlight=False)

    def save(self) -> None:
        """Rewrite ``test.json``; a full disk is noted (the run stops), never raised."""
        try:
            self.run_dir.write_json(self.run_dir.test_json, self.record.to_json())
        except OSError as problem:
            if self.record.error is None:
                self.record.error = _disk_problem(problem)

    def fail(self, problem: BaseException) -> None:
        """Record why the run broke off (the first reason wins)."""
        if self.record.error is not None:
            return
        # Only a file error is the disk's: the Docker SDK's HTTP errors are OSErrors too (through
        # requests), but carry no errno, and blaming the disk for them sends users the wrong way.
        if isinstance(problem, OSError) and problem.errno is not None:
            self.record.error = _disk_problem(problem)
        else:
            self.record.error = f"{type(problem).__name__}: {problem}"
        self.save()
        self.console.print(f"[red]run failed:[/] {self.record.error}")
        self.console.print(f"the history recorded so far is kept in {self.run_dir.history}")

    def interrupted(self, signal: Interrupted) -> None:
        """Note which signal stopped the run, when, and in which phase."""
        self.record.interrupted = Interruption(signal.signal, signal.at.isoformat(), self.phase)
        self.save()
        self.console.print(
            f"[yellow]{self.record.interrupted.describe()}: faults healed, cluster removed; "
            "checking what was recorded[/]"
        )

    def check(self) -> tuple[Judged, Verdict]:
        """Check what was recorded and write the results once, with the interruption if a
        signal came (before or during the check); then point the store's ``latest`` at the run.
        A results file that cannot be written, or a store that cannot take the ``latest`` link,
        is a run error (and ``latest`` stays where it was). Only a signal that arrives while the
        results are being written makes them be written again, to say so.
        """
        self.record.finished = True
        self.save()
        judged = judge_recorded(self.run_dir, self.record)
        # The link for ``latest`` is made first, so that a store that cannot take it is a run
        # error the results already say: results.json is then written once.
        try:
            latest: LatestLink | None = LatestLink(self.run_dir)
        except OSError as problem:
            self.fail(problem)
            latest = None
        while True:
            if self.interruption and self.record.interrupted is None:
                self.interrupted(self.interruption[0])
            result = conclude_run(self.run_dir, self.record, judged, write=False)
            try:
                write_results(self.run_dir, self.record, judged, result)
            except OSError as problem:
                if latest is not None:
                    latest.discard()
                self.fail(problem)
                return judged, conclude_run(self.run_dir, self.record, judged, write=False)
            if not self.interruption or self.record.interrupted is not None:
                break  # else a signal came while the results were written: they must say so
        if latest is not None:
            try:
                latest.move()
            except OSError as problem:
                # Renaming the link made beside it failed: ``latest`` stays where it was; the
                # results are written and sound, test.json and the screen name the problem.
                self.fail(problem)
        return judged, result


def _disk_problem(problem: OSError) -> str:
    where = f" ({problem.filename})" if problem.filename else ""
    return (
        f"cannot write the run's files: {why_unwritable(problem)}{where}; "
        "free space on the store's disk or pass --store a folder on a larger one"
    )


def _image(system: System, console: Console) -> str:
    """The system's node image, built if missing (a setup problem, not a run, if that fails)."""
    try:
        packages = packages_of(system)
        if not image_exists(system_tag(packages)):
            console.print("building the node images (once, about a minute; no registry needed)")
        return system_image(packages)
    except (EngineError, ImageError, AdapterError) as problem:
        raise RunError(str(problem)) from None


@contextlib.contextmanager
def _nodes(
    run_id: str,
    topology: Sequence[NodeSpec],
    image: str | None,
    keep: bool,
    hosts: HostsFile | None,
    fuse: bool = False,
) -> Iterator[Mapping[str, Node]]:
    """The run's nodes: a fresh Docker cluster (with ``/dev/fuse`` when ``fuse``: the disk
    fault kinds), or the hosts of a hosts file; either is healed and cleaned up when the block
    ends."""
    if hosts is None:
        with Cluster(run_id, topology, image=image, keep=keep, fuse=fuse) as cluster:
            yield cluster.nodes
    else:
        with SshCluster(hosts, keep=keep) as connected:
            yield connected.nodes


def _exercise(plan: Plan, nodes: Mapping[str, Node], state: _RunState, progress: bool) -> None:
    """Set the planned system up, run holders and faults, heal, read back, collect logs.

    An interruption or a full disk still heals and collects; the final reads need neither.
    """
    recorder, run_dir = state.recorder, state.run_dir
    assert recorder is not None
    spec, system, config, workload = plan.spec, plan.system, plan.config, plan.workload
    through_proxy = plan.through_proxy
    deployment, agents = deploy_system(system, nodes, config, spec.bugs, proxy=through_proxy)
    lease_ttl = deployment.lease_ttl or config.lease_ttl
    interrupted = False
    # Everything the run holds is released here, last taken first: the agent links, then the
    # logs are collected, the agents stopped and the system torn down, whatever happened; a
    # signal meanwhile is recorded and waits until all of it is done.
    resources = contextlib.ExitStack()
    resources.callback(system.teardown, nodes)
    resources.callback(_stop_agents_quietly, nodes, through_proxy)
    resources.callback(collect_logs, system, nodes, run_dir)
    try:
        try:
            processes = {target.role: target.daemon for target in deployment.targets}
            processes["worker"] = AGENT_DAEMON
            roles = {n.name: n.role for n in nodes.values()}
            schedule = plan.final_schedule(roles, lease_ttl, processes)
            state.record.schedule = schedule
            state.save()
            options = workload_options(spec, plan.inventory)
            nemesis: Nemesis = (
                standard_nemesis(spec.nemeses, restarter=kill_restarter(system, deployment, agents))
                if spec.nemeses
                else NoopNemesis()
            )
            board = HolderBoard()
            stop = threading.Event()
            op_timeout = op_timeout_for(spec, schedule, lease_ttl)
            holders = _holders(agents, lease_ttl, recorder, spec, stop, op_timeout, board, 0)
            for ops in holders:
                resources.callback(ops.close)
            threads = [
                threading.Thread(
                    target=workload.holder,
                    args=(ops, options),
                    name=f"holder-{ops.node}",
                    daemon=True,
                )
                for ops in holders
            ]
            player = NemesisPlayer(
                nodes,
                nemesis,
                schedule.windows,
                clock=recorder.now,
                record=recorder.record_nemesis,
                resolve_holder=board.current,
                holder_work=board,
                resolve_leader=_leader(system, nodes),
                resolve_member=_member(system, nodes),
                resolve_waiter=board.waiter,
            )
            try:
                state.enter("the workload")
                recorder.begin()
                with RunProgress(recorder, spec.time_limit, state.console, progress) as display:
                    for thread in threads:
                        thread.start()
                    player.start()
                    deadline = time.monotonic() + spec.time_limit
                    while time.monotonic() < deadline and not recorder.stopped.is_set():
                        time.sleep(0.25)
                        display.refresh()
            except KeyboardInterrupt:
                interrupted = True
            finally:
                stop.set()
                state.enter("healing")
                with interrupts_deferred():
                    report = player.close()
                if not report.ok:
                    state.record.heal_errors = tuple(str(e) for e in report.errors)
                    state.save()
                # Holders whose operations hang are waited for, unless a second signal came:
                # then their operations stay open in the history (an unknown outcome).
                _join(threads, op_timeout + 5, lambda: hurried(state.interruption))
            if not interrupted and recorder.failure is None:
                state.enter("the final reads")
                # Let expired leases lapse and restarted processes settle before the final reads.
                time.sleep(lease_ttl)
                readers = _final_readers(
                    agents,
                    lease_ttl,
                    recorder,
                    spec,
                    op_timeout,
                    final_read_count(workload, options),
                )
                for ops in readers:
                    resources.callback(ops.close)
                lost = _final_reads(readers, final_reads(workload, options), recorder.stopped)
                if lost:
                    state.record.lost = tuple(
                        f"{node}'s agent ({error}; {unread:,} key(s) left unread)"
                        for node, (error, unread) in sorted(lost.items())
                    )
                    state.save()
        except KeyboardInterrupt:
            pass
    finally:
        state.enter("teardown")
        with interrupts_deferred():
            resources.close()


def _stop_agents_quietly(nodes: Mapping[str, Node], through_proxy: bool) -> None:
    # The system's own teardown comes next and must run even when a node no longer answers.
    with contextlib.suppress(Exception):
        stop_agents(nodes)
        if through_proxy:
            stop_proxies(nodes)


def kill_restarter(system: System, deployment: Deployment, agents: AgentSet) -> SystemRestarter:
    """How the kill nemesis starts a killed daemon again (see :class:`SystemRestarter`)."""
    return SystemRestarter(system, deployment, agents)


class SystemRestarter:
    """Starts a killed daemon again: the harness's agent through the agent set, the system's
    daemons through the system's own restart where it has one (which waits until they serve),
    anything else by relaunching its command line; and says whether a daemon serves by the
    system's own readiness check, where it has one (:class:`nemeses.processes.ChecksServing`)."""

    def __init__(self, system: System, deployment: Deployment, agents: AgentSet) -> None:
        self._system, self._agents = system, agents
        self._owned = {(target.node, target.daemon) for target in deployment.targets}

    def __call__(self, node: Node, image: ProcessImage) -> Daemon:
        """Start ``image``'s daemon on ``node`` again."""
        system = self._system
        try:
            if node.role == "worker" and image.name == AGENT_DAEMON:
                return self._agents.restart(node)
            if isinstance(system, Restarts) and (node.name, image.name) in self._owned:
                return system.restart(node, image.name)
        except AdapterError as problem:
            raise NemesisError(
                f"{node.name}: restarting {image.name!r} failed: {problem}"
            ) from None
        return restart(node, image)

    def serves(self, node: Node, daemon: str) -> bool | None:
        """The system's readiness check of ``daemon`` on ``node`` (``None``: it has none)."""
        if not isinstance(self._system, ChecksReady) or (node.name, daemon) not in self._owned:
            return None
        try:
            return self._system.serves(node, daemon)
        except (AdapterError, NodeError, OSError):
            return False


def _leader(system: System, nodes: Mapping[str, Node]) -> Callable[[], str | None] | None:
    """Asks the system which lock-service member leads, for ``lock-leader`` faults."""
    if not isinstance(system, KnowsLeader):
        return None

    def leader() -> str | None:
        try:
            return system.lock_leader(nodes)
        except AdapterError:
            return None  # the fault then falls back to the window's drawn lock node

    return leader


def _member(system: System, nodes: Mapping[str, Node]) -> Callable[[str], str | None] | None:
    """Asks the system which member a worker's client talks to, for ``holder-member`` faults."""
    if not isinstance(system, KnowsClientMember):
        return None

    def member(worker: str) -> str | None:
        try:
            return system.client_member(nodes, worker)
        except AdapterError:
            return None  # the fault then falls back to the window's drawn lock node

    return member


def _join(threads: Sequence[threading.Thread], timeout: float, hurry: Callable[[], bool]) -> None:
    """Wait up to ``timeout`` for ``threads``, or until ``hurry()`` (a second stop signal)."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        # In slices, so a stop signal the kernel handed to another thread is handled promptly.
        while thread.is_alive() and time.monotonic() < deadline and not hurry():
            thread.join(min(_SIGNAL_POLL_S, max(0.0, deadline - time.monotonic())))


def _holders(
    agents: AgentSet,
    lease_ttl: float,
    recorder: Recorder,
    spec: TestSpec,
    stop: threading.Event,
    op_timeout: float,
    board: HolderBoard,
    base: int,
) -> list[HolderOps]:
    """One :class:`HolderOps` per agent, process numbers from ``base`` (distinct per phase)."""
    return [
        HolderOps(
            node=name,
            process=base + index,
            process_stride=len(agents.endpoints),
            link=AgentLink(endpoint.host, endpoint.port, token=agents.token),
            recorder=recorder,
            seed=spec.seed,
            stop=stop,
            op_timeout=op_timeout,
            acquire_wait=3 * lease_ttl + spec.lock_delay,
            work_ms=spec.work_ms,
            board=board,
            lease_ttl=lease_ttl,
            tries=spec.acquire == "try",
        )
        for index, (name, endpoint) in enumerate(sorted(agents.endpoints.items()))
    ]


def _final_readers(
    agents: AgentSet,
    lease_ttl: float,
    recorder: Recorder,
    spec: TestSpec,
    op_timeout: float,
    reads: int,
) -> list[HolderOps]:
    """Up to :data:`_READERS_PER_AGENT` readers per agent, each its own process and connection."""
    return [
        ops
        for copy in range(min(_READERS_PER_AGENT, reads))
        for ops in _holders(
            agents,
            lease_ttl,
            recorder,
            spec,
            threading.Event(),
            op_timeout,
            HolderBoard(),
            _READER_BASE * (copy + 1),
        )
    ]


def _final_reads(
    readers: Sequence[HolderOps], reads: Iterable[tuple[str, str]], stop: threading.Event
) -> dict[str, tuple[str, int]]:
    """Read every (sink, key) once after healing, the readers in parallel (each its own process
    and connection); a failed read goes back for another reader, a few times each.

    ``reads`` is consumed as the readers go (a run may have hundreds of thousands), never held
    whole. A stop signal ends them promptly: readers finish the read in hand and take no other.
    A reader whose agent is unreachable :data:`_LOST_AFTER` times in a row stops, so the reads
    go to the agents that answer. Returns, when some keys were left unread, each lost agent's
    node with its last error and the number of keys unread (empty when every key was read).
    """
    source = iter(reads)
    taking = threading.Lock()
    again: queue.SimpleQueue[tuple[str, str, int]] = queue.SimpleQueue()
    halt = threading.Event()
    tries = _FINAL_READ_TRIES * len({reader.node for reader in readers})
    lost: dict[str, str] = {}
    unread = [0]

    def next_read() -> tuple[str, str, int] | None:
        with contextlib.suppress(queue.Empty):
            return again.get_nowait()
        with taking:
            item = next(source, None)
        return None if item is None else (item[0], item[1], 0)

    def read_all(reader: HolderOps) -> None:
        failures = 0
        while not (stop.is_set() or halt.is_set()):
            item = next_read()
            if item is None:
                return
            sink, key, attempt = item
            done = reader.read(sink, key)
            if done.ok:
                failures = 0
                continue
            if attempt + 1 < tries:
                again.put((sink, key, attempt + 1))
            else:
                with taking:
                    unread[0] += 1
            failures = failures + 1 if (done.error or "").startswith("unreachable") else 0
            if failures >= _LOST_AFTER:
                with taking:
                    lost[reader.node] = done.error or "unreachable"
                return

    with ThreadPoolExecutor(len(readers), thread_name_prefix="final-read") as pool:
        try:
            futures = [pool.submit(read_all, reader) for reader in readers]
            # Waited for in slices: the kernel may hand a signal to a reader's thread, and the
            # main thread runs Python's handler only once its own wait returns.
            while wait(futures, timeout=_SIGNAL_POLL_S).not_done:
                pass
            for done in futures:
                done.result()
        except BaseException:
            halt.set()  # a signal (or a reader's error): the others stop after the read in hand
            raise
    if stop.is_set():
        return {}
    # Keys no reader took (every reader's agent lost) or still waiting for another try.
    left = unread[0] + sum(1 for _ in source) + again.qsize()
    return {node: (error, left) for node, error in lost.items()} if left else {}


_DATA_PREFIX: Final = "data-"
"""What a file a system collects (``CollectsData``) is named with in ``logs/<node>/``: a daemon's
log is ``<daemon>.log``, and the reference store's data file is ``store.log`` too; without the
prefix the data file overwrote the log of the daemon of the same name."""


def collect_logs(system: System, nodes: Mapping[str, Node], run_dir: RunDir) -> None:
    """Save each node's daemon logs as ``logs/<node>/<daemon>.log`` and the files the system
    collects as ``logs/<node>/data-<file>``, whatever fails (a node may be gone)."""
    for name, node in nodes.items():
        folder = run_dir.logs / name
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            for log, data in node.logs().items():
                (folder / f"{log}.log").write_bytes(data)
    if isinstance(system, CollectsData):
        with contextlib.suppress(Exception):
            for name, files in system.collect(nodes).items():
                folder = run_dir.logs / Path(name).name
                folder.mkdir(parents=True, exist_ok=True)
                for file_name, data in files.items():
                    (folder / f"{_DATA_PREFIX}{Path(file_name).name}").write_bytes(data)
