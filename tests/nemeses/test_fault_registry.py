"""The fault-kind registry is the one place a kind is described: every derived table follows it."""

from __future__ import annotations

import random
import re

from click.testing import CliRunner

import harness.cli.nemesis
import harness.cli.run  # noqa: F401  # register the commands on the group
from harness.cli import cli
from nemeses import generate_schedule
from nemeses.kinds import Draw
from nemeses.protocol import fault_fs
from nemeses.registry import FAULT_KINDS, KINDS, healing_order, standard_nemesis

_NODES = {"l1": "lock", "s1": "store", "w1": "worker", "w2": "worker", "w3": "worker"}


def test_every_kind_says_what_it_is_and_how_it_looks() -> None:
    for name, kind in KINDS.items():
        assert kind.name == name
        assert kind.summary.strip(), f"{name} lacks a summary"
        assert kind.verb.strip(), f"{name} lacks a verb for sentences"
        assert re.fullmatch(r"#[0-9a-f]{6}", kind.colour), f"{name} lacks a report colour"
        assert set(kind.parts) <= set(KINDS), f"{name}'s parts are not kinds"
    colours = [kind.colour for kind in KINDS.values()]
    assert len(set(colours)) == len(colours), "two kinds share a colour in the report"


def test_every_kind_draws_targets_and_parameters_a_nemesis_accepts() -> None:
    for kind in KINDS.values():
        targets, params = kind.draw(
            Draw(random.Random(1), "w1", "worker", _NODES, {"worker": "agent"}, 0.02)
        )
        assert targets and set(targets) <= set(_NODES)
        assert isinstance(params, dict)


def test_healing_follows_the_ranks_and_covers_every_kind() -> None:
    order = [kind.name for kind in healing_order()]
    assert sorted(order) == sorted(FAULT_KINDS)
    # A frozen node runs no commands: it thaws before anything else is undone on it.
    assert order.index("freeze") < order.index("partition") < order.index("kill")
    # Start and stop of every kind but the compound, which is played as its parts.
    played = [name for name in FAULT_KINDS if KINDS[name].build is not None]
    assert played == [name for name in FAULT_KINDS if name != "restart-while-paused"]
    assert standard_nemesis().fs == fault_fs(*played)
    assert standard_nemesis(["restart-while-paused"]).fs == fault_fs("pause", "kill")


def test_schedules_draw_only_registered_kinds() -> None:
    schedule = generate_schedule(3, _NODES, lease_ttl_ns=1_000_000_000, duration_ns=600_000_000_000)
    # Every kind is drawn; a compound's windows are played as its parts, and say so.
    compounds = {w.params.get("compound") for w in schedule.windows} - {None}
    assert {window.kind for window in schedule.windows} | compounds == set(FAULT_KINDS)
    assert "restart-while-paused" not in {window.kind for window in schedule.windows}


def test_cli_help_and_list_and_manual_commands_come_from_the_registry() -> None:
    runner = CliRunner()
    main_help = runner.invoke(cli, ["run", "--help"], terminal_width=400)
    listing = runner.invoke(cli, ["list"], terminal_width=400)
    manual = runner.invoke(cli, ["nemesis", "--help"], terminal_width=400)
    for name, kind in KINDS.items():
        assert name in main_help.output
        assert name in listing.output
        if kind.manual is not None:
            assert re.search(rf"^\s+{re.escape(name)}\s", manual.output, re.M), name


def test_clock_rates_are_drawn_the_way_that_moves_a_lease_unsafely_for_the_role() -> None:
    rate = KINDS["clock-rate"]
    for role, target, allowed in (
        ("worker", "w1", {0.25, 0.5}),
        ("lock", "l1", {2.0, 4.0}),
        ("store", "s1", {0.25, 0.5, 2.0, 4.0}),
    ):
        drawn = {
            rate.draw(Draw(random.Random(seed), target, role, _NODES, {}, 0.02))[1]["rate"]
            for seed in range(40)
        }
        assert drawn == allowed, role
