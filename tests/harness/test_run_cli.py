"""``fencecheck run`` refuses bad input before anything starts; specs round-trip through JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli, main
from harness.record.spec import TestSpec, spec_from_dict
from tests.support.spec_of import spec_of


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--bug", "nope"], "unknown bug switch(es) nope"),
        (["--nemesis", "bogus"], "unknown fault kind(s) bogus"),
        (["--target", "x9"], "unknown target 'x9'"),
        (["--workload", "sinks", "--bug", "short-lock-delay", "--lock-delay", "0"], "--lock-delay"),
        (["--fault-lengths", "3,x"], "give TTL multiples"),
        (["--system", "etcd-someday"], "etcd-someday"),
        (["--keys-per-write", "4", "--keys", "2"], "--keys-per-write 4 is more than --keys 2"),
        (["--writes-per-lease", "0"], "--writes-per-lease must be"),
        (
            ["--system", "etcd", "--ttl", "2", "--keys", "8", "--keys-per-write", "2"],
            "cannot write several keys of its sink",
        ),
    ],
)
def test_bad_input_exits_3_with_the_fix_and_starts_nothing(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with pytest.raises(SystemExit) as done:
        main(["run", "--store", str(store), "--no-progress", *args])
    assert done.value.code == EXIT_ERROR
    err = capsys.readouterr().err
    assert says in err.strip().splitlines()[-1], err  # the problem and its fix on one line
    assert not store.exists()


def test_list_shows_every_bug_switch_and_fault_kind() -> None:
    shown = CliRunner().invoke(cli, ["list"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    for name in ("no-store-check", "store-forgets", "short-lock-delay", "restart-while-paused"):
        assert name in shown.output


def test_a_spec_round_trips_through_json() -> None:
    spec = TestSpec(bugs=("no-store-check",), nemeses=("pause", "kill"), fault_lengths=(3.0,))
    again = spec_from_dict(spec.to_json())
    assert again == spec
    assert again.test_name == "reference-append-pause+kill-no-store-check"


def test_a_spec_with_an_unknown_field_names_it() -> None:
    with pytest.raises(ValueError, match="unknown spec field"):
        spec_from_dict({"sytem": "reference"})


def test_every_time_option_takes_the_same_durations(monkeypatch: pytest.MonkeyPatch) -> None:
    """One parser: ``run --ttl 1s`` as ``check --ttl 1s``; 1500ms, 2m and plain seconds alike."""
    argv = ["run", "--ttl", "1500ms", "--time-limit", "2m", "--lock-delay", "0.5s", "--seed", "1"]
    spec = spec_of(argv, monkeypatch)
    assert (spec.ttl, spec.time_limit, spec.lock_delay) == (1.5, 120.0, 0.5)
