"""The run browser, JUnit output for CI, and the ``report`` / ``serve`` commands."""

from __future__ import annotations

import re
import threading
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR, EXIT_VALID, main
from harness.cli.report import LOOPBACK, make_server
from harness.report import write_report
from harness.report.index import write_index
from harness.report.junit import write_junit
from harness.run.store import RunDir

RunFactory = Callable[..., RunDir]


def test_the_index_lists_runs_newest_first_with_links(
    store_root: Path, make_run: RunFactory
) -> None:
    valid = make_run(stale=False)
    make_run(stale=True)
    unchecked = make_run(stale=False, checked=False)
    write_report(valid)
    text = write_index(store_root).read_text()
    verdicts = re.findall(r'<tr data-verdict="(\w+)"', text)
    assert verdicts == ["unchecked", "invalid", "valid"]
    for href in re.findall(r'href="([^"#:]+)"', text):
        assert (store_root / href).exists(), href
    assert f"{valid.path.relative_to(store_root).as_posix()}/report.html" in text
    assert "store-skips-check" in text and "stale-write" in text
    assert "expected: stale-write" in text
    assert f"{unchecked.path.relative_to(store_root).as_posix()}/history.jsonl" in text


def test_an_empty_store_gets_an_index(store_root: Path) -> None:
    text = write_index(store_root).read_text()
    assert "No runs yet" in text


def _cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert suite is not None
    return {case.get("name", ""): case for case in suite.iter("testcase")}


def test_junit_has_one_case_per_run(tmp_path: Path, make_run: RunFactory) -> None:
    runs = [
        make_run(stale=False),
        make_run(stale=True),
        make_run(stale=False, checked=False),
    ]
    path = write_junit(runs, tmp_path / "out" / "junit.xml")
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    valid, invalid, unchecked = _cases(path).values()  # in the order of the runs
    assert list(valid.iter("failure")) == [] and list(valid.iter("error")) == []
    failure = invalid.find("failure")
    assert failure is not None
    assert failure.get("message") == "invalid: stale-write"
    assert "was accepted by fenced store" in (failure.text or "")
    assert str(runs[1].report) in (failure.text or "")
    assert unchecked.find("error") is not None
    props = {p.get("name"): p.get("value") for p in invalid.iter("property")}
    assert props["run_dir"] == str(runs[1].path)


def test_junit_skips_unknown_runs_with_the_reasons(tmp_path: Path, make_run: RunFactory) -> None:
    run = make_run(stale=False)
    stored = run.read_results()
    assert stored is not None
    results = dict(stored.data)
    results.update(valid="unknown", unknown_reasons=["nemesis start-pause failed\x07 to apply"])
    run.write_json(run.results, results)
    path = write_junit([run], tmp_path / "junit.xml")
    (case,) = _cases(path).values()
    skipped = case.find("skipped")
    assert skipped is not None
    assert skipped.get("message", "").startswith("unknown: nemesis start-pause failed")


def test_junit_outcomes_can_be_overridden(tmp_path: Path, make_run: RunFactory) -> None:
    run = make_run(stale=True)
    path = write_junit([run], tmp_path / "junit.xml", outcomes=["pass"])
    (case,) = _cases(path).values()
    assert case.find("failure") is None
    with pytest.raises(ValueError, match="1 outcomes given for 2 runs"):
        write_junit([run, run], tmp_path / "x.xml", outcomes=["pass"])


def _main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(argv)
    code = done.value.code
    assert isinstance(code, int)
    return code


def test_report_command_on_a_run_and_on_a_store(
    store_root: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_run(stale=True)
    second = make_run(stale=False)
    assert _main(["report", str(store_root / "latest")]) == EXIT_VALID
    assert capsys.readouterr().out.strip() == str(second.report)
    assert second.report.exists() and not first.report.exists()
    assert _main(["report", str(store_root)]) == EXIT_VALID
    printed = capsys.readouterr().out.split()
    assert printed == [str(first.report), str(second.report), str(store_root / "index.html")]


def test_report_command_names_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(["report", str(tmp_path / "nope")]) == EXIT_ERROR
    assert "does not exist" in capsys.readouterr().err
    assert _main(["report", str(tmp_path)]) == EXIT_ERROR
    assert "neither a run directory" in capsys.readouterr().err


@pytest.fixture
def served(store_root: Path) -> Iterator[str]:
    server = make_server(store_root, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{LOOPBACK}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_serve_shows_the_store_on_loopback(
    store_root: Path, make_run: RunFactory, served: str
) -> None:
    run = make_run(stale=True)
    write_report(run)
    write_index(store_root)
    with urllib.request.urlopen(f"{served}/index.html") as response:
        assert response.status == 200
        assert response.headers["Cache-Control"] == "no-store"
        assert b"reference-pause" in response.read()
    href = run.report.relative_to(store_root).as_posix()
    with urllib.request.urlopen(f"{served}/{href}") as response:
        assert b"was accepted by fenced store" in response.read()


def test_serve_refuses_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["serve", "--store", str(tmp_path / "none"), "--port", "0"]) == EXIT_ERROR
    assert "no store at" in capsys.readouterr().err
