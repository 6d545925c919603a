"""Several nemeses acting as one, each operation routed to the nemesis that performs it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.node import Node
from nemeses.protocol import Fault, HealReport, Nemesis, NemesisError

__all__ = ["CompositeNemesis"]


class CompositeNemesis:
    """Combines nemeses by fault kind; no two may perform the same operation."""

    def __init__(self, *nemeses: Nemesis) -> None:
        """Combine ``nemeses`` (raises :class:`NemesisError` if two handle the same operation)."""
        self._nemeses = nemeses
        self._by_f: dict[str, Nemesis] = {}
        for nemesis in nemeses:
            for f in nemesis.fs:
                if f in self._by_f:
                    raise NemesisError(
                        f"two nemeses handle {f!r}: {type(self._by_f[f]).__name__} and "
                        f"{type(nemesis).__name__}; combine each fault kind once"
                    )
                self._by_f[f] = nemesis

    @property
    def fs(self) -> frozenset[str]:
        """Every operation of every member."""
        return frozenset(self._by_f)

    def setup(self, nodes: Mapping[str, Node]) -> None:
        """Set up every member, in order."""
        for nemesis in self._nemeses:
            nemesis.setup(nodes)

    def invoke(self, f: str, fault: Fault) -> dict[str, Any]:
        """Route ``f`` to the member that performs it."""
        nemesis = self._by_f.get(f)
        if nemesis is None:
            raise NemesisError(
                f"no nemesis here performs {f!r}; available: {', '.join(sorted(self._by_f))}"
            )
        return nemesis.invoke(f, fault)

    def heal(self) -> HealReport:
        """Heal every member in the order given, even when one fails; returns everything healed
        and every error. Put freeze first: the others may need to run commands on the nodes."""
        report = HealReport()
        for nemesis in self._nemeses:
            try:
                report.merge(nemesis.heal())
            except Exception as problem:  # one member's crash must not stop the others
                report.errors.append(f"{type(nemesis).__name__}: {problem}")
        return report

    def teardown(self) -> None:
        """Tear every member down (each heals first); raises :class:`NemesisError` listing every
        member that could not heal, after trying them all."""
        report = HealReport()
        for nemesis in self._nemeses:
            try:
                nemesis.teardown()
            except Exception as problem:  # keep tearing the others down
                report.errors.append(f"{type(nemesis).__name__}: {problem}")
        if not report.ok:
            raise NemesisError("healing failed: " + "; ".join(report.errors))
