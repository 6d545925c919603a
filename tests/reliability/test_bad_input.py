"""Every bad input ends with exit 3 and one line naming the problem and the fix, before anything
starts: never a traceback, never exit 1 (which CI reads as "invalid history")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR, main
from harness.record.spec import LIMITS, SpecError, TestSpec
from harness.run.matrix import MatrixError, entries_from

# (arguments of `fencecheck run`, a phrase the message must contain)
_BAD_NUMBERS = [
    (["--ttl", "-1"], "--ttl must be"),
    (["--ttl", "0"], "--ttl must be"),
    (["--ttl", "nan"], "--ttl must be"),
    (["--ttl", "inf"], "--ttl must be"),
    (["--lock-delay", "-5"], "--lock-delay must be"),
    (["--lock-delay", "nan"], "--lock-delay must be"),
    (["--time-limit", "inf"], "--time-limit must be"),
    (["--time-limit", "nan"], "--time-limit must be"),
    (["--time-limit", "0"], "--time-limit must be"),
    (["--time-limit", "1e12"], "--time-limit must be"),
    (["--fault-lengths", "inf"], "--fault-lengths must be"),
    (["--fault-lengths", "nan"], "--fault-lengths must be"),
    (["--fault-lengths", "3,-1"], "--fault-lengths must be"),
    (["--rate", "-1"], "--rate must be"),
    (["--rate", "nan"], "--rate must be"),
    (["--work-ms", "1e23"], "--work-ms"),
    (["--work-ms", "100000000000000000000000"], "--work-ms must be"),
    (["--keys", "1000000"], "--keys must be"),
    (["--ttl", "1e9", "--time-limit", "5"], "--ttl must be"),
    (["--ttl", "10", "--time-limit", "5"], "longer than --time-limit"),
    (["--ttl", "0.05", "--time-limit", "86400"], "TTLs of"),
    (["--workers", "99"], "--workers"),
]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(args)
    out = capsys.readouterr()
    code = done.value.code
    assert isinstance(code, int)
    return code, out.out + out.err


def _assert_one_clean_error(code: int, output: str, says: str) -> None:
    assert code == EXIT_ERROR, output
    assert "Traceback" not in output
    assert says in output, output


@pytest.mark.parametrize(("args", "says"), _BAD_NUMBERS, ids=[" ".join(a) for a, _ in _BAD_NUMBERS])
def test_a_bad_number_is_refused_naming_its_option(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    code, output = _run(["run", "--store", str(store), "--no-progress", *args], capsys)
    _assert_one_clean_error(code, output, says)
    assert not store.exists()


def _bad_paths(tmp_path: Path, read_only: Path) -> list[tuple[list[str], str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    a_folder = tmp_path / "a-folder"
    a_folder.mkdir()
    return [
        (["--store", "/proc/x"], "cannot store runs in /proc/x"),
        (["--store", str(read_only / "store")], "Read-only file system"),
        (["--store", str(a_file)], "cannot store runs in"),
        (["--store", str(tmp_path / ("n" * 300))], "File name too long"),
        (["--store", ""], "--store must name a folder"),
        (["--junit-xml", "/proc/nope/x.xml"], "cannot write --junit-xml /proc/nope/x.xml"),
        (["--junit-xml", str(a_folder)], "it is a folder"),
        (["--junit-xml", str(read_only / "x.xml")], "Read-only file system"),
    ]


def test_a_bad_path_is_refused_before_anything_starts(
    tmp_path: Path, tmpfs: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for args, says in _bad_paths(tmp_path, tmpfs("ro")):
        store = [] if "--store" in args else ["--store", str(tmp_path / "store")]
        # --ttl 0 would be refused too: only a path problem found first proves paths are checked
        # before numbers need to be right, i.e. before the run; a good spec shows the order.
        code, output = _run(["run", "--no-progress", "--time-limit", "5", *store, *args], capsys)
        _assert_one_clean_error(code, output, says)
    assert not list((tmp_path / "store").glob("*/*/history.jsonl"))


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "../escape", "a/b", "a\\b"])
def test_a_run_name_that_would_leave_the_store_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "deep" / "store"
    code, output = _run(["run", "--store", str(store), "--no-progress", "--name", name], capsys)
    _assert_one_clean_error(code, output, "cannot be a folder of the store")
    assert not (tmp_path / "deep").exists()  # neither the store nor its parent got a run


def test_a_matrix_that_is_not_utf8_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = tmp_path / "m.json"
    matrix.write_bytes(b'{"runs": [{"system": "r\xe9f\xff"}]}')
    code, output = _run(["run-all", "--matrix", str(matrix), "--store", str(tmp_path)], capsys)
    _assert_one_clean_error(code, output, "is not UTF-8 text")


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"workers": 99}, "--workers must be"),
        ({"ttl": -1}, "--ttl must be"),
        ({"work_ms": 10**23}, "--work-ms must be"),
        ({"time_limit": 0}, "--time-limit must be"),
        ({"store": ""}, "--store must name a folder"),
        ({"name": ".."}, "name '..' cannot be a folder of the store"),
        ({"name": "."}, "name '.' cannot be a folder of the store"),
        ({"name": ".git"}, "begins with a dot"),
        ({"name": "a/b"}, "a path separator"),
    ],
)
def test_a_matrix_row_passes_the_same_checks_as_the_command_line(
    row: dict[str, object], says: str
) -> None:
    with pytest.raises(MatrixError, match="m.json run 1: .*" + says):
        entries_from({"runs": [row]}, "m.json")


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_matrix_nested_100000_deep_is_refused_in_one_line(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = tmp_path / f"m{suffix}"
    deep = "[" * 100_000 + "]" * 100_000
    matrix.write_text(deep if suffix == ".json" else f"runs = {deep}\n")
    code, output = _run(["run-all", "--matrix", str(matrix), "--store", str(tmp_path)], capsys)
    _assert_one_clean_error(code, output, "nests too deep to read")
    assert "RecursionError" not in output
    assert len(output.strip().splitlines()) == 1


@pytest.mark.parametrize("defaults", [[], "", 0, None])
def test_defaults_that_are_no_object_are_refused_even_when_empty(defaults: object) -> None:
    with pytest.raises(MatrixError, match=r"m\.json: 'defaults' must be an object of spec fields"):
        entries_from({"defaults": defaults, "runs": [{}]}, "m.json")


def test_every_limit_is_documented_in_the_readme() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for limit in LIMITS.values():
        assert f"`{limit.option}`" in readme, limit.option


def test_the_default_spec_is_within_the_limits() -> None:
    TestSpec().check()
    with pytest.raises(SpecError, match="--time-limit must be a finite number above 0"):
        TestSpec(time_limit=0).check()


def test_an_unexpected_error_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("something nobody foresaw")

    monkeypatch.setattr("harness.cli.run.run_test", broken)
    monkeypatch.delenv("FENCECHECK_TRACEBACK", raising=False)
    code, output = _run(["run", "--store", str(tmp_path), "--no-progress"], capsys)
    _assert_one_clean_error(code, output, "RuntimeError: something nobody foresaw")
    assert len(output.strip().splitlines()) == 1
