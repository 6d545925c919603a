"""Concurrent writers of one store never collide on a temporary file name."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.report.page import write_file
from harness.run.store import RunDir, new_run_dir, point_latest


def test_concurrent_atomic_writes_of_one_file_all_succeed(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    texts = [f"<p>{n}</p>" * 2000 for n in range(48)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda text: write_file(target, text), texts))
    assert target.read_text() in texts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_concurrent_runs_in_one_store_each_get_a_folder_and_latest_points_at_one(
    tmp_path: Path,
) -> None:
    def checked(_: int) -> RunDir:
        run = new_run_dir("t", tmp_path)
        point_latest(run)
        return run

    with ThreadPoolExecutor(16) as pool:
        runs = list(pool.map(checked, range(48)))
    assert len({run.path for run in runs}) == 48
    assert (tmp_path / "latest").resolve() in {run.path.resolve() for run in runs}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "t"]


def test_concurrent_json_writes_leave_one_whole_file(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: run.write_json(run.results, {"n": n}), range(48)))
    stored = run.read_results()
    assert stored is not None and stored.data in [{"n": n} for n in range(48)]
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
