"""Rule rendering and the partition nemesis against fake nodes with a small iptables model."""

from __future__ import annotations

from itertools import permutations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemeses.partition import PartitionNemesis
from nemeses.protocol import Fault, NemesisError
from nemeses.rules import (
    CHAIN,
    chain_rules,
    fill_script,
    jumps_first,
    place_drops,
    removal_script,
)
from nemeses.topology import partition_fault
from tests.support.nemesis_fakes import FakeNode, fake_cluster

NAMES = ["l1", "s1", "w1", "w2", "w3"]


def blocked(nodes: dict[str, FakeNode], source: str, dest: str) -> bool:
    """Whether a packet from ``source`` to ``dest`` is dropped at either end."""
    a, b = nodes[source], nodes[dest]
    return a.dropped(a.ip, b.ip) or b.dropped(a.ip, b.ip)


@given(st.sets(st.sampled_from(list(permutations(NAMES, 2))), min_size=1))
def test_placement_covers_every_drop_once_at_one_of_its_ends(drops: set[tuple[str, str]]) -> None:
    placed = place_drops(drops)
    enforced = [drop for mine in placed.values() for drop in mine]
    assert sorted(enforced) == sorted(drops)
    assert all(node in drop for node, mine in placed.items() for drop in mine)


def test_isolating_one_node_touches_only_that_node() -> None:
    fault = partition_fault("isolate", ["w2"], NAMES)
    assert set(place_drops({tuple(d) for d in fault.params["drops"]}, ["w2"])) == {"w2"}
    one_way = partition_fault("one-way", ["w2"], NAMES, ["l1"])
    assert set(place_drops({tuple(d) for d in one_way.params["drops"]}, ["w2"])) == {"w2"}


def test_chain_rules_match_by_peer_address_in_the_right_direction() -> None:
    ips = {"w1": "10.0.0.1", "l1": "10.0.0.9"}
    assert chain_rules("w1", [("w1", "l1")], ips) == [f"-A {CHAIN} -d 10.0.0.9/32 -j DROP"]
    assert chain_rules("w1", [("l1", "w1")], ips) == [f"-A {CHAIN} -s 10.0.0.9/32 -j DROP"]
    with pytest.raises(ValueError, match="cannot be enforced"):
        chain_rules("s1", [("w1", "l1")], ips)


def test_fill_script_declares_our_chain_and_puts_jumps_first() -> None:
    script = fill_script(["-A FENCECHECK -s 10.0.0.9/32 -j DROP"], install_jumps=True).decode()
    assert script.splitlines() == [
        "*filter",
        ":FENCECHECK - [0:0]",
        "-I INPUT 1 -j FENCECHECK",
        "-I OUTPUT 1 -j FENCECHECK",
        "-A FENCECHECK -s 10.0.0.9/32 -j DROP",
        "COMMIT",
    ]
    assert "-I" not in fill_script([], install_jumps=False).decode()


def test_removal_touches_only_our_rules() -> None:
    listing = "\n".join(
        [
            "-P INPUT ACCEPT",
            "-N FENCECHECK",
            "-N OTHER",
            "-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT",
            "-A INPUT -j FENCECHECK",
            "-A OUTPUT -j FENCECHECK",
            "-A OUTPUT -j OTHER",
            "-A FENCECHECK -s 10.0.0.9/32 -j DROP",
        ]
    )
    script = removal_script(listing)
    assert script is not None
    assert script.decode().splitlines() == [
        "*filter",
        ":FENCECHECK - [0:0]",
        "-D INPUT -j FENCECHECK",
        "-D OUTPUT -j FENCECHECK",
        "-X FENCECHECK",
        "COMMIT",
    ]
    assert removal_script("-P INPUT ACCEPT\n-N OTHER\n-A INPUT -j OTHER\n") is None
    assert not jumps_first(listing), "an ESTABLISHED accept ahead of our jump must be caught"
    assert jumps_first("-A INPUT -j FENCECHECK\n-A OUTPUT -j FENCECHECK\n-A INPUT -j OTHER\n")


def test_partition_nemesis_drops_exactly_the_chosen_directions_and_heals() -> None:
    nodes = fake_cluster()
    nodes["w1"].chains["INPUT"].append("-j ACCEPT")  # someone else's rule, must survive
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    lock_cut = partition_fault("lock-cut", ["w2"], NAMES, ["l1"])
    before = {name: len(node.restores) for name, node in nodes.items()}
    facts = nemesis.invoke("start-partition", lock_cut)
    assert facts == {"rules_on": ["w2"]}
    after = {name: len(node.restores) for name, node in nodes.items()}
    assert {name for name in nodes if after[name] != before[name]} == {"w2"}
    assert after["w2"] == before["w2"] + 1, "one iptables-restore per node touched"
    assert blocked(nodes, "w2", "l1") and blocked(nodes, "l1", "w2")
    assert not blocked(nodes, "w2", "s1") and not blocked(nodes, "w1", "l1")

    one_way = partition_fault("one-way", ["w3"], NAMES, ["s1"])
    nemesis.invoke("start-partition", one_way)
    assert blocked(nodes, "w3", "s1") and not blocked(nodes, "s1", "w3")
    nemesis.invoke("stop-partition", lock_cut)
    assert not blocked(nodes, "w2", "l1")
    assert blocked(nodes, "w3", "s1"), "ending one partition leaves the other in force"

    report = nemesis.heal()
    assert report.ok, report.errors
    for node in nodes.values():
        assert removal_script(node.listing()) is None
    assert nodes["w1"].chains["INPUT"] == ["-j ACCEPT"]
    assert nemesis.heal().ok, "heal is idempotent"


def test_setup_cleans_what_a_crashed_run_left() -> None:
    nodes = fake_cluster()
    nodes["s1"].chains.update(FENCECHECK=["-s 10.9.0.4/32 -j DROP"])
    nodes["s1"].chains["INPUT"].insert(0, "-j FENCECHECK")
    nodes["s1"].chains["INPUT"].insert(0, "-j FENCECHECK")
    PartitionNemesis().setup(nodes)
    assert nodes["s1"].chains["FENCECHECK"] == []
    assert nodes["s1"].chains["INPUT"] == ["-j FENCECHECK"]


def test_a_failed_restore_is_an_error_and_heal_still_cleans_every_other_node() -> None:
    nodes = fake_cluster()
    nemesis = PartitionNemesis()
    nemesis.setup(nodes)
    nodes["w1"].fail_restore = True
    with pytest.raises(NemesisError, match="w1: iptables failed"):
        nemesis.invoke("start-partition", partition_fault("isolate", ["w1"], NAMES))
    with pytest.raises(NemesisError, match="no drops"):
        nemesis.invoke("start-partition", Fault("partition", ("w1",), {}))
    report = nemesis.heal()
    assert [error.split(":")[0] for error in report.errors] == ["w1"]
    assert removal_script(nodes["l1"].listing()) is None
