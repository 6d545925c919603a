"""The README's quick examples (the "A short tour" block) run as written, from a folder with the
checkout's examples and matrices: every command exists and takes its flags, and none ends in an
error. Runs are shortened to 12 s (a later --time-limit wins), matrices only dry-run, and
``serve`` (it serves until stopped) is left out; the rest is the README's text, word for word."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.e2e]


def _tour_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    tour = text[text.index("## A short tour") :]
    block = re.search(r"```sh\n(.*?)```", tour, re.S)
    assert block is not None, "the README's short tour has no sh block"
    commands = []
    for line in block.group(1).splitlines():
        for part in line.split("#", 1)[0].split("&&"):
            words = shlex.split(part)
            if words and words[0] == "fencecheck" and words[1:2] != ["serve"]:
                commands.append(words)
    return commands


COMMANDS = _tour_commands()


def test_the_tour_has_the_commands_it_promises() -> None:
    names = {words[1] for words in COMMANDS}
    assert {"doctor", "list", "run", "analyze", "report", "check", "run-all"} <= names


def test_every_tour_command_runs(tmp_path: Path) -> None:
    for folder in ("examples", "matrices"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    program = shutil.which("fencecheck")
    assert program is not None
    for words in COMMANDS:
        argv = [program, *words[1:]]
        if words[1] == "run":
            argv += ["--time-limit", "12", "--no-progress"]
        if words[1] == "run-all":
            argv += ["--dry-run"]
        done = subprocess.run(
            argv, cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=600
        )
        story = f"{shlex.join(words)} exited {done.returncode}: {done.stderr[-1500:]}"
        if words[1] == "check" and "stale-write" in words[-1]:
            assert done.returncode == 1, story  # the example history is invalid, on purpose
        else:
            assert done.returncode in (0, 1), story  # valid or invalid, never unknown or error
