"""iptables rules for partitions, rendered as ``iptables-restore --noflush`` input.

Our rules live in a chain of our own, ``FENCECHECK``, jumped to from the first position of INPUT and
OUTPUT: healing flushes and deletes only that chain and those jumps, never a rule that is not ours,
and since nothing (such as an ``ESTABLISHED`` accept) comes before our jump, an established
connection's packets are dropped too. One chain serves both directions: in INPUT a packet's
destination is the node itself, so only ``-s PEER`` rules can match; in OUTPUT only ``-d PEER``.

Each drop is enforced on one end only, chosen to touch as few nodes as possible (isolating a node
changes that node alone), and every node's rules are installed by one ``iptables-restore`` call: a
declared chain is flushed and refilled atomically, so changing a partition never opens a gap.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping
from typing import Final

from nemeses.topology import Drop

__all__ = [
    "CHAIN",
    "HOOKS",
    "chain_rules",
    "fill_script",
    "jumps_first",
    "place_drops",
    "removal_script",
]

CHAIN: Final = "FENCECHECK"
"""The name of our chain in the filter table."""

HOOKS: Final[tuple[str, ...]] = ("INPUT", "OUTPUT")
"""The built-in chains that jump to ours."""

_JUMP: Final = f"-j {CHAIN}"


def place_drops(drops: Iterable[Drop], prefer: Collection[str] = ()) -> dict[str, set[Drop]]:
    """Choose the node that enforces each drop: a small set of nodes covering every drop.

    Greedy vertex cover of the node pairs: repeatedly take the node in the most uncovered pairs
    (ties go to ``prefer``, the fault's targets, then to name order). Returns node -> its drops.
    """
    pending = set(drops)
    placed: dict[str, set[Drop]] = {}
    while pending:
        degree: dict[str, int] = {}
        for pair in {frozenset(drop) for drop in pending}:
            for name in pair:
                degree[name] = degree.get(name, 0) + 1
        best = min(degree, key=lambda name: (-degree[name], name not in prefer, name))
        mine = {drop for drop in pending if best in drop}
        placed[best] = mine
        pending -= mine
    return placed


def chain_rules(node: str, drops: Iterable[Drop], ips: Mapping[str, str]) -> list[str]:
    """The rules of ``node``'s chain enforcing ``drops`` (each must have ``node`` at one end)."""
    rules = set()
    for source, dest in drops:
        if source == node:
            rules.add(f"-A {CHAIN} -d {ips[dest]}/32 -j DROP")
        elif dest == node:
            rules.add(f"-A {CHAIN} -s {ips[source]}/32 -j DROP")
        else:
            raise ValueError(f"drop {source}->{dest} cannot be enforced on {node}")
    return sorted(rules)


def fill_script(rules: Iterable[str], *, install_jumps: bool) -> bytes:
    """Restore input that replaces our chain's rules with ``rules`` (creating the chain if
    missing) and, with ``install_jumps``, puts our jumps first in INPUT and OUTPUT."""
    lines = ["*filter", f":{CHAIN} - [0:0]"]
    if install_jumps:
        lines += [f"-I {hook} 1 {_JUMP}" for hook in HOOKS]
    lines += [*rules, "COMMIT", ""]
    return "\n".join(lines).encode()


def removal_script(listing: str) -> bytes | None:
    """Restore input that removes every jump to our chain and the chain itself, given the
    filter table as ``iptables -S`` prints it; ``None`` when nothing of ours is there."""
    lines = listing.splitlines()
    jumps = [
        "-D" + line[2:]
        for line in lines
        if line.startswith("-A ") and line.split()[1] != CHAIN and _jumps_to_us(line)
    ]
    has_chain = f"-N {CHAIN}" in lines
    if not jumps and not has_chain:
        return None
    # Declaring the chain creates or flushes it, so the delete that follows always succeeds.
    script = ["*filter", f":{CHAIN} - [0:0]", *jumps, f"-X {CHAIN}", "COMMIT", ""]
    return "\n".join(script).encode()


def jumps_first(listing: str) -> bool:
    """True when INPUT's and OUTPUT's first rules are our jumps (so nothing precedes our drops)."""
    firsts: dict[str, str] = {}
    for line in listing.splitlines():
        words = line.split()
        if len(words) > 1 and words[0] == "-A" and words[1] in HOOKS:
            firsts.setdefault(words[1], line)
    return all(firsts.get(hook) == f"-A {hook} {_JUMP}" for hook in HOOKS)


def _jumps_to_us(line: str) -> bool:
    words = line.split()
    return any(
        flag in ("-j", "-g") and target == CHAIN for flag, target in itertools.pairwise(words)
    )
