"""Faults by hand, as the README shows them, on a shared engine: `cluster up` deploys a system so
`nemesis pause w1` has a daemon to stop; a killed main process does not make `heal` refuse the
cluster, and heal names what the stopped node lost; commands without a run id touch only
clusters this user kept that no run drives."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, EXIT_VALID, cli, main
from harness.cli import cluster as cluster_cli
from harness.node.docker.cluster import (
    Cluster,
    ClusterError,
    NodeSpec,
    RunInfo,
    list_runs,
    new_run_id,
    remove_run,
)


def _fencecheck(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    captured = capsys.readouterr()
    return int(done.value.code or 0), captured.out + captured.err


@pytest.fixture
def kept_cluster(capsys: pytest.CaptureFixture[str], node_image: str) -> Iterator[str]:
    """`fencecheck cluster up --workers 2`: the reference system deployed, left running."""
    code, out = _fencecheck(capsys, "cluster", "up", "--workers", "2", "--image", node_image)
    assert code == EXIT_VALID, out
    run_id = out.strip().splitlines()[-1]
    try:
        yield run_id
    finally:
        remove_run(run_id)


@pytest.mark.docker
def test_the_readme_manual_faults_work_on_a_fresh_cluster(
    kept_cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = ("--run", kept_cluster)
    code, out = _fencecheck(capsys, "nemesis", "pause", "w1", "--for", "1s", *run)
    assert code == EXIT_VALID, out
    assert "start-pause pause w1: confirmed" in out and "stop-pause" in out
    code, out = _fencecheck(capsys, "nemesis", "partition", "--lock-cut", "w2", *run)
    assert code == EXIT_VALID, out
    # Killing the container's main process stops the node; heal brings it back (not refuse),
    # and says what did not come back with it: the agent that ran in it.
    code, out = _fencecheck(capsys, "nemesis", "kill", "w2", "--process", "sleep", *run)
    assert code == EXIT_VALID, out
    code, out = _fencecheck(capsys, "nemesis", "heal", *run)
    assert code == EXIT_ERROR, out
    assert "started node w2 again" in out and "is healed" not in out
    # The holder's agent and the write-path proxy beside it (cluster up starts both).
    assert "agent, proxy did not survive it" in out and f"cluster down {kept_cluster}" in out
    states = next(info.states for info in list_runs() if info.run_id == kept_cluster)
    assert set(states) == {"running"}
    # Nothing of ours runs on w2 now: a pause finds no daemon, rather than "confirming" a sleep.
    code, out = _fencecheck(capsys, "nemesis", "pause", "w2", "--for", "0.2s", *run)
    assert code == EXIT_ERROR, out
    assert "found no daemon" in out
    # Piped, status keeps whole run ids (rich would cut them to fit 80 columns).
    shown = CliRunner().invoke(cli, ["cluster", "status"], terminal_width=40)
    assert kept_cluster in shown.output.split()


@pytest.mark.docker
def test_nemesis_without_a_run_id_never_takes_a_run_a_controller_drives(
    node_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = f"test-{new_run_id()}"
    # This process stays its controller, as a `run --keep-cluster` in progress would.
    with Cluster(run_id, [NodeSpec("l1", "lock"), NodeSpec("w1", "worker")], image=node_image):
        try:
            picked = Cluster.attach().run_id
        except ClusterError as problem:
            picked = str(problem)
        assert picked != run_id
        code, out = _fencecheck(capsys, "nemesis", "freeze", "w1", "--for", "0.2s", "--run", run_id)
        assert code == EXIT_VALID, out


def _info(run_id: str, *, kept: bool, mine: bool, alive: bool) -> RunInfo:
    user = str(os.getuid()) if mine else "12345"
    return RunInfo(run_id, ("w1",), ("running",), "2026", "h:1:1", alive, kept, True, user)


_RUNS = [
    _info("yours-kept", kept=True, mine=True, alive=False),
    _info("yours-live", kept=True, mine=True, alive=True),
    _info("theirs-kept", kept=True, mine=False, alive=False),
    _info("yours-crashed", kept=False, mine=True, alive=False),
]


def test_down_without_a_run_id_removes_the_one_cluster_you_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster_cli, "list_runs", lambda: _RUNS)
    assert cluster_cli._down_targets(None, everything=False, yes=False) == ["yours-kept"]
    monkeypatch.setattr(cluster_cli, "list_runs", lambda: [*_RUNS, _RUNS[0]])
    with pytest.raises(Exception, match="you kept: yours-kept, yours-kept"):
        cluster_cli._down_targets(None, everything=False, yes=False)


def test_down_all_spares_other_users_and_live_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_cli, "list_runs", lambda: _RUNS)
    assert cluster_cli._down_targets(None, everything=True, yes=True) == [
        "yours-kept",
        "yours-crashed",
    ]


def test_down_all_asks_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cluster_cli, "list_runs", lambda: _RUNS)
    monkeypatch.setattr(cluster_cli, "_on_terminal", lambda: True)
    monkeypatch.setattr(cluster_cli, "remove_run", lambda run_id: pytest.fail(run_id))
    asked: list[str] = []
    monkeypatch.setattr(
        "click.termui.visible_prompt_func", lambda prompt: asked.append(prompt) or "n"
    )
    code, out = _fencecheck(capsys, "cluster", "down", "--all")
    assert "remove 2 run(s): yours-kept, yours-crashed?" in "".join(asked) + out
    assert code == EXIT_ERROR and "aborted" in out
