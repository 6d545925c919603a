"""The planner passes the fault kinds' registry facts down to the systems' checks.

``systems`` keeps no table of kind names: which kinds need the lazy file system, the requests'
framing or a clock under libfaketime is each kind's registry entry (``needs_disk``,
``needs_framing``, ``moves_clock``), and ``harness.run.plan`` hands the run's kinds with that fact
to ``disk_problem``, ``replay_problem`` and ``clock_problem``.
"""

from __future__ import annotations

from harness.record.spec import TestSpec
from harness.run.plan import spec_problem
from nemeses import KINDS


def _problem(system: str, *kinds: str, targets: tuple[str, ...] = ("holder",)) -> str | None:
    return spec_problem(TestSpec(system=system, nemeses=kinds, targets=targets))


def test_each_fact_is_stated_by_the_entries_of_the_kinds_it_belongs_to() -> None:
    def having(fact: str) -> set[str]:
        return {name for name, kind in KINDS.items() if getattr(kind, fact)}

    assert having("needs_disk") == {"power-loss", "disk-full", "fsync-error", "slow-disk"}
    assert having("needs_framing") == {"replay"}
    assert having("moves_clock") == {"clock-step", "clock-rate"}


def test_a_kind_needing_framing_is_refused_on_a_system_that_does_not_frame_requests() -> None:
    refusal = _problem("noop", "pause", "replay")
    assert refusal is not None
    assert "FramesRequests" in refusal and "the replay fault cannot send one again" in refusal
    assert _problem("reference", "replay") is None
    assert _problem("noop", "hold") is None  # a proxy kind that replays nothing


def test_a_kind_needing_the_lazy_file_system_is_refused_where_data_has_no_known_place() -> None:
    for kind in ("power-loss", "slow-disk"):
        refusal = _problem("noop", "pause", kind)
        assert refusal is not None
        assert "TakesDiskFaults" in refusal and kind in refusal and "pause" not in refusal
        assert _problem("reference", kind) is None


def test_a_clock_kind_is_refused_only_at_a_daemon_that_cannot_take_it() -> None:
    refusal = _problem("etcd", "clock-step", targets=("lock-leader",))
    assert refusal is not None and "lock-leader" in refusal
    assert _problem("etcd", "pause", targets=("lock-leader",)) is None
