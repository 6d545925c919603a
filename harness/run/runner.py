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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any, Final

from rich.console import Console

from checkers import CheckResult, check_file
from harness.history import HistoryWriter
from harness.node import Daemon, Node
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.engine import EngineError
from harness.node.docker.images import ImageError, image_exists, system_image, system_tag
from harness.node.interrupts import Interrupted, interrupts_deferred, sigterm_interrupts
from harness.run.agent_link import AgentLink
from harness.run.agents import AGENT_DAEMON, AgentSet, start_agents, stop_agents
from harness.run.holder_ops import HolderBoard, HolderOps
from harness.run.progress import RunProgress
from harness.run.recorder import Recorder
from harness.run.spec import TestSpec
from harness.run.store import RunDir, new_run_dir
from nemeses import (
    DEFAULT_TTL_MULTIPLES,
    LOCK_LEADER,
    NemesisError,
    NemesisPlayer,
    NoopNemesis,
    Schedule,
    generate_schedule,
    standard_nemesis,
)
from nemeses.processes import ProcessImage, restart
from nemeses.protocol import Nemesis
from systems import (
    HOLDER_FLAWS,
    AdapterError,
    CollectsData,
    Deployment,
    KnowsLeader,
    PlantsBugs,
    Restarts,
    Sink,
    System,
    SystemConfig,
    lease_ttl_of,
    load_system,
    packages_of,
    topology,
)
from systems.holder_flaws import REACQUIRE_NO_REREAD, RETRY_ON_REJECT
from workloads import HolderFlaws, Workload, WorkloadOptions, get_workload

__all__ = [
    "Interrupted",
    "RunError",
    "RunOutcome",
    "check_run",
    "kill_restarter",
    "run_test",
]

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
) -> RunOutcome:
    """Carry out ``spec`` on a fresh Docker cluster and return the checked outcome.

    Raises :class:`RunError` for a spec that cannot run (nothing is started then). Once the run
    directory exists, failures and interruptions still end in a checked history.
    """
    console = console or Console(stderr=True)
    system = _load(spec)
    workload = get_workload(spec.workload)
    config = SystemConfig(
        lease_ttl=spec.ttl,
        lock_delay=spec.lock_delay,
        bugs=frozenset(b for b in spec.bugs if b not in HOLDER_FLAWS),
    )
    try:
        if isinstance(system, PlantsBugs):
            system.validate(config)
        nodes = [NodeSpec(name, role) for name, role in topology(system.roles(), spec.workers)]
        inventory = system.inventory(config)
    except (ValueError, AdapterError) as problem:
        raise RunError(str(problem)) from None
    if spec.workload != "sinks" and not any(sink.fenced for sink in inventory):
        raise RunError(
            f"system {spec.system!r} declares no fenced sink, and the {spec.workload} workload "
            "writes to the inventory's first fenced sink; use --workload sinks"
        )
    roles = {node.name: node.role for node in nodes}
    ttl = lease_ttl_of(system, config)
    schedule = _schedule(spec, roles, ttl)
    try:
        # Before the run directory exists: no engine or no image is a setup problem, not a run.
        packages = packages_of(system)
        if not image_exists(system_tag(packages)):
            console.print("building the node images (once, about a minute; no registry needed)")
        image = system_image(packages)
    except (EngineError, ImageError, AdapterError) as problem:
        raise RunError(str(problem)) from None
    run_dir = new_run_dir(spec.test_name, spec.store)
    run_id = new_run_id()
    test: dict[str, Any] = {
        "spec": spec.to_json(),
        "run_id": run_id,
        "started": datetime.now(UTC).isoformat(),
        "command": shlex.join(command or _rerun_command(spec)),
        "lease_ttl": ttl,
        "schedule": schedule.to_json(),
        "inventory": [_sink_json(sink) for sink in inventory],
        "topology": [{"name": n.name, "role": n.role} for n in nodes],
        "versions": _versions(),
    }
    run_dir.write_json(run_dir.test_json, test)
    console.print(f"[bold]run[/] {spec.test_name}  seed {spec.seed}  → {run_dir.path}")
    interrupted = False
    with sigterm_interrupts(), HistoryWriter(run_dir.history) as writer:
        recorder = Recorder(writer)
        try:
            with Cluster(run_id, nodes, image=image, keep=keep_cluster) as cluster:
                console.print(f"cluster {run_id} up: {', '.join(cluster.nodes)}")
                interrupted = _exercise(
                    spec,
                    system,
                    config,
                    inventory,
                    workload,
                    schedule,
                    cluster.nodes,
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
    """Check a run directory's history with its inventory and TTL and write ``results.json``.

    The report and the store's index are the caller's to write (:func:`harness.report.publish`).
    """
    test = test if test is not None else run_dir.read_test()
    inventory = {s["sink"]: (bool(s["fenced"]), str(s["mitigation"])) for s in test["inventory"]}
    result = check_file(run_dir.history, inventory=inventory, lease_ttl=test.get("lease_ttl"))
    data = result.to_json()
    if test.get("error"):
        data["run_error"] = test["error"]
    run_dir.write_json(run_dir.results, data)
    return result


def _load(spec: TestSpec) -> System:
    try:
        system = load_system(spec.system)
        get_workload(spec.workload)
    except (LookupError, ValueError) as problem:
        raise RunError(str(problem).strip("'\"")) from None
    switches = set(system.bug_switches()) if isinstance(system, PlantsBugs) else set()
    unknown = sorted(set(spec.bugs) - switches - set(HOLDER_FLAWS))
    if unknown:
        raise RunError(
            f"unknown bug switch(es) {', '.join(unknown)} for system {spec.system!r}; choose "
            f"from {', '.join(sorted(switches)) or 'none'} or the holder flaws "
            f"{', '.join(HOLDER_FLAWS)} (see `fencecheck list`)"
        )
    if LOCK_LEADER in spec.targets and not isinstance(system, KnowsLeader):
        raise RunError(
            f"system {spec.system!r} cannot say which lock-service member leads, so faults "
            "cannot target lock-leader; target lock or a node name instead"
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
    inventory: Sequence[Sink],
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
    lease_ttl = deployment.lease_ttl or config.lease_ttl
    interrupted = False
    try:
        agents = start_agents(nodes, deployment.client, lease_ttl, spec.bugs)
        processes = {target.role: target.daemon for target in deployment.targets}
        processes["worker"] = AGENT_DAEMON
        schedule = _schedule(spec, {n.name: n.role for n in nodes.values()}, lease_ttl, processes)
        test["schedule"] = schedule.to_json()
        run_dir.write_json(run_dir.test_json, test)
        options = _options(spec, inventory)
        nemesis: Nemesis = (
            standard_nemesis(spec.nemeses, restarter=kill_restarter(system, deployment, agents))
            if spec.nemeses
            else NoopNemesis()
        )
        board = HolderBoard()
        stop = threading.Event()
        op_timeout = spec.op_timeout or _outlast(schedule, lease_ttl)
        holders = _holders(agents, lease_ttl, recorder, spec, stop, op_timeout, board, base=0)
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
            resolve_leader=_leader(system, nodes),
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
            time.sleep(lease_ttl)
            readers = _holders(
                agents,
                lease_ttl,
                recorder,
                spec,
                threading.Event(),
                op_timeout,
                HolderBoard(),
                1000,
            )
            _final_reads(readers, workload.final_reads(options))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _collect_logs(system, nodes, run_dir)
        with contextlib.suppress(Exception):
            stop_agents(nodes)
        system.teardown(nodes)
    return interrupted


def kill_restarter(
    system: System, deployment: Deployment, agents: AgentSet
) -> Callable[[Node, ProcessImage], Daemon]:
    """How the kill nemesis starts a killed daemon again: the harness's agent through the agent
    set, the system's daemons through the system's own restart where it has one (which waits
    until they serve), anything else by relaunching its command line."""
    owned = {(target.node, target.daemon) for target in deployment.targets}

    def start_again(node: Node, image: ProcessImage) -> Daemon:
        try:
            if node.role == "worker" and image.name == AGENT_DAEMON:
                return agents.restart(node)
            if isinstance(system, Restarts) and (node.name, image.name) in owned:
                return system.restart(node, image.name)
        except AdapterError as problem:
            raise NemesisError(
                f"{node.name}: restarting {image.name!r} failed: {problem}"
            ) from None
        return restart(node, image)

    return start_again


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


def _options(spec: TestSpec, inventory: Sequence[Sink]) -> WorkloadOptions:
    flaws = HolderFlaws(
        retry_on_reject=RETRY_ON_REJECT in spec.bugs,
        reacquire_no_reread=REACQUIRE_NO_REREAD in spec.bugs,
    )
    return WorkloadOptions(
        keys=spec.keys,
        locks=spec.locks,
        writes_per_lease=spec.writes_per_lease,
        read_ratio=spec.read_ratio,
        rate=spec.rate,
        fenced_sinks=tuple(s.name for s in inventory if s.fenced),
        all_sinks=tuple(s.name for s in inventory),
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
            link=AgentLink(endpoint.host, endpoint.port),
            recorder=recorder,
            seed=spec.seed,
            stop=stop,
            op_timeout=op_timeout,
            acquire_wait=3 * lease_ttl + spec.lock_delay,
            work_ms=spec.work_ms,
            board=board,
        )
        for index, (name, endpoint) in enumerate(sorted(agents.endpoints.items()))
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
    data = {
        "sink": sink.name,
        "fenced": sink.fenced,
        "mitigation": sink.mitigation,
        "description": sink.description,
    }
    # Whether the sink reports its acceptance order, on inventories that carry the flag.
    seq = getattr(sink, "seq", None)
    if seq is not None:
        data["seq"] = seq
    return data


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
    argv += ["--seed", str(spec.seed)]
    if spec.lock_delay:
        argv += ["--lock-delay", str(spec.lock_delay)]
    return argv
