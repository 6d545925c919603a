"""A wheel installed outside the checkout carries its image recipes, matrices and examples, and
runs a whole test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_PACKAGES = ("harness", "checkers", "systems", "nemeses", "workloads")

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH, a cwd outside the checkout: only the installed wheel can answer.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _source_copy(where: Path) -> Path:
    """What a fresh checkout holds: a build folder left in the checkout would leak stale files
    into the wheel (setuptools reuses build/lib)."""
    source = where / "source"
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "store", ".*")
    for name in (*_PACKAGES, "docker", "matrices", "examples"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore, symlinks=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    return source


def test_a_wheel_outside_the_checkout_builds_images_and_runs_valid(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    source = _source_copy(tmp_path)
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
        tmp_path,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("fencecheck-*.whl")
    # The dependencies (click, docker, orjson, rich...) come from the suite's own environment,
    # which a fresh machine has only in its venv, not in the system's site-packages: a .pth line
    # appends that folder after the new venv's own, so the wheel's packages win, and the
    # editable checkout's finder (a .pth file there, never processed from a plain path line)
    # stays out.
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = str(env_dir / "bin" / "python")
    own = sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)})
    suite = {sysconfig.get_paths()[name] for name in ("purelib", "platlib")}
    (Path(own) / "suite-dependencies.pth").write_text("\n".join(sorted(suite)) + "\n")
    installed = _run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", str(wheel)],
        tmp_path,
    )
    assert installed.returncode == 0, installed.stderr
    where = _run([python, "-c", "import harness; print(harness.__file__)"], tmp_path)
    assert str(env_dir) in where.stdout, where.stdout + where.stderr
    fencecheck = str(env_dir / "bin" / "fencecheck")
    # The matrices and examples ship inside the wheel, as files of the installed package.
    shipped = _run([fencecheck, "matrices"], tmp_path)
    assert shipped.returncode == 0, shipped.stderr
    lines = shipped.stdout.splitlines()
    assert any(line.startswith("detection  (") for line in lines), shipped.stdout
    assert all(str(env_dir) in line for line in lines), shipped.stdout
    examples = _run([fencecheck, "examples"], tmp_path).stdout.split()
    assert any(p.endswith("stale-write.jsonl") and Path(p).is_file() for p in examples), examples
    dry = _run([fencecheck, "run-all", "--matrix", "detection", "--dry-run"], tmp_path)
    assert dry.returncode == 0 and "expect" in dry.stdout, dry.stdout + dry.stderr
    images = _run([fencecheck, "images", "build"], tmp_path)
    assert images.returncode == 0, images.stdout + images.stderr
    run = _run(
        [
            fencecheck,
            "run",
            "--time-limit",
            "10",
            "--no-progress",
            "--json",
            "--store",
            str(tmp_path / "store"),
        ],
        tmp_path,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert json.loads(run.stdout)["valid"] is True
