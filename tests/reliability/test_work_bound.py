"""The total work of a run is bounded before anything starts: final reads (keys x locks x sinks
read) above the bound are refused with exit 3 naming the product and a fix, and the final reads
that do run are streamed (never built as one list) and stop promptly on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.cli import EXIT_ERROR
from harness.record.spec import MAX_FINAL_READS, SpecError, TestSpec
from harness.run.runner import _final_reads
from workloads import Completion, WorkloadOptions, final_read_count, final_reads, get_workload


def _run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    # An engine address where nothing listens: a run that got past the bound fails differently.
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "COLUMNS": "300"}
    command = [sys.executable, "-m", "harness", "run", "--no-progress"]
    return subprocess.run(
        [*command, "--store", str(tmp_path / "s"), *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_keys_times_locks_beyond_the_bound_is_refused_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    done = _run(tmp_path, "--keys", "100000", "--locks", "1000")
    assert done.returncode == EXIT_ERROR, done.stderr
    assert time.monotonic() - started < 30
    assert "100,000,000 final reads" in done.stderr
    assert f"more than the {MAX_FINAL_READS:,}" in done.stderr
    assert "--keys 300" in done.stderr  # the fix: a key count that fits with 1000 locks
    assert "Traceback" not in done.stderr
    assert not list((tmp_path / "s").glob("*/*/history.jsonl"))


def test_the_sinks_workload_multiplies_by_the_sinks_it_reads(tmp_path: Path) -> None:
    # 200,000 per sink passes the spec's own check; the reference system's 3 sinks do not.
    TestSpec(keys=100_000, locks=2, workload="sinks").check()
    done = _run(tmp_path, "--workload", "sinks", "--keys", "100000", "--locks", "2")
    assert done.returncode == EXIT_ERROR, done.stderr
    assert "3 sink(s) read = 600,000 final reads" in done.stderr
    assert "--workload append" in done.stderr
    assert not list((tmp_path / "s").glob("*/*/history.jsonl"))


def test_a_matrix_row_is_held_to_the_same_bound() -> None:
    with pytest.raises(SpecError, match="100,000,000 final reads"):
        TestSpec(keys=100_000, locks=1000).check()
    TestSpec(keys=300, locks=1000).check()


def test_final_reads_are_counted_and_named_without_a_list() -> None:
    options = WorkloadOptions(keys=100_000, locks=1000, all_sinks=("store", "a", "b"))
    assert final_read_count(get_workload("sinks"), options) == 300_000_000
    reads = final_reads(get_workload("append"), options)
    assert isinstance(reads, Iterator)
    assert [next(reads) for _ in range(2)] == [("store", "L0-k0"), ("store", "L0-k1")]


@dataclass
class _Reader:
    """Stands in for a final reader's HolderOps: counts its reads, each taking ``pause`` s."""

    node: str
    pause: float
    done: list[float] = field(default_factory=list)

    def read(self, sink: str, key: str) -> Completion:
        time.sleep(self.pause)
        self.done.append(time.monotonic())
        return Completion("ok")


def _watched(readers: list[_Reader], total: int) -> Iterator[tuple[str, str]]:
    """``total`` reads, refusing to be drawn further ahead of the reads done than one per
    reader: a list built up front fails at once."""
    for number in range(total):
        finished = sum(len(reader.done) for reader in readers)
        assert number - finished <= len(readers), "the final reads were drawn ahead"
        yield "store", f"L0-k{number}"


def test_final_reads_are_drawn_as_they_are_read() -> None:
    readers = [_Reader(f"w{n % 2}", 0.0) for n in range(8)]
    _final_reads(readers, _watched(readers, 20_000), threading.Event())  # type: ignore[arg-type]
    assert sum(len(reader.done) for reader in readers) == 20_000


def test_ctrl_c_stops_the_final_reads_promptly() -> None:
    readers = [_Reader(f"w{n % 2}", 0.002) for n in range(8)]
    sent: list[float] = []

    def ctrl_c() -> None:
        time.sleep(0.3)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    # Ctrl-C as a program gets it: an earlier test of the session may have left another rule for
    # SIGINT in this process (a whole-suite run once hung here for the 600 s timeout).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=ctrl_c, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _final_reads(
                readers,  # type: ignore[arg-type]
                _watched(readers, 10_000_000),
                threading.Event(),
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    after = [t for reader in readers for t in reader.done if t > sent[0]]
    # The main thread notices the signal within a tenth of a second (it waits in slices), then
    # each reader finishes the read in hand and takes no other. No wall time is asserted: a busy
    # machine may be slow to deliver the signal, but the readers' count of reads after it shows
    # whether they stopped.
    # At most five seconds' worth of 2 ms reads per reader after the signal (a slice is 0.1 s:
    # the margin is for a loaded machine), never the ten million still queued.
    assert len(after) <= len(readers) * 2500
