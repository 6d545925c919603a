"""``fencecheck run --hosts FILE`` on four sshd containers acting as real hosts: the reference
system under pause, throttle, partition and kill is valid, with a planted bug invalid, and an
interrupted run leaves every host healed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.node.ssh import connect, load_hosts
from harness.node.ssh.containers import SshdHosts

pytestmark = [pytest.mark.docker, pytest.mark.e2e]

# Seed 19 draws all four kinds in 15 s, starting with a 3-TTL pause of a holder inside its work,
# before the send (what exposes no-store-check every time). A pause aimed into the write call
# (seed 56's) exposes nothing when the request has already reached the store: a verdict on timing.
_FAULTS = ["--nemesis", "pause,throttle,partition,kill", "--fault-lengths", "0.8,3"]


def _run(hosts: SshdHosts, store: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--hosts",
        str(hosts.hosts_file),
        "--store",
        str(store),
        "--time-limit",
        "15",
        "--seed",
        "19",
        "--no-progress",
        "--json",
        *_FAULTS,
        *extra,
    ]


@pytest.mark.parametrize(
    ("bugs", "expected"), [((), 0), (("--bug", "no-store-check"), 1)], ids=["correct", "bug"]
)
def test_a_run_on_real_hosts_finds_exactly_the_planted_bug(
    test_hosts: SshdHosts, tmp_path: Path, bugs: tuple[str, ...], expected: int
) -> None:
    done = subprocess.run(
        _run(test_hosts, tmp_path / "store", *bugs), capture_output=True, text=True, check=False
    )
    assert done.returncode == expected, done.stderr[-3000:]
    result = json.loads(done.stdout)
    test = json.loads((Path(result["run_dir"]) / "test.json").read_text())
    assert [n["name"] for n in test["topology"]] == ["l1", "s1", "w1", "w2"]
    kinds = {w["kind"] for w in test["schedule"]["windows"]}
    assert kinds == {"pause", "throttle", "partition", "kill"}
    assert "heal_errors" not in test
    history = (Path(result["run_dir"]) / "history.jsonl").read_text()
    for kind in kinds:
        assert f'"start-{kind}"' in history
    if expected == 1:
        assert "stale-write" in result["anomaly_types"]


def _fault_in_force(store: Path) -> bool:
    # store/latest names a run only once it is checked: read the run in progress.
    histories = list(store.glob("*/*/history.jsonl"))
    if not histories:
        return False
    for line in histories[0].read_text().splitlines():
        event = json.loads(line)
        starts = str(event.get("f", "")).startswith("start-")
        if event.get("process") == "nemesis" and starts and event.get("type") != "invoke":
            return True
    return False


def test_an_interrupted_run_heals_every_host(test_hosts: SshdHosts, tmp_path: Path) -> None:
    store = tmp_path / "store"
    argv = _run(test_hosts, store)[: -len(_FAULTS)]
    argv += ["--nemesis", "pause,throttle,partition", "--fault-lengths", "8"]
    argv += ["--time-limit", "120", "--target", "lock,store,worker"]
    run = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 90
        while not _fault_in_force(store):
            assert time.monotonic() < deadline, "no fault was applied within 90 s"
            time.sleep(0.1)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode in (1, 2), err.decode()[-3000:]  # never valid: it was interrupted
    hosts = load_hosts(test_hosts.hosts_file)
    # Connected without SshCluster, whose own clean-up on entry would hide leftovers.
    for spec in hosts.hosts:
        node = connect(hosts, spec)
        try:
            assert "FENCECHECK" not in node.run("iptables -S").stdout
            assert node.run("pgrep -f /opt/fencecheck").stdout == ""
            assert node.run("ps -eo stat= | grep -c '^T' || true").stdout.strip() == "0"
            quota = node.run(f"cat {node.cgroups.cpu}/cpu.cfs_quota_us 2>/dev/null || true")
            assert quota.stdout.strip() in ("", "-1")
            assert (
                "FROZEN" not in node.run(f"cat {node.cgroups.freezer}/freezer.state || true").stdout
            )
        finally:
            node.close()
