"""The one spec-field table: every field of ``TestSpec`` declared once, the ``run`` options, the
rerun argv and the exposures derived from it, and ``run --bug`` applying a whole exposure to every
field the command line leaves."""

from __future__ import annotations

from dataclasses import fields

import pytest

import harness.cli.run as run_cli
from harness.record.schedule import TOPOLOGIES
from harness.record.spec import SPEC_FIELDS, TestSpec
from harness.run.exposure import EXPOSABLE, EXPOSURE_NAMES, exposure_values
from harness.run.plan import rerun_command
from systems import Exposure
from tests.support.spec_of import spec_of


def test_every_spec_field_is_in_the_table_with_an_option_and_its_default() -> None:
    assert list(SPEC_FIELDS) == [f.name for f in fields(TestSpec)]
    defaults = TestSpec(seed=0)
    for name, spec_field in SPEC_FIELDS.items():
        assert spec_field.option.startswith("--"), name
        if name != "seed":
            assert spec_field.default == getattr(defaults, name), name
    options = [spec_field.option for spec_field in SPEC_FIELDS.values()]
    assert len(set(options)) == len(options)


def test_exposure_has_one_field_for_each_exposable_spec_field() -> None:
    named = {EXPOSURE_NAMES.get(name, name) for name in EXPOSABLE}
    assert named == {f.name for f in fields(Exposure)}
    assert {"keys", "locks", "writes_per_lease", "fault_lengths", "workload"} <= set(EXPOSABLE)


def test_an_exposure_sets_only_what_it_gives() -> None:
    how = Exposure(faults=("pause",), ttl_multiples=(3.0,), keys=1000)
    assert exposure_values(how) == {
        "nemeses": ("pause",),
        "targets": ("holder",),
        "fault_lengths": (3.0,),
        "keys": 1000,
    }


def test_run_bug_applies_the_whole_exposure_unless_an_option_overrides_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # short-lock-delay: pause, sinks workload, 3 TTL pauses, a lock-delay of 3 s.
    spec = spec_of(["run", "--bug", "short-lock-delay"], monkeypatch)
    assert (spec.nemeses, spec.workload, spec.fault_lengths, spec.lock_delay) == (
        ("pause",),
        "sinks",
        (3.0,),
        3.0,
    )
    mine = spec_of(["run", "--bug", "short-lock-delay", "--fault-lengths", "8"], monkeypatch)
    assert (mine.fault_lengths, mine.lock_delay, mine.workload) == ((8.0,), 3.0, "sinks")
    flaw = spec_of(["run", "--bug", "reacquire-no-reread"], monkeypatch)
    assert (flaw.keys, flaw.workload) == (3, "rmw")
    plain = spec_of(["run", "--seed", "4"], monkeypatch)
    assert plain == TestSpec(seed=4)


def test_the_rerun_of_an_exposed_run_pins_what_the_exposure_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = spec_of(["run", "--bug", "reacquire-no-reread", "--keys", "50"], monkeypatch)
    assert spec.keys == 50
    again = spec_of(rerun_command(spec), monkeypatch)
    assert again == spec


def test_a_run_that_attempted_no_stale_write_gets_a_one_line_warning() -> None:
    warning = run_cli.no_stale_write_warning({"stale_attempts": 0, "gaps": []})
    assert warning is not None and "no stale write" in warning and "\n" not in warning
    assert run_cli.no_stale_write_warning({"stale_attempts": 4}) is None
    assert run_cli.no_stale_write_warning({}) is None  # no coverage: nothing to say


def test_the_spec_schema_knows_no_fault_kind_and_its_defaults_are_registered() -> None:
    """The record layer's spec names its default kinds without the registry; the layer above
    checks them against it, and the ``--nemesis`` help lists every registered kind."""
    from harness.record.spec import DEFAULT_NEMESES
    from harness.run.spec import default_kinds_problem, option_help
    from nemeses.registry import KINDS

    assert default_kinds_problem() is None
    assert set(DEFAULT_NEMESES) <= set(KINDS)
    nemesis_help = option_help(SPEC_FIELDS["nemeses"])
    assert all(f"{name}: {kind.summary}" in nemesis_help for name, kind in KINDS.items())
    assert option_help(SPEC_FIELDS["keys"]) == SPEC_FIELDS["keys"].help


def test_an_exposure_that_needs_two_faults_at_once_sets_the_overlap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trust-own-timer: a slow clock on the holder with a partition of it inside every window.
    spec = spec_of(["run", "--bug", "trust-own-timer"], monkeypatch)
    assert (spec.nemeses, spec.overlap) == (("clock-rate", "partition"), 1.0)
    assert (
        spec_of(["run", "--bug", "trust-own-timer", "--overlap", "0.5"], monkeypatch).overlap == 0.5
    )
    assert "--overlap" not in Exposure(faults=("pause",)).describe()
    assert Exposure(faults=("pause", "kill"), overlap=1.0).describe().endswith("--overlap 1")


def test_an_exposure_narrows_the_partition_topologies_unless_they_are_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # trust-own-timer: a partition that also cut the sink would hold a careful holder's write.
    assert spec_of(["run", "--bug", "trust-own-timer"], monkeypatch).partitions == ("lock-cut",)
    given = ["run", "--bug", "trust-own-timer", "--partitions", "isolate,lock-cut"]
    assert spec_of(given, monkeypatch).partitions == ("isolate", "lock-cut")
    assert spec_of(["run"], monkeypatch).partitions == TOPOLOGIES
    assert "--partitions" not in Exposure(faults=("partition",)).describe()
    narrowed = Exposure(faults=("partition",), partitions=("lock-cut",))
    assert narrowed.describe().endswith("--partitions lock-cut")
