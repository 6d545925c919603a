"""What the spec's schema (:mod:`harness.record.spec`) leaves to the layers that know the fault
kinds: the kinds' summaries in the ``--nemesis`` help, and the check that the spec's default
kinds are registered ones. The record layer imports nothing of ours, so the registry's part of a
spec field is joined to it here."""

from __future__ import annotations

from harness.record.spec import DEFAULT_NEMESES, SpecField
from nemeses.registry import KINDS

__all__ = ["default_kinds_problem", "option_help"]


def option_help(spec_field: SpecField) -> str:
    """The ``fencecheck run`` help of ``spec_field``: its own help, and for ``--nemesis`` each
    registered kind with its summary (from the registry, so a new kind shows up by itself)."""
    if spec_field.name != "nemeses":
        return spec_field.help
    kinds = "; ".join(f"{name}: {kind.summary}" for name, kind in KINDS.items())
    return f"{spec_field.help} {kinds}"


def default_kinds_problem() -> str | None:
    """Why :data:`harness.record.spec.DEFAULT_NEMESES` is not a list of registered kinds (a kind
    renamed in the registry but not in the spec's default), or ``None`` when every one is."""
    unknown = [name for name in DEFAULT_NEMESES if name not in KINDS]
    if not unknown:
        return None
    return (
        f"the spec's default fault kinds name {', '.join(unknown)}, which the registry lacks; "
        "rename them in harness/record/spec.py DEFAULT_NEMESES"
    )
