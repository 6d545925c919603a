"""Output made for 80-column CI logs and pipes: verdict words in the sink table, untouched sinks
"not written", and a closed pipe that ends the command quietly with SIGPIPE's code (never 1,
which a CI reads as "invalid")."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import EXIT_CLOSED_PIPE, main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_sink_verdicts_are_words_and_an_untouched_sink_is_not_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    history, inventory = EXAMPLES / "valid.jsonl", EXAMPLES / "inventory.json"
    with pytest.raises(SystemExit):
        main(["check", str(history), "--inventory", str(inventory)])
    rows = {
        line.split("│")[1].strip(): line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("│ ") and line.split("│")[1].strip()
    }
    assert "not" in rows["recorder"] and "unknown" not in rows["recorder"]
    assert " valid " in rows["store"]
    assert "true" not in rows["store"] and "false" not in rows["recorder"]


@pytest.mark.parametrize("argv", [["list"], ["check", str(EXAMPLES / "stale-write.jsonl")]])
def test_a_closed_pipe_ends_quietly_with_sigpipes_code(argv: list[str]) -> None:
    program = shutil.which("fencecheck")
    assert program is not None
    reader = subprocess.Popen([program, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reader.stdout is not None and reader.stderr is not None
    # Closed before the program (a second of imports) writes anything: its first write fails.
    reader.stdout.close()
    assert reader.wait(timeout=60) == EXIT_CLOSED_PIPE == 141
    assert reader.stderr.read() == b""
