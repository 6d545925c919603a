"""The node-side process scan, run here as nodes run it: ``python3 -c SOURCE MODE ARG LOGS``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.nodeside import procscan


def _scan(*args: str) -> list[dict[str, object]]:
    source = Path(procscan.__file__).read_text()
    done = subprocess.run(
        [sys.executable, "-c", source, *args], capture_output=True, text=True, check=True
    )
    listed: list[dict[str, object]] = json.loads(done.stdout)
    return listed


def test_a_named_daemon_is_found_by_where_its_output_goes(tmp_path: Path) -> None:
    logs = f"{tmp_path}/"
    with (tmp_path / "sleeper.log").open("w") as out:
        sleeper = subprocess.Popen(["sleep", "30"], stdout=out)
    try:
        (found,) = [p for p in _scan("daemons", "sleeper", logs) if p["pid"] == sleeper.pid]
        assert found["name"] == "sleeper" and found["argv"] == ["sleep", "30"]
        assert found["state"] in ("S", "R") and isinstance(found["env"], dict)
        assert [p["pid"] for p in _scan("pid", str(sleeper.pid), logs)] == [sleeper.pid]
        assert sleeper.pid in [p["pid"] for p in _scan("pattern", r"^sleep 30$", logs)]
        assert _scan("daemons", "someone-else", logs) == []
    finally:
        sleeper.kill()
        sleeper.wait()
