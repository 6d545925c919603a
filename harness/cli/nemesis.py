"""``fencecheck nemesis``: apply a fault by hand to a running cluster, Blockade-style.

Each command attaches to a cluster (``--run RUN_ID``; by default the newest cluster this user kept
with ``cluster up`` or ``run --keep-cluster`` and that no run drives), applies one fault and
confirms it. With ``--for DURATION`` it waits, undoes the fault and heals (also on Ctrl-C or
SIGTERM); without, the fault stays in force until ``fencecheck nemesis heal``. This process did not
start the nodes' daemons, so pause and kill find them on the node (by daemon name, or a command-line
pattern). What a later heal cannot find out by looking (which nodes are frozen, how to restart a
killed daemon) is kept in a small ledger per run under ``$XDG_STATE_HOME/fencecheck/nemesis/``.
A partition replaces the partition in force, as in Blockade.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import click

from harness.cli import cli
from harness.node import Node, NodeError
from harness.node.docker.cluster import Cluster
from harness.node.docker.engine import EngineError
from harness.node.interrupts import sigterm_interrupts
from nemeses.freeze import FreezeNemesis
from nemeses.kill import KillNemesis
from nemeses.partition import PartitionNemesis
from nemeses.pause import PauseNemesis
from nemeses.processes import ProcessImage, running_daemons
from nemeses.protocol import Fault, Nemesis, NemesisError, start_f, stop_f
from nemeses.recovery import heal_nodes
from nemeses.throttle import DEFAULT_CPU, ThrottleNemesis
from nemeses.topology import partition_fault

__all__ = ["nemesis_group"]

_NEMESES: Final[dict[str, Callable[[], Nemesis]]] = {
    "pause": lambda: PauseNemesis(running_daemons),
    "kill": lambda: KillNemesis(running_daemons),
    "freeze": FreezeNemesis,
    "throttle": ThrottleNemesis,
    "partition": PartitionNemesis,
}
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")


class _Duration(click.ParamType[float]):
    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        match = _DURATION.fullmatch(str(value).strip())
        if match is None or float(match.group(1)) <= 0:
            self.fail(f"{value!r} is not a duration; write e.g. 500ms, 5s, 2m or 1.5", param, ctx)
        return float(match.group(1)) * _UNITS[match.group(2) or "s"]


_run_option = click.option(
    "--run",
    "run_id",
    default=None,
    help="Run id of the cluster (default: your newest kept cluster no run is driving).",
)
_for_option = click.option(
    "--for",
    "hold",
    type=_Duration(),
    default=None,
    help="Undo the fault after this long (500ms, 5s, 2m); without it, it stays until `heal`.",
)
_process_option = click.option(
    "--process",
    default=None,
    help="Daemon name, or a command-line pattern as for pgrep -f (default: every daemon).",
)


@cli.group("nemesis")
def nemesis_group() -> None:
    """Apply faults by hand to a running cluster (`fencecheck cluster up` starts one)."""


@nemesis_group.command("pause")
@click.argument("nodes", nargs=-1, required=True)
@_process_option
@_for_option
@_run_option
def pause(
    nodes: tuple[str, ...], process: str | None, hold: float | None, run_id: str | None
) -> None:
    """SIGSTOP the daemons on NODES (names, or comma-separated); SIGCONT them after --for."""
    params = {} if process is None else {"process": process}
    _apply(run_id, lambda known: Fault("pause", _names(nodes, known), params), hold)


@nemesis_group.command("freeze")
@click.argument("nodes", nargs=-1, required=True)
@_for_option
@_run_option
def freeze(nodes: tuple[str, ...], hold: float | None, run_id: str | None) -> None:
    """Freeze every process of NODES with the cgroup freezer; thaw them after --for."""
    _apply(run_id, lambda known: Fault("freeze", _names(nodes, known)), hold)


@nemesis_group.command("throttle")
@click.argument("nodes", nargs=-1, required=True)
@click.option(
    "--cpu",
    type=click.FloatRange(min=0.001, max=64.0),
    default=DEFAULT_CPU,
    show_default=True,
    help="Share of one CPU left to each node.",
)
@_for_option
@_run_option
def throttle(nodes: tuple[str, ...], cpu: float, hold: float | None, run_id: str | None) -> None:
    """Cap NODES to a small share of a CPU (CFS quota); remove the cap after --for."""
    _apply(run_id, lambda known: Fault("throttle", _names(nodes, known), {"cpu": cpu}), hold)


@nemesis_group.command("kill")
@click.argument("nodes", nargs=-1, required=True)
@_process_option
@_for_option
@_run_option
def kill(
    nodes: tuple[str, ...], process: str | None, hold: float | None, run_id: str | None
) -> None:
    """SIGKILL the daemons on NODES; start them again as they were after --for (or at heal)."""
    params = {} if process is None else {"process": process}
    _apply(run_id, lambda known: Fault("kill", _names(nodes, known), params), hold)


@nemesis_group.command("partition")
@click.option("--isolate", default=None, help="Cut these nodes off (from --from, default all).")
@click.option("--halves", default=None, help="These nodes against all the others.")
@click.option("--bridge", default=None, help="This node reaches both halves: --side and the rest.")
@click.option("--one-way", "one_way", default=None, help="Drop packets from these nodes to --to.")
@click.option("--lock-cut", default=None, help="Cut these from the lock nodes (or --from) only.")
@click.option("--from", "peers", default=None, help="Peers for --isolate and --lock-cut.")
@click.option("--to", "to", default=None, help="Destinations for --one-way.")
@click.option("--side", default=None, help="One half for --bridge.")
@_for_option
@_run_option
def partition(
    isolate: str | None,
    halves: str | None,
    bridge: str | None,
    one_way: str | None,
    lock_cut: str | None,
    peers: str | None,
    to: str | None,
    side: str | None,
    hold: float | None,
    run_id: str | None,
) -> None:
    """Drop packets between nodes with iptables (replacing the partition in force).

    \b
    fencecheck nemesis partition --isolate w2 --from l1 --for 5s
    fencecheck nemesis partition --halves l1,w1
    fencecheck nemesis partition --one-way w1 --to s1
    fencecheck nemesis partition --lock-cut w2
    fencecheck nemesis partition --bridge w2 --side l1,w1
    """
    chosen = {
        topology: value
        for topology, value in (
            ("isolate", isolate),
            ("halves", halves),
            ("bridge", bridge),
            ("one-way", one_way),
            ("lock-cut", lock_cut),
        )
        if value
    }
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --isolate, --halves, --bridge, --one-way, --lock-cut"
        )
    ((topology, targets),) = chosen.items()
    companions = {"--from": peers, "--to": to, "--side": side}
    allowed = {"isolate": "--from", "lock-cut": "--from", "one-way": "--to", "bridge": "--side"}
    for flag, value in companions.items():
        if value and allowed.get(topology) != flag:
            raise click.UsageError(f"{flag} does not apply to --{topology}")
    extra = companions.get(allowed.get(topology, ""))
    if topology == "one-way" and not to:
        raise click.UsageError("--one-way needs --to: the nodes that stop hearing from them")
    if topology == "bridge" and not side:
        raise click.UsageError("--bridge needs --side: the nodes of one half")

    def build(known: Mapping[str, Node]) -> Fault:
        given = list(_names((extra,), known)) if extra else None
        if topology == "lock-cut" and given is None:
            given = [name for name, node in known.items() if node.role == "lock"]
            if not given:
                raise NemesisError("this cluster has no lock node; name the peers with --from")
        return partition_fault(topology, _names((targets,), known), list(known), given)

    _apply(run_id, build, hold)


@nemesis_group.command("heal")
@_run_option
def heal(run_id: str | None) -> None:
    """Undo every fault on the cluster: thaw, uncap, remove our rules, continue, restart."""
    # A node whose main process was killed (`kill --process sleep`) stopped: heal starts it.
    cluster = _attach(run_id, start_stopped=True)
    for name in cluster.restarted:
        click.echo(f"started node {name} again (its container had stopped)")
    ledger = _Ledger(cluster.run_id)
    frozen, killed = ledger.load()
    report = heal_nodes(dict(cluster.nodes), frozen=frozen, killed=killed)
    for line in report.healed:
        click.echo(f"healed {line}")
    if not report.ok:
        raise click.ClickException("could not heal everything:\n  " + "\n  ".join(report.errors))
    ledger.clear()
    click.echo(f"cluster {cluster.run_id} is healed")


# -- applying one fault ------------------------------------------------------------------------


def _apply(
    run_id: str | None, build: Callable[[Mapping[str, Node]], Fault], hold: float | None
) -> None:
    cluster = _attach(run_id)
    nodes: dict[str, Node] = dict(cluster.nodes)
    try:
        fault = build(nodes)
        nemesis = _NEMESES[fault.kind]()
        nemesis.setup(nodes)
    except NemesisError as problem:
        raise click.ClickException(str(problem)) from problem
    # SIGTERM unwinds like Ctrl-C, so a fault held ``--for`` is healed.
    with sigterm_interrupts():
        try:
            _step(nemesis, start_f(fault.kind), fault)
        except BaseException:
            # Whatever part of the fault did apply must not outlive this command unrecorded.
            nemesis.heal()
            raise
        if hold is None:
            killed = nemesis.killed() if isinstance(nemesis, KillNemesis) else {}
            _Ledger(cluster.run_id).remember(fault, killed)
            click.echo(
                f"{fault.kind} stays in force; undo it with "
                f"`fencecheck nemesis heal --run {cluster.run_id}`"
            )
            return
        try:
            time.sleep(hold)
            _step(nemesis, stop_f(fault.kind), fault)
        finally:
            report = nemesis.heal()
            if not report.ok:
                raise click.ClickException(
                    "could not heal; run `fencecheck nemesis heal`: " + "; ".join(report.errors)
                )


def _step(nemesis: Nemesis, f: str, fault: Fault) -> None:
    began = time.perf_counter()
    try:
        facts = nemesis.invoke(f, fault)
    except NemesisError as problem:
        raise click.ClickException(f"{f} {fault.describe()}: {problem}") from problem
    took = (time.perf_counter() - began) * 1000
    suffix = f" {json.dumps(facts)}" if facts else ""
    click.echo(f"{f} {fault.describe()}: confirmed in {took:.1f} ms{suffix}")


# -- the cluster -------------------------------------------------------------------------------


def _attach(run_id: str | None, *, start_stopped: bool = False) -> Cluster:
    try:
        return Cluster.attach(run_id, start_stopped=start_stopped)
    except (NodeError, EngineError) as problem:
        raise click.ClickException(str(problem)) from problem


def _names(given: Sequence[str | None], known: Mapping[str, Node]) -> tuple[str, ...]:
    """Node names from arguments that may be comma-separated; unknown names are an error."""
    names = [name.strip() for arg in given if arg for name in arg.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise NemesisError(
            f"no node {', '.join(unknown)} in this cluster; its nodes: {', '.join(known)}"
        )
    return tuple(dict.fromkeys(names))


# -- the ledger of what a later heal must know --------------------------------------------------


class _Ledger:
    """Per run: the nodes left frozen and the daemons left killed by commands without --for."""

    def __init__(self, run_id: str) -> None:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        self.path = Path(base) / "fencecheck" / "nemesis" / f"{run_id}.json"

    def load(self) -> tuple[list[str], dict[str, list[ProcessImage]]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return [], {}
        except (OSError, ValueError) as problem:
            raise click.ClickException(
                f"cannot read the nemesis ledger {self.path}: {problem}; remove it if it is "
                "damaged (then thaw frozen nodes with `docker unpause`)"
            ) from problem
        killed = {
            node: [ProcessImage.from_json(image) for image in images]
            for node, images in data.get("killed", {}).items()
        }
        return list(data.get("frozen", [])), killed

    def remember(self, fault: Fault, newly_killed: Mapping[str, list[ProcessImage]]) -> None:
        frozen, killed = self.load()
        if fault.kind == "freeze":
            frozen = sorted({*frozen, *fault.targets})
        for node, images in newly_killed.items():
            killed.setdefault(node, []).extend(images)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "frozen": frozen,
            "killed": {node: [i.to_json() for i in images] for node, images in killed.items()},
        }
        self.path.write_text(json.dumps(data, indent=1))

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
