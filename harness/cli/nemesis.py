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
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from harness.cli import cli
from harness.cli.units import Duration
from harness.node import Node, NodeError
from harness.node.docker.cluster import Cluster
from harness.node.docker.engine import EngineError
from harness.node.interrupts import sigterm_interrupts
from nemeses.kill import KillNemesis
from nemeses.kinds import FaultKind, ManualCommand, ManualOption, node_names
from nemeses.processes import ProcessImage, lost_daemons, restart, running_daemons
from nemeses.protocol import Fault, Nemesis, NemesisError, start_f, stop_f
from nemeses.recovery import heal_nodes
from nemeses.registry import KINDS, fault_kind

__all__ = ["Duration", "nemesis_group"]


_RUN_OPTION = click.Option(
    ["--run-id", "--run", "run_id"],
    default=None,
    help="Run id of the cluster (default: your newest kept cluster no run is driving); "
    "--run is the old spelling.",
)
_FOR_OPTION = click.Option(
    ["--for", "hold"],
    type=Duration(positive=True),
    default=None,
    help="Undo the fault after this long (500ms, 5s, 2m); without it, it stays until `heal`.",
)


@cli.group("nemesis")
def nemesis_group() -> None:
    """Apply faults by hand to a running cluster (`fencecheck cluster up` starts one)."""


def _manual_command(kind: FaultKind, manual: ManualCommand) -> click.Command:
    """The ``fencecheck nemesis KIND`` command of one registry entry."""

    def command(
        nodes: tuple[str, ...] = (),
        hold: float | None = None,
        run_id: str | None = None,
        **values: Any,
    ) -> None:
        values = {name.replace("_", "-"): value for name, value in values.items()}

        def build(known: Mapping[str, Node]) -> Fault:
            roles = {name: node.role for name, node in known.items()}
            names = node_names(",".join(nodes), roles) if manual.takes_nodes else ()
            return manual.fault(names, values, roles)

        _apply(run_id, build, hold)

    params: list[click.Parameter] = []
    if manual.takes_nodes:
        params.append(click.Argument(["nodes"], nargs=-1, required=True))
    for option in manual.options:
        params.append(_option(option))
    params += [_FOR_OPTION, _RUN_OPTION]
    examples = "".join(f"\n{example}" for example in manual.examples)
    help_text = manual.help + (f"\n\n\b{examples}" if examples else "")
    return click.Command(kind.name, callback=command, params=params, help=help_text)


def _option(option: ManualOption) -> click.Option:
    flag = f"--{option.name}"
    dest = option.name.replace("-", "_")
    if option.kind == "flag":
        return click.Option([flag, dest], is_flag=True, help=option.help)
    if option.kind == "cpu":
        return click.Option(
            [flag, dest],
            type=click.FloatRange(min=0.001, max=64.0),
            default=option.default,
            show_default=True,
            help=option.help,
        )
    return click.Option([flag, dest], default=option.default, help=option.help)


for _kind in KINDS.values():
    if _kind.manual is not None:
        nemesis_group.add_command(_manual_command(_kind, _kind.manual))


@nemesis_group.command("heal", params=[_RUN_OPTION])
def heal(run_id: str | None) -> None:
    """Undo every fault on the cluster: thaw, uncap, remove our rules, continue, restart."""
    # A node whose main process was killed (`kill --process sleep`) stopped: heal starts it.
    cluster = _attach(run_id, start_stopped=True)
    ledger = _Ledger(cluster.run_id)
    frozen, killed = ledger.load()
    errors: list[str] = []
    for name in cluster.restarted:
        click.echo(f"started node {name} again (its container had stopped)")
        # The container's start brought its main process back; nothing else that ran in it
        # survived, and relaunching the killed main process as a daemon would only add a copy.
        killed.pop(name, None)
        try:
            gone = lost_daemons(cluster.nodes[name])
        except NemesisError as problem:
            errors.append(str(problem))
            continue
        if gone:
            errors.append(
                f"{name}: its container had stopped (its main process was killed), and "
                f"{', '.join(gone)} did not survive it; remove the cluster with `fencecheck "
                f"cluster down {cluster.run_id}` and start a new one (`fencecheck cluster up`)"
            )
    report = heal_nodes(dict(cluster.nodes), frozen=frozen, killed=killed)
    for line in report.healed:
        click.echo(f"healed {line}")
    if report.ok:
        ledger.clear()  # every fault undone; what a stopped container lost no retry brings back
    errors += report.errors
    if errors:
        raise click.ClickException("could not heal everything:\n  " + "\n  ".join(errors))
    click.echo(f"cluster {cluster.run_id} is healed")


# -- applying one fault ------------------------------------------------------------------------


def _apply(
    run_id: str | None, build: Callable[[Mapping[str, Node]], Fault], hold: float | None
) -> None:
    cluster = _attach(run_id)
    nodes: dict[str, Node] = dict(cluster.nodes)
    try:
        fault = build(nodes)
        make = fault_kind(fault.kind).build
        if make is None:  # a compound: only its parts have manual commands
            raise NemesisError(f"{fault.kind} is played as its parts; apply each of them")
        nemesis = make(running_daemons, restart)
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
                f"`fencecheck nemesis heal --run-id {cluster.run_id}`"
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
        manual = fault_kind(fault.kind).manual
        if manual is not None and manual.leaves_frozen:
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
