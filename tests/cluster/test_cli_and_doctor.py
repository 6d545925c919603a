"""The people-facing commands: ``fencecheck cluster up|status|down|gc``, ``images``, ``doctor``."""

from __future__ import annotations

import pytest

from harness.cli import EXIT_ERROR, EXIT_VALID, main
from harness.node.docker.cluster import list_runs
from harness.node.docker.doctor import run_checks

pytestmark = pytest.mark.docker


def _fencecheck(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    captured = capsys.readouterr()
    return int(done.value.code or 0), captured.out + captured.err


def test_cluster_up_status_down(capsys: pytest.CaptureFixture[str], node_image: str) -> None:
    code, out = _fencecheck(capsys, "cluster", "up", "--workers", "1", "--image", node_image)
    assert code == EXIT_VALID, out
    run_id = out.strip().splitlines()[-1]
    run = next(run for run in list_runs() if run.run_id == run_id)
    assert (run.nodes, run.kept, run.network) == (("l1", "s1", "w1"), True, True)

    code, out = _fencecheck(capsys, "cluster", "status", run_id)
    assert (code, run_id in out) == (EXIT_VALID, True)
    # A kept cluster is not garbage, even though the `up` that made it has finished.
    _fencecheck(capsys, "cluster", "gc")
    assert run_id in [run.run_id for run in list_runs()]

    code, out = _fencecheck(capsys, "cluster", "down", run_id)
    assert (code, out.strip()) == (EXIT_VALID, "removed 4 containers and networks")
    assert run_id not in [run.run_id for run in list_runs()]
    code, out = _fencecheck(capsys, "cluster", "down", run_id)
    assert code == EXIT_ERROR and "nothing with run id" in out


def test_images_list_shows_the_current_tags(
    capsys: pytest.CaptureFixture[str], node_image: str
) -> None:
    code, out = _fencecheck(capsys, "images", "list")
    assert code == EXIT_VALID
    assert node_image in out
    # Each installed system's image is listed too (etcd's carries its Debian packages).
    for system in ("reference", "etcd", "redis", "zookeeper"):
        assert f"system {system}" in out, out
    code, out = _fencecheck(capsys, "images", "list", "--system", "etcd")
    assert code == EXIT_VALID and "system etcd" in out and "system redis" not in out


def test_images_build_names_an_unknown_system(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _fencecheck(capsys, "images", "build", "--system", "no-such-system")
    assert code == EXIT_ERROR and "no-such-system" in out


def test_doctor_finds_everything_working_here(node_image: str) -> None:
    checks = list(run_checks())
    failed = [check for check in checks if not check.ok]
    assert not failed, failed
    assert [check.name for check in checks] == [
        "docker engine",
        "node image",
        "container with NET_ADMIN",
        "iptables in a container",
        "iptables from the host (nsenter)",
        "cgroup CPU quota",
        "cgroup freezer",
        "libfaketime (clock faults)",
        "signals (SIGSTOP/SIGCONT)",
    ]
    assert not [run for run in list_runs() if run.run_id.startswith("doctor-") and run.owner_alive]
