"""fencecheck's clock shim (``harness/nodeside/fakeclock.c``), compiled here and preloaded into a
real process: it reads the control file the harness writes as libfaketime does (``+D x1``
whenever read, ``@T xR`` anchored at the first read after a change), a rate window written by
the harness's writer starts and ends without a jump, wall only leaves the monotonic clock alone,
and without a file the clock is the real one."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.nodeside import clock

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler")

_SOURCE = Path(clock.__file__).with_name("fakeclock.c")
# Prints its wall and monotonic clocks for every line it reads, and reads them at no other time
# (a Python process reads its clock on its own, which would anchor an "@" early).
_READER = r"""
#include <stdio.h>
#include <time.h>
int main(void) {
    char line[16];
    struct timespec wall, mono;
    while (fgets(line, sizeof line, stdin)) {
        clock_gettime(CLOCK_REALTIME, &wall);
        clock_gettime(CLOCK_MONOTONIC, &mono);
        printf("%ld.%09ld %ld.%09ld\n", wall.tv_sec, wall.tv_nsec, mono.tv_sec, mono.tv_nsec);
        fflush(stdout);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The shim and the reader, compiled."""
    folder = tmp_path_factory.mktemp("shim")
    library, reader = folder / "fakeclock.so", folder / "reader"
    (folder / "reader.c").write_text(_READER)
    strict = ["-O2", "-Wall", "-Wextra", "-Werror"]
    subprocess.run(["gcc", *strict, "-shared", "-fPIC", "-o", library, _SOURCE], check=True)
    subprocess.run(["gcc", *strict, "-o", reader, folder / "reader.c"], check=True)
    return library, reader


class _Process:
    """A process under the shim, asked for its clocks one line at a time."""

    def __init__(self, built: tuple[Path, Path], control: Path, wall_only: bool) -> None:
        shim, reader = built
        argv = clock.preloaded("reader", [str(reader)], "", wall_only, str(shim))
        argv = [f"FAKETIME_TIMESTAMP_FILE={control}" if "TIMESTAMP" in w else w for w in argv]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def read(self) -> tuple[float, float, float]:
        """``(wall offset, monotonic offset, real wall time)`` of one reading: how far each of
        the process's clocks is from the real one."""
        assert self.process.stdin is not None and self.process.stdout is not None
        before_wall, before_mono = time.time(), time.monotonic()
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        wall, mono = map(float, self.process.stdout.readline().split())
        after_wall, after_mono = time.time(), time.monotonic()
        return (
            wall - (before_wall + after_wall) / 2,
            mono - (before_mono + after_mono) / 2,
            (before_wall + after_wall) / 2,
        )

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def control(tmp_path: Path) -> Path:
    return tmp_path / "control"


@pytest.fixture
def both(built: tuple[Path, Path], control: Path) -> Iterator[_Process]:
    process = _Process(built, control, wall_only=False)
    yield process
    process.close()


@pytest.fixture
def wall(built: tuple[Path, Path], control: Path) -> Iterator[_Process]:
    process = _Process(built, control, wall_only=True)
    yield process
    process.close()


def test_without_a_file_the_clock_is_the_real_one(both: _Process) -> None:
    wall, mono, _ = both.read()
    assert wall == pytest.approx(0.0, abs=0.05)
    assert mono == pytest.approx(0.0, abs=0.05)


def test_an_offset_moves_both_clocks_whenever_it_is_read(both: _Process, control: Path) -> None:
    control.write_text("+30.5 x1")
    for _ in range(2):
        wall, mono, _ = both.read()
        assert wall == pytest.approx(30.5, abs=0.05)
        assert mono == pytest.approx(30.5, abs=0.05)
    control.write_text("-7.25 x1")
    assert both.read()[0] == pytest.approx(-7.25, abs=0.05)


def test_wall_only_leaves_the_monotonic_clock_real(wall: _Process, control: Path) -> None:
    control.write_text("+30 x1")
    offset, mono, _ = wall.read()
    assert offset == pytest.approx(30.0, abs=0.05)
    assert mono == pytest.approx(0.0, abs=0.05)


def test_an_anchor_reads_its_time_at_the_next_read_and_runs_at_its_rate_from_there(
    both: _Process, control: Path
) -> None:
    at = time.time() + 100.0
    control.write_text(f"@{at:.6f} x4")
    time.sleep(0.2)  # no read meanwhile: the clock starts at the anchor at the next read
    first, _, real_first = both.read()
    assert real_first + first == pytest.approx(at, abs=0.05)  # no jump after it but the anchor
    time.sleep(0.5)
    second, _, real_second = both.read()
    fake_elapsed = (real_second + second) - (real_first + first)
    assert fake_elapsed == pytest.approx(4 * (real_second - real_first), abs=0.1)


def test_a_rate_window_written_by_the_harness_starts_and_ends_without_a_jump(
    both: _Process, control: Path
) -> None:
    assert both.read()[0] == pytest.approx(0.0, abs=0.05)
    clock.apply(str(control), "rate", 2.0, "")
    start, _, _ = both.read()
    assert start == pytest.approx(0.0, abs=0.05)  # no jump at the start
    time.sleep(1.0)
    inside, _, _ = both.read()
    assert inside == pytest.approx(1.0, abs=0.15)  # a second at 2x gained a second
    clock.apply(str(control), "rate", 1.0, "")
    end, _, _ = both.read()
    assert end == pytest.approx(inside, abs=0.15)  # no jump at the end; the gain stays
    time.sleep(0.5)
    assert both.read()[0] == pytest.approx(end, abs=0.05)  # at 1x again


def test_a_relative_rate_counts_from_the_processs_first_read(both: _Process, control: Path) -> None:
    _, _, read = both.read()  # the process's first clock read
    time.sleep(0.5)
    control.write_text("+0 x3")
    offset, _, real = both.read()
    assert offset == pytest.approx(2 * (real - read), abs=0.05)
