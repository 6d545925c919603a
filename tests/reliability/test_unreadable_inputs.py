"""Histories and run records that are not what they claim: a link to ``/dev/zero``, a FIFO, a
file of NUL bytes, a damaged ``test.json``, a torn last line, a run killed before its end. Each is
one line and exit 3 (or, for the torn line and the killed run, a verdict that says so), never a
hang, a read until memory runs out or a traceback (issue 22)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import harness.cli.check as check_cli
from harness.cli import EXIT_ERROR, EXIT_UNKNOWN, EXIT_VALID, main
from harness.record import HistoryError, read_history
from harness.record import io as history_io
from harness.run.store import RunDir
from tests.report.conftest import build_run

Spoil = Callable[[RunDir], None]


def _link_to_dev_zero(run: RunDir) -> None:
    run.history.unlink()
    run.history.symlink_to("/dev/zero")


def _fifo(run: RunDir) -> None:
    run.history.unlink()
    os.mkfifo(run.history)


def _nul_bytes(run: RunDir) -> None:
    run.history.write_bytes(b"\0" * 1000)


def _damaged_test_json(run: RunDir) -> None:
    run.test_json.write_text('{"spec": ')


_SPOILED: dict[str, tuple[Spoil, str]] = {
    "history links to /dev/zero": (_link_to_dev_zero, "history.jsonl is not a regular file"),
    "history is a FIFO": (_fifo, "history.jsonl is not a regular file"),
    "history is 1000 NUL bytes": (_nul_bytes, "holds NUL bytes: this is not a history"),
    "test.json is damaged": (_damaged_test_json, "test.json is damaged (not JSON"),
}


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``fencecheck ARGS`` in a thread that must end within 20 s (a hang fails the test)."""
    codes: list[int] = []

    def call() -> None:
        try:
            main(args)
        except SystemExit as done:
            codes.append(done.code if isinstance(done.code, int) else EXIT_VALID)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), f"fencecheck {' '.join(args)} hangs"
    out = capsys.readouterr()
    return codes[0], out.out + out.err


@pytest.mark.parametrize("command", ["analyze", "report"])
@pytest.mark.parametrize("case", list(_SPOILED))
def test_a_run_folder_that_is_not_a_run_is_one_line_and_exit_3(
    command: str, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spoil, says = _SPOILED[case]
    run = build_run(tmp_path / "store", stale=False)
    spoil(run)
    code, output = _cli([command, str(run.path)], capsys)
    assert code == EXIT_ERROR, output
    assert says in output, output
    assert "Traceback" not in output
    assert str(run.path) in output  # the message names the file
    assert len(output.strip().splitlines()) == 1, output


def test_report_on_a_store_names_the_damaged_run_writes_the_others_and_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    good = build_run(store, stale=False)
    bad = build_run(store, stale=False)
    _damaged_test_json(bad)
    code, output = _cli(["report", str(store)], capsys)
    assert code == EXIT_ERROR, output
    assert f"{bad.test_json} is damaged" in output
    assert "1 of 2 runs could not be read" in output
    assert good.report.exists() and not bad.report.exists()


def test_check_refuses_a_link_to_dev_zero_and_nul_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    nul = tmp_path / "nul.jsonl"
    nul.write_bytes(b"\0" * 1000)
    code, output = _cli(["check", str(zero)], capsys)
    assert code == EXIT_ERROR and "is not a history file (a folder or a device)" in output
    code, output = _cli(["check", str(nul)], capsys)
    assert code == EXIT_ERROR and "holds NUL bytes: this is not a history" in output
    assert "\\x00" not in output  # named, not printed


def test_check_gives_up_on_a_fifo_nobody_writes_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_cli, "FIFO_WAIT_S", 0.5)
    fifo = tmp_path / "h.jsonl"
    os.mkfifo(fifo)
    began = time.monotonic()
    code, output = _cli(["check", str(fifo)], capsys)
    assert code == EXIT_ERROR, output
    assert "nothing was written to the FIFO" in output and "start its writer first" in output
    assert time.monotonic() - began < 10


def test_check_still_reads_a_fifo_its_writer_fills(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = build_run(tmp_path / "store", stale=False)
    fifo = tmp_path / "h.jsonl"
    os.mkfifo(fifo)

    def write() -> None:
        with fifo.open("wb") as stream:
            stream.write(run.history.read_bytes())

    threading.Thread(target=write, daemon=True).start()
    code, output = _cli(["check", str(fifo)], capsys)
    assert code == EXIT_VALID, output


def test_a_line_without_end_is_refused_at_the_line_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_io, "MAX_LINE_BYTES", 1000)
    with pytest.raises(HistoryError, match="longer than"), Path("/dev/zero").open("rb") as zero:
        list(read_history(zero))


def test_a_torn_last_line_is_reported_and_judged_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = build_run(tmp_path / "store", stale=False)
    lines = len(run.history.read_bytes().splitlines())
    with run.history.open("ab") as history:
        history.write(b'{"index": 99999, "ti')
    said = f"the last line ({lines + 1}) was torn"
    code, output = _cli(["check", str(run.history)], capsys)
    assert code == EXIT_VALID and said in " ".join(output.split()), output
    code, output = _cli(["analyze", str(run.path)], capsys)
    assert code == EXIT_VALID and said in " ".join(output.split()), output
    stored = run.read_results()
    assert stored is not None and said in stored.notes[0]
    notes: list[str] = []
    assert len(list(read_history(run.history, notes=notes))) == lines
    assert len(notes) == 1 and "judged without it" in notes[0]


def test_a_run_killed_before_its_end_says_it_never_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = build_run(tmp_path / "store", stale=False)
    # What the runner writes at its start; a SIGKILL leaves it so (and no results.json).
    record = run.read_test()
    run.write_json(run.test_json, {**record, "finished": False})
    code, output = _cli(["analyze", "--json", str(run.path)], capsys)
    assert code == EXIT_UNKNOWN, output
    stored = run.read_results()
    assert stored is not None and stored.never_finished
    assert stored.unknown_reasons[0].startswith("the run never finished")
    code, output = _cli(["analyze", str(run.path)], capsys)  # and again, once results exist
    assert code == EXIT_UNKNOWN and "never finished" in output, output


def test_a_finished_run_and_an_old_record_are_judged_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = build_run(tmp_path / "store", stale=False)
    assert "finished" not in run.read_test()  # written before the field existed
    assert _cli(["analyze", str(run.path)], capsys)[0] == EXIT_VALID
    run.write_json(run.test_json, {**run.read_test(), "finished": True})
    code, output = _cli(["analyze", str(run.path)], capsys)
    assert code == EXIT_VALID and "never finished" not in output
    assert json.loads(run.results.read_text()).get("never_finished") is None
