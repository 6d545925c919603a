"""Whole-run bench: throughput and harness overhead, and the checker's detection power.

Part ``overhead`` (targets of issue 5 item 7):

- throughput: one fault-free run of the reference system with 5 holders and no critical-section
  work; completed operations per second of the history, against >= 1,000 ops/s;
- harness overhead: on one live cluster, the latency of a fenced write sent by the controller
  (through the agent, as a run sends it) against the same write sent by the same client module
  from inside the same worker container straight to the same store; the added p99, against
  <= 1 ms.

Part ``detection``: ``--runs`` seeded runs of every bug switch of the reference system under the
fault that exposes it (the cases of ``tests/e2e/test_detection_matrix.py``; ``--matrix`` takes
another matrix's cases, ``--every-fault`` every correct row of it), reporting the share
detected (invalid, with the anomaly the switch plants) against >= 95 % and the median time to the
first violating operation against <= 15 s; and as many runs of the correct system, whose false
alarms must be 0.

    python bench/run.py [--part all|overhead|detection] [--runs 5] [--duration 60] [--bugs a,b]
    python bench/run.py --part detection --matrix matrices/etcd.json --every-fault --runs 3

Exit status is 0 whatever the numbers: machines are noisy (2 cores shared with the containers),
so the figures are for people to read, not a gate. Run directories are kept under ``--store``
(a fresh temporary folder by default) for inspection.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from harness.node import Node
from harness.node.docker.cluster import Cluster, NodeSpec, new_run_id
from harness.node.docker.images import system_image
from harness.record import NEMESIS, HistoryWriter, read_history
from harness.record.spec import TestSpec
from harness.run.agent_link import AgentLink
from harness.run.agents import deploy_system, stop_agents
from harness.run.holder_ops import HolderBoard, HolderOps
from harness.run.judge import RunOutcome
from harness.run.matrix import MatrixEntry, load_matrix
from harness.run.recorder import Recorder
from harness.run.runner import run_test
from systems import Deployment, SystemConfig, load_system, packages_of
from systems import topology as topology_of
from systems.deploy import INSTALL_DIR

__all__ = ["main"]

_TARGET_OPS_PER_S: Final = 1000.0
_TARGET_ADDED_P99_MS: Final = 1.0
_TARGET_DETECTED: Final = 0.95
_TARGET_FIRST_S: Final = 15.0
_WARM_UP: Final = 100

# Runs on the worker node: the system's own client module, as the agent loads it, times fenced
# writes to a sink. Argv: install dir, the client's config (JSON), sink, lock, key, count, warm-up.
_DIRECT: Final = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import client
from harness.nodeside import wire
wire.use_secret(sys.argv[1] + "/run-secret")  # the run's secret, as the agent uses it
config, sink, lock, key = json.loads(sys.argv[2]), *sys.argv[3:6]
count, warm = int(sys.argv[6]), int(sys.argv[7])
c = client.Client({**config, "node": "bench"})
epoch = c.acquire(lock, 60.0, 10.0).epoch
seconds = []
for i in range(warm + count):
    began = time.perf_counter()
    outcome = c.write(lock, sink, key, f"direct-{epoch}-{i}", epoch, None)
    took = time.perf_counter() - began
    if type(outcome).__name__ != "Accepted":
        sys.exit(f"direct write refused: {outcome}")
    if i >= warm:
        seconds.append(took)
c.release(lock, epoch)
print(json.dumps(seconds))
"""


@dataclass(frozen=True)
class _Case:
    """One detection case: the run's shape, and what the checker must report to count as caught.

    ``anomalies``: every one of them must be reported (as ``fencecheck run-all`` judges). The
    correct system's cases have no bugs and no anomalies.
    """

    name: str
    spec: TestSpec
    anomalies: tuple[str, ...] = ()


def _case(entry: MatrixEntry) -> _Case:
    spec = entry.spec
    name = "+".join(spec.bugs) or f"correct {spec.workload}+{'+'.join(spec.nemeses)}"
    if not spec.bugs and spec.targets != ("holder",):
        name += f"@{','.join(spec.targets)}"
    if spec.system != _MATRIX_SYSTEM:  # a matrix of several systems (matrices/proxy.json)
        name = f"{spec.system}: {name}"
    return _Case(name, spec, entry.expect.anomalies)


_MATRIX_SYSTEM: Final = "reference"


# The same cases CI runs (tests/e2e/test_detection_matrix.py): each bug switch under the fault
# that exposes it, and the correct system under pauses with every workload. ``--matrix`` picks
# another matrix (a real system's, e.g. matrices/etcd.json).
_MATRIX: Final = Path(__file__).resolve().parent.parent / "matrices" / "detection.json"


def _cases(matrix: Path, every_fault: bool) -> tuple[tuple[_Case, ...], tuple[_Case, ...]]:
    """The matrix's bug cases (expected invalid) and correct cases: those under pauses, or,
    with ``every_fault``, every bug-free row."""
    entries = [_case(entry) for entry in load_matrix(matrix)]
    bugs = tuple(case for case in entries if case.spec.bugs and case.anomalies)
    correct = tuple(
        case
        for case in entries
        if not case.spec.bugs and (every_fault or case.spec.nemeses == ("pause",))
    )
    return bugs, correct


# -- helpers --------------------------------------------------------------------------------------


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _verdict_text(verdict: Any) -> str:
    return {True: "valid", False: "invalid"}.get(verdict, str(verdict))


def _mark(ok: bool) -> str:
    return "[green]PASS[/]" if ok else "[red]MISS[/]"


def _quiet() -> Console:
    return Console(stderr=True, quiet=True)


# -- part a: throughput ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Throughput:
    ops: int
    seconds: float
    outcomes: Counter[str]
    verdict: str
    run_dir: Path
    latencies: tuple[float, ...] = ()
    """Seconds from invoke to completion of each operation counted."""

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0


def _measure(spec: TestSpec) -> _Throughput:
    """Run ``spec``; count the operations completed within its time limit, with their latency."""
    outcome = _ended(run_test(spec, console=_quiet(), progress=False))
    limit = round(spec.time_limit * 1e9)
    outcomes: Counter[str] = Counter()
    invoked: dict[Any, int] = {}
    latencies: list[float] = []
    first: int | None = None
    for event in read_history(outcome.run_dir.history):
        if event.process == NEMESIS:
            continue
        if event.type == "invoke":
            first = event.time if first is None else first
            invoked[event.process] = event.time
        elif event.time <= limit:  # the final reads after the time limit are not load
            outcomes[event.type] += 1
            latencies.append((event.time - invoked.pop(event.process)) / 1e9)
    window = (limit - (first or 0)) / 1e9
    verdict = _verdict_text(outcome.result.valid)
    return _Throughput(
        sum(outcomes.values()), window, outcomes, verdict, outcome.run_dir.path, tuple(latencies)
    )


def _throughput(seconds: float, seed: int, store: Path) -> _Throughput:
    """One fault-free run at full speed; count the operations completed within its time limit.

    20 locks for 5 holders: a holder picks a lock at random, so with as many locks as holders most
    acquires would wait for another holder's 20-write lease; with 20 at most 4 in 20 collide.
    3 keys per lock (60 keys) keep the 10 % of reads short as the logs grow. TTL 2 s: no faults,
    so the TTL only sets how often leases are renewed, not how the run goes.
    """
    spec = TestSpec(
        workers=5,
        nemeses=(),
        work_ms=0,
        locks=20,
        keys=3,
        ttl=2.0,
        time_limit=seconds,
        seed=seed,
        store=store,
        name="bench-throughput",
    )
    return _measure(spec)


# -- part a: harness overhead ---------------------------------------------------------------------


def _direct(node: Node, deployment: Deployment, sink: str, count: int) -> list[float]:
    """Seconds per write from the worker itself: client module → sink, no agent, no controller."""
    config = json.dumps(dict(deployment.client.config))
    argv = ["python3", "-c", _DIRECT, INSTALL_DIR, config, sink, "bench-direct", "direct"]
    result = node.run([*argv, str(count), str(_WARM_UP)], timeout=300, check=True)
    seconds: list[float] = json.loads(result.stdout)
    return seconds


def _timed(count: int, write: Callable[[int], bool]) -> list[float]:
    """Seconds per call of ``write(i)`` after a warm-up; a refused write is a broken bench."""
    seconds: list[float] = []
    for i in range(_WARM_UP + count):
        began = time.perf_counter()
        ok = write(i)
        took = time.perf_counter() - began
        if not ok:
            raise RuntimeError(f"write {i} through the agent was not accepted")
        if i >= _WARM_UP:
            seconds.append(took)
    return seconds


def _overhead(
    writes: int,
    rounds: int,
    history: Path,
    system_name: str = "reference",
    sink: str = "store",
    proxy: bool = False,
) -> dict[str, list[float]]:
    """Seconds per fenced write by three paths, in interleaved rounds on one cluster.

    All three write to the same ``sink`` of ``system_name`` from the same worker node w1 with
    work_ms 0: ``direct`` is
    the client module run on w1; ``agent`` adds the controller → agent hop (the request line, the
    agent's lease check and log line); ``agent + history`` is a run's real path,
    :class:`HolderOps`, which also records invoke and completion (flushed) in a history. With
    ``proxy`` the write-path proxy is in place on w1 (all three paths pass through it).
    """
    system = load_system(system_name)
    samples: dict[str, list[float]] = {"direct": [], "agent": [], "agent + history": []}
    per_round = max(1, writes // rounds)
    topology = [NodeSpec(name, role) for name, role in topology_of(system.roles(), 1)]
    image = system_image(packages_of(system))
    with Cluster(f"bench-{new_run_id()}", topology, image=image) as cluster:
        nodes: dict[str, Node] = dict(cluster.nodes)
        deployment, agents = deploy_system(system, nodes, SystemConfig(lease_ttl=10.0), proxy=proxy)
        try:
            endpoint = agents.endpoints["w1"]
            link = AgentLink(endpoint.host, endpoint.port, token=agents.token)
            grant = link.call({"op": "acquire", "lock": "bench-agent", "wait": 10.0}, 20.0)
            if not grant or not grant.get("ok"):
                raise RuntimeError(f"the agent could not acquire a lease: {grant}")
            epoch = int(grant["epoch"])

            def by_link(i: int) -> bool:
                request = {
                    "op": "write",
                    "lock": "bench-agent",
                    "epoch": epoch,
                    "sink": sink,
                    "key": "agent",
                    "id": f"agent-{i}",
                    "prev": None,
                    "work_ms": 0,
                    "check_lease": True,
                }
                answer = link.call(request, 10.0)
                return bool(answer and answer.get("ok"))

            with HistoryWriter(history) as writer:
                ops = HolderOps(
                    node="w1",
                    process=0,
                    process_stride=1,
                    link=AgentLink(endpoint.host, endpoint.port, token=agents.token),
                    recorder=Recorder(writer),
                    seed=0,
                    stop=threading.Event(),
                    op_timeout=10.0,
                    acquire_wait=10.0,
                    work_ms=0,
                    board=HolderBoard(),
                    lease_ttl=deployment.lease_ttl or 10.0,
                )
                granted = ops.acquire("bench-ops")
                if not granted.ok:
                    raise RuntimeError(f"the agent could not acquire a lease: {granted.error}")
                ops_epoch = int(granted.value["epoch"])
                for _ in range(rounds):
                    samples["direct"] += _direct(cluster.node("w1"), deployment, sink, per_round)
                    samples["agent"] += _timed(per_round, by_link)
                    samples["agent + history"] += _timed(
                        per_round, lambda i: ops.write("bench-ops", ops_epoch, sink, "ops").ok
                    )
            link.close()
        finally:
            stop_agents(nodes)
            system.teardown(nodes)
    return samples


def _part_overhead(args: argparse.Namespace, store: Path, console: Console) -> list[str]:
    console.rule("throughput and harness overhead")
    samples = _overhead(args.writes, args.rounds, store / "bench-overhead-history.jsonl")
    shares = (0.5, 0.9, 0.99)
    heads = [f"p{round(q * 100)}" for q in shares]
    table = Table("path (fenced write to the store)", "n", *heads, *(f"added {h}" for h in heads))
    base = [_percentile(samples["direct"], q) for q in shares]
    added: dict[str, float] = {}
    for path, values in samples.items():
        figures = [_percentile(values, q) for q in shares]
        added[path] = figures[-1] - base[-1]
        extra = (
            [""] * 3
            if path == "direct"
            else [_ms(f - b) for f, b in zip(figures, base, strict=True)]
        )
        table.add_row(path, str(len(values)), *map(_ms, figures), *extra)
    console.print(table)

    result = _throughput(args.throughput_seconds, args.seed, store)
    table = Table("throughput run", "ops", "seconds", "ops/s", "ok / fail / info", "verdict")
    breakdown = " / ".join(str(result.outcomes[t]) for t in ("ok", "fail", "info"))
    table.add_row(
        "5 holders, 20 locks, no faults, work_ms 0",
        str(result.ops),
        f"{result.seconds:.1f}",
        f"{result.rate:.0f}",
        breakdown,
        result.verdict,
    )
    console.print(table)
    console.print(f"throughput run: {result.run_dir}", style="dim")
    overhead = added["agent + history"] * 1000
    return [
        f"throughput {result.rate:.0f} ops/s (target >= {_TARGET_OPS_PER_S:.0f}): "
        + _mark(result.rate >= _TARGET_OPS_PER_S),
        f"harness overhead at p99 {overhead:.2f} ms, agent + history vs direct "
        f"(target <= {_TARGET_ADDED_P99_MS:g} ms): " + _mark(overhead <= _TARGET_ADDED_P99_MS),
    ]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


# -- part b: detection power ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    """One detection run: its verdict, whether the planted bug was caught, and when."""

    case: _Case
    seed: int
    verdict: str
    anomalies: tuple[str, ...]
    detected: bool
    first: float | None  # seconds from the run's start to the first violating operation
    run_dir: Path
    problem: str | None


def _first_violation(results: dict[str, Any], case: _Case) -> float | None:
    """Seconds to the earliest instance of the expected anomalies: an instance happens when its
    last write or grant completes (the reads in its evidence only show it later). Among the
    evidence ``results.json`` keeps (capped at ``max_evidence`` per name)."""
    moments: list[int] = []
    for name in case.anomalies:
        for item in results["anomalies"].get(name, []):
            times = [
                op["time"] if op["time"] is not None else op["invoke_time"]
                for op in item["ops"]
                if op["f"] != "read"
            ]
            times = [t for t in times if t is not None]
            if times:
                moments.append(max(times))
    return min(moments) / 1e9 if moments else None


def _detect(case: _Case, seed: int, duration: float, store: Path) -> _Outcome:
    name = f"bench-{case.name.replace(' ', '-').replace('+', '-')}"
    spec = replace(case.spec, time_limit=duration, seed=seed, store=store, name=name)
    outcome = _ended(run_test(spec, console=_quiet(), progress=False))
    stored = outcome.run_dir.read_results()
    results = dict(stored.data) if stored is not None else {}
    problem = results.get("run_error") or ("interrupted" if outcome.interrupted else None)
    failed = [f["kind"] for f in results.get("faults", []) if f.get("applied") is False]
    if failed:
        problem = f"faults not applied: {', '.join(failed)}"
    reported = set(results.get("anomaly_types", []))
    detected = results.get("valid") is False and set(case.anomalies) <= reported
    return _Outcome(
        case,
        seed,
        _verdict_text(results.get("valid", "unchecked")),
        tuple(results.get("anomaly_types", [])),
        detected,
        _first_violation(results, case) if detected else None,
        outcome.run_dir.path,
        problem,
    )


def _part_detection(args: argparse.Namespace, store: Path, console: Console) -> list[str]:
    console.rule(f"detection power: {args.runs} run(s) of {args.duration:g} s per case")
    bug_cases, correct_cases = _cases(args.matrix, args.every_fault)
    known = [case.name for case in bug_cases]
    unknown = [name for name in args.bugs or () if name not in known]
    if unknown:
        raise SystemExit(
            f"unknown bug switch(es) {', '.join(unknown)} in {args.matrix}; "
            f"choose from {', '.join(known)}"
        )
    cases = [c for c in bug_cases if args.bugs is None or c.name in args.bugs]
    if args.correct:
        cases += correct_cases
    outcomes: dict[str, list[_Outcome]] = {}
    for case in cases:
        for n in range(args.runs):
            done = _detect(case, args.seed + n, args.duration, store)
            outcomes.setdefault(case.name, []).append(done)
            first = f"{done.first:.1f} s" if done.first is not None else "-"
            console.print(
                f"  {case.name} seed {done.seed}: {done.verdict} "
                f"({', '.join(done.anomalies) or 'no anomalies'}), first violation {first}"
                + (f", {done.problem}" if done.problem else "")
                + f"  {done.run_dir}",
                style="dim",
            )

    table = Table("case", "runs", "detected", "median first violation", "verdicts", "missed runs")
    lines: list[str] = []
    worst_share: tuple[float, str] | None = None
    worst_first: tuple[float, str] | None = None
    false_alarms = 0
    for case in cases:
        runs = outcomes[case.name]
        verdicts = ", ".join(
            f"{v} {n}" for v, n in sorted(Counter(o.verdict for o in runs).items())
        )
        if not case.spec.bugs:
            alarms = sum(o.verdict == "invalid" for o in runs)
            false_alarms += alarms
            table.add_row(case.name, str(len(runs)), f"false alarms {alarms}", "", verdicts, "")
            continue
        share = sum(o.detected for o in runs) / len(runs)
        firsts = [o.first for o in runs if o.first is not None]
        median = statistics.median(firsts) if firsts else None
        missed = ", ".join(str(o.seed) for o in runs if not o.detected)
        table.add_row(
            case.name,
            str(len(runs)),
            f"{share:.0%}",
            f"{median:.1f} s" if median is not None else "-",
            verdicts,
            missed and f"seeds {missed}",
        )
        if worst_share is None or share < worst_share[0]:
            worst_share = (share, case.name)
        late = median if median is not None else float("inf")
        if worst_first is None or late > worst_first[0]:
            worst_first = (late, case.name)
    console.print(table)
    console.print(f"run directories under {store}", style="dim")
    if worst_share is not None and worst_first is not None:
        every = [o for c in cases if c.spec.bugs for o in outcomes[c.name]]
        overall = sum(o.detected for o in every) / len(every)
        lines.append(
            f"detected {overall:.0%} of bug runs; worst {worst_share[1]} {worst_share[0]:.0%} "
            f"(target >= {_TARGET_DETECTED:.0%} for each bug): "
            + _mark(worst_share[0] >= _TARGET_DETECTED)
        )
        lines.append(
            f"median time to first violation, worst {worst_first[1]} {worst_first[0]:.1f} s "
            f"(target <= {_TARGET_FIRST_S:g} s for each bug): "
            + _mark(worst_first[0] <= _TARGET_FIRST_S)
        )
    if args.correct:
        lines.append(f"false alarms {false_alarms} (target 0): " + _mark(false_alarms == 0))
    return lines


# -- command line ---------------------------------------------------------------------------------


def _bug_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _ended(outcome: RunOutcome) -> RunOutcome:
    """``outcome``, unless a stop signal cut the run short: then the bench stops too (a run
    absorbs Ctrl-C or SIGTERM to heal and check, which must not just move on to the next run)."""
    if outcome.interrupted:
        raise SystemExit(
            f"interrupted; the runs so far are under {outcome.run_dir.path.parent.parent}"
        )
    return outcome


def main() -> None:
    """Parse the command line, run the chosen parts, print tables and one line per target."""
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--part", choices=("all", "overhead", "detection"), default="all")
    parser.add_argument("--runs", type=int, default=5, help="seeded runs per detection case")
    parser.add_argument("--duration", type=_positive, default=60.0, help="seconds per run")
    parser.add_argument(
        "--matrix", type=Path, default=_MATRIX, help="the matrix whose cases to measure"
    )
    parser.add_argument(
        "--bugs", type=_bug_list, help="comma-separated bug switches to measure (default: all)"
    )
    parser.add_argument(
        "--every-fault",
        action="store_true",
        help="measure the correct system under every bug-free row, not only the pause rows",
    )
    parser.add_argument(
        "--correct",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the correct system and count false alarms",
    )
    parser.add_argument("--seed", type=int, default=1, help="run n uses seed + n")
    parser.add_argument("--writes", type=int, default=3000, help="timed writes per latency path")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds of those writes")
    parser.add_argument(
        "--throughput-seconds", type=_positive, default=30.0, help="length of the throughput run"
    )
    parser.add_argument("--store", type=Path, help="store folder (default: a new temporary one)")
    args = parser.parse_args()
    if args.runs < 1 or args.writes < 1 or args.rounds < 1:
        parser.error("--runs, --writes and --rounds must be at least 1")
    store = args.store or Path(tempfile.mkdtemp(prefix="fencecheck-bench-"))
    store.mkdir(parents=True, exist_ok=True)
    # Wide enough for the tables when the output goes to a file (rich assumes 80 columns then).
    console = Console(width=None if sys.stdout.isatty() else 130)
    lines: list[str] = []
    if args.part in ("all", "overhead"):
        lines += _part_overhead(args, store, console)
    if args.part in ("all", "detection"):
        lines += _part_detection(args, store, console)
    console.rule("targets")
    for line in lines:
        console.print(line)


if __name__ == "__main__":
    main()
