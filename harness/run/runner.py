"""One whole fencing test: spec → images → cluster → system → workload under faults → heal →
final reads → check → store directory.

The history is streamed to the run directory from the first event, so whatever happens later (an
exception, Ctrl-C, SIGTERM) what was recorded is kept and still checked. Faults are always healed
and the cluster always torn down (unless asked to keep it) before the check runs.
"""

from __future__ import annotations

import contextlib
import platform
import shlex
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any, Final

from rich.console import Console

from checkers import CheckResult, check_file
from checkers.coverage import coverage_of
from harness.history import HistoryWriter, read_history
from harness.node import Node
from harness.node.docker.cluster import (
    Cluster,
    ClusterError,
    NodeSpec,
    default_topology,
    new_run_id,
)
from harness.node.docker.engine import EngineError
from harness.node.docker.images import ImageError, image_exists, node_image, node_tag
from harness.node.interrupts import Interrupted, interrupts_deferred, sigterm_interrupts
from harness.node.ssh import HostsFile, SshCluster
from harness.run.agent_link import AgentLink
from harness.run.exposure import unexposed
from harness.run.holder_ops import HolderBoard, HolderOps
from harness.run.progress import RunProgress
from harness.run.recorder import Recorder
from harness.run.spec import TestSpec
from harness.run.store import RunDir, new_run_dir
from nemeses import (
    DEFAULT_TTL_MULTIPLES,
    NemesisPlayer,
    NoopNemesis,
    Schedule,
    generate_schedule,
    standard_nemesis,
)
from nemeses.protocol import Nemesis
from systems import CollectsData, Deployment, Sink, System, SystemConfig, load_system
from workloads import HolderFlaws, Workload, WorkloadOptions, get_workload

__all__ = [
    "HOLDER_FLAWS",
    "Interrupted",
    "RunError",
    "RunOutcome",
    "check_run",
    "run_test",
]

HOLDER_FLAWS: Final[dict[str, str]] = {
    "retry-on-reject": "retry_on_reject",
    "reacquire-no-reread": "reacquire_no_reread",
}
"""Bug switches that live in the holder's logic (the workload), not in a server."""

_FINAL_READ_TRIES: Final = 3


class RunError(RuntimeError):
    """The run could not be carried out (bad spec, broken environment); the message says why."""


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended: where it is stored and what the checker decided."""

    run_dir: RunDir
    result: CheckResult
    interrupted: bool
    error: str | None = None
    """Why the run broke off (setup failed, the engine went away…); its history is still checked."""


def run_test(
    spec: TestSpec,
    *,
    console: Console | None = None,
    progress: bool = True,
    keep_cluster: bool = False,
    command: Sequence[str] | None = None,
    hosts: HostsFile | None = None,
) -> RunOutcome:
    """Carry out ``spec`` on a fresh Docker cluster (or on ``hosts``) and return the checked
    outcome.

    Raises :class:`RunError` for a spec that cannot run (nothing is started then). Once the run
    directory exists, failures and interruptions still end in a checked history.
    """
    console = console or Console(stderr=True)
    system = _load(spec)
    workload = get_workload(spec.workload)
    config = SystemConfig(lease_ttl=spec.ttl, lock_delay=spec.lock_delay, bugs=frozenset(spec.bugs))
    try:
        system.validate(config)
    except ValueError as problem:
        raise RunError(str(problem)) from None
    topology = _topology(spec, hosts)
    roles = {node.name: node.role for node in topology}
    ttl = system.lease_ttl(config)
    schedule = _schedule(spec, roles, ttl)
    shortfall = unexposed(spec, schedule, roles)
    if shortfall is not None:
        raise RunError(shortfall)
    image = _image(console) if hosts is None else None
    run_dir = new_run_dir(spec.test_name, spec.store)
    run_id = new_run_id()
    test: dict[str, Any] = {
        "spec": spec.to_json(),
        "run_id": run_id,
        "started": datetime.now(UTC).isoformat(),
        "command": shlex.join(command or _rerun_command(spec)),
        "lease_ttl": ttl,
        "schedule": schedule.to_json(),
        "inventory": [_sink_json(sink) for sink in system.inventory(config)],
        "topology": [{"name": n.name, "role": n.role} for n in topology],
        "versions": _versions(),
    }
    run_dir.write_json(run_dir.test_json, test)
    console.print(f"[bold]run[/] {spec.test_name}  seed {spec.seed}  → {run_dir.path}")
    interrupted = False
    with sigterm_interrupts(), HistoryWriter(run_dir.history) as writer:
        recorder = Recorder(writer)
        try:
            with _nodes(run_id, topology, image, keep_cluster, hosts) as nodes:
                console.print(f"cluster {run_id} up: {', '.join(nodes)}")
                interrupted = _exercise(
                    spec,
                    system,
                    config,
                    workload,
                    schedule,
                    nodes,
                    recorder,
                    run_dir,
                    test,
                    console,
                    progress,
                )
        except Interrupted:
            interrupted = True
            console.print("[yellow]interrupted: faults healed, cluster removed[/]")
        except Exception as problem:
            test["error"] = f"{type(problem).__name__}: {problem}"
            run_dir.write_json(run_dir.test_json, test)
            console.print(f"[red]run failed:[/] {problem}")
            console.print(f"the history recorded so far is kept in {run_dir.history}")
    result = check_run(run_dir, test)
    return RunOutcome(run_dir, result, interrupted, test.get("error"))


def check_run(run_dir: RunDir, test: Mapping[str, Any] | None = None) -> CheckResult:
    """Check a run directory's history with its inventory and TTL and write ``results.json``,
    with what the run exercised under ``coverage`` (:mod:`checkers.coverage`).

    The report and the store's index are the caller's to write (:func:`harness.report.publish`).
    """
    test = test if test is not None else run_dir.read_test()
    inventory = {
        row["sink"]: Sink(
            row["sink"],
            bool(row["fenced"]),
            row["mitigation"],
            str(row.get("description", "")),
            seq=bool(row.get("seq", False)),
        )
        for row in test["inventory"]
    }
    result = check_file(run_dir.history, inventory=inventory, lease_ttl=test.get("lease_ttl"))
    data = result.to_json()
    data["coverage"] = coverage_of(
        read_history(run_dir.history),
        sinks=inventory,
        lease_ttl=test.get("lease_ttl"),
        roles={node["name"]: node["role"] for node in test.get("topology", ())},
    ).to_json()
    if test.get("error"):
        data["run_error"] = test["error"]
    run_dir.write_json(run_dir.results, data)
    return result


def _topology(spec: TestSpec, hosts: HostsFile | None) -> list[NodeSpec]:
    """The nodes and roles of the run: the hosts file's, or the standard Docker topology."""
    if hosts is None:
        return default_topology(spec.workers)
    try:
        return [NodeSpec(name, role) for name, role in hosts.roles().items()]
    except ClusterError as problem:
        raise RunError(f"{hosts.path}: {problem}") from None


def _image(console: Console) -> str:
    """The node image, built if missing (a setup problem, not a run, if that fails)."""
    try:
        if not image_exists(node_tag()):
            console.print("building the node images (once, about a minute; no registry needed)")
        return node_image()
    except (EngineError, ImageError) as problem:
        raise RunError(str(problem)) from None


@contextlib.contextmanager
def _nodes(
    run_id: str,
    topology: Sequence[NodeSpec],
    image: str | None,
    keep: bool,
    hosts: HostsFile | None,
) -> Iterator[Mapping[str, Node]]:
    """The run's nodes: a fresh Docker cluster, or the hosts of a hosts file; either is healed
    and cleaned up when the block ends."""
    if hosts is None:
        with Cluster(run_id, topology, image=image, keep=keep) as cluster:
            yield cluster.nodes
    else:
        with SshCluster(hosts, keep=keep) as connected:
            yield connected.nodes


def _load(spec: TestSpec) -> System:
    try:
        system = load_system(spec.system)
        get_workload(spec.workload)
    except (LookupError, ValueError) as problem:
        raise RunError(str(problem).strip("'\"")) from None
    known = set(system.bug_switches())
    unknown = sorted(set(spec.bugs) - known)
    if unknown:
        raise RunError(
            f"unknown bug switch(es) {', '.join(unknown)} for system {spec.system!r}; "
            f"choose from {', '.join(sorted(known))} (see `fencecheck list`)"
        )
    return system


def _schedule(
    spec: TestSpec,
    roles: Mapping[str, str],
    ttl: float,
    processes: Mapping[str, str] | None = None,
) -> Schedule:
    """The seeded fault schedule; ``processes`` (role -> daemon) is known once the system runs,
    and the same seed draws the same windows with or without it."""
    duration = round(spec.time_limit * 1e9)
    ttl_ns = round(ttl * 1e9)
    if not spec.nemeses:
        return Schedule(spec.seed, ttl_ns, duration, ())
    try:
        return generate_schedule(
            spec.seed,
            roles,
            lease_ttl_ns=ttl_ns,
            duration_ns=duration,
            kinds=spec.nemeses,
            targets=spec.targets,
            processes=processes,
            ttl_multiples=spec.fault_lengths or DEFAULT_TTL_MULTIPLES,
        )
    except (ValueError, RuntimeError) as problem:
        raise RunError(str(problem)) from None


def _exercise(
    spec: TestSpec,
    system: System,
    config: SystemConfig,
    workload: Workload,
    schedule: Schedule,
    nodes: Mapping[str, Node],
    recorder: Recorder,
    run_dir: RunDir,
    test: dict[str, Any],
    console: Console,
    progress: bool,
) -> bool:
    """Set the system up, run holders and faults, heal, read back, collect logs.

    Returns whether the run was interrupted; an interruption still heals and collects.
    """
    deployment = system.setup(nodes, config)
    interrupted = False
    try:
        processes = {target.role: target.daemon for target in deployment.targets}
        schedule = _schedule(
            spec, {n.name: n.role for n in nodes.values()}, deployment.lease_ttl, processes
        )
        test["schedule"] = schedule.to_json()
        run_dir.write_json(run_dir.test_json, test)
        options = _options(spec, deployment)
        nemesis: Nemesis = standard_nemesis(spec.nemeses) if spec.nemeses else NoopNemesis()
        board = HolderBoard()
        stop = threading.Event()
        op_timeout = spec.op_timeout or _outlast(schedule, deployment.lease_ttl)
        holders = _holders(deployment, recorder, spec, stop, op_timeout, board, base=0)
        threads = [
            threading.Thread(
                target=workload.holder, args=(ops, options), name=f"holder-{ops.node}", daemon=True
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
        )
        try:
            recorder.begin()
            with RunProgress(recorder, spec.time_limit, console, progress) as display:
                for thread in threads:
                    thread.start()
                player.start()
                deadline = time.monotonic() + spec.time_limit
                while time.monotonic() < deadline:
                    time.sleep(0.25)
                    display.refresh()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            stop.set()
            with interrupts_deferred():
                report = player.close()
            if not report.ok:
                test["heal_errors"] = [str(e) for e in report.errors]
                run_dir.write_json(run_dir.test_json, test)
            _join(threads, op_timeout + 5)
        if not interrupted:
            # Let expired leases lapse and restarted processes settle before the final reads.
            time.sleep(deployment.lease_ttl)
            readers = _holders(
                deployment, recorder, spec, threading.Event(), op_timeout, HolderBoard(), 1000
            )
            _final_reads(readers, workload.final_reads(options))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _collect_logs(system, nodes, run_dir)
        system.teardown(nodes)
    return interrupted


def _options(spec: TestSpec, deployment: Deployment) -> WorkloadOptions:
    flaws = HolderFlaws(**{HOLDER_FLAWS[b]: True for b in spec.bugs if b in HOLDER_FLAWS})
    return WorkloadOptions(
        keys=spec.keys,
        locks=spec.locks,
        writes_per_lease=spec.writes_per_lease,
        read_ratio=spec.read_ratio,
        rate=spec.rate,
        fenced_sinks=tuple(s.name for s in deployment.inventory if s.fenced),
        all_sinks=tuple(s.name for s in deployment.inventory),
        flaws=flaws,
    )


def _outlast(schedule: Schedule, ttl: float) -> float:
    """An operation timeout longer than any fault, so a refusal after a fault is seen as such."""
    longest = max((w.duration_ns for w in schedule.windows), default=0) / 1e9
    return longest + 2 * ttl + 2.0


def _join(threads: Sequence[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def _holders(
    deployment: Deployment,
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
            process_stride=len(deployment.agents),
            link=AgentLink(endpoint.host, endpoint.port, token=endpoint.token),
            recorder=recorder,
            seed=spec.seed,
            stop=stop,
            op_timeout=op_timeout,
            acquire_wait=3 * deployment.lease_ttl + spec.lock_delay,
            work_ms=spec.work_ms,
            board=board,
            lease_ttl=deployment.lease_ttl,
        )
        for index, (name, endpoint) in enumerate(sorted(deployment.agents.items()))
    ]


def _final_reads(readers: Sequence[HolderOps], reads: Sequence[tuple[str, str]]) -> None:
    """Read every (sink, key) once after healing, trying each agent in turn until one answers."""
    for sink, key in reads:
        for attempt in range(_FINAL_READ_TRIES * len(readers)):
            if readers[attempt % len(readers)].read(sink, key).ok:
                break


def _collect_logs(system: System, nodes: Mapping[str, Node], run_dir: RunDir) -> None:
    for name, node in nodes.items():
        folder = run_dir.logs / name
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            for log, data in node.logs().items():
                (folder / f"{log}.log").write_bytes(data)
    if isinstance(system, CollectsData):
        with contextlib.suppress(Exception):
            for name, files in system.collect(nodes).items():
                for file_name, data in files.items():
                    (run_dir.logs / name / file_name).write_bytes(data)


def _sink_json(sink: Sink) -> dict[str, Any]:
    return {
        "sink": sink.name,
        "fenced": sink.fenced,
        "mitigation": sink.mitigation,
        "description": sink.description,
        "seq": sink.seq,
    }


def _versions() -> dict[str, str]:
    info = {"fencecheck": version("fencecheck"), "python": platform.python_version()}
    with contextlib.suppress(Exception):
        from harness.node.docker.engine import engine

        info["docker_engine"] = str(engine().version().get("Version", "?"))
    return info


def _rerun_command(spec: TestSpec) -> list[str]:
    argv = ["fencecheck", "run", "--system", spec.system, "--workload", spec.workload]
    for bug in spec.bugs:
        argv += ["--bug", bug]
    argv += ["--nemesis", ",".join(spec.nemeses) or "none"]
    argv += ["--target", ",".join(spec.targets), "--ttl", str(spec.ttl)]
    if spec.fault_lengths:
        argv += ["--fault-lengths", ",".join(f"{m:g}" for m in spec.fault_lengths)]
    argv += ["--time-limit", str(spec.time_limit), "--workers", str(spec.workers)]
    argv += ["--keys", str(spec.keys), "--locks", str(spec.locks)]
    argv += ["--work-ms", str(spec.work_ms), "--seed", str(spec.seed)]
    if spec.rate:
        argv += ["--rate", f"{spec.rate:g}"]
    if spec.lock_delay:
        argv += ["--lock-delay", str(spec.lock_delay)]
    return argv
