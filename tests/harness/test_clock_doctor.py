"""The doctors' compiler check: gcc compiles fencecheck's clock shim on the node (Redis's clock
faults need it), and a node without gcc, or whose gcc cannot build it, is told what is missing
and who needs it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.node import NodeError
from harness.node.clocks import check_compiler
from tests.support.localcluster import LocalNode


def _only(tmp_path: Path, tools: dict[str, str]) -> str:
    """A PATH holding ``sh`` and ``rm`` and each of ``tools`` (name -> shell script)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("sh", "rm"):
        found = shutil.which(name)
        assert found is not None
        (folder / name).symlink_to(found)
    for name, script in tools.items():
        (folder / name).write_text(f"#!{shutil.which('sh')}\n{script}\n")
        (folder / name).chmod(0o755)
    return str(folder)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler here")
def test_a_node_with_gcc_compiles_the_shim_and_keeps_nothing(tmp_path: Path) -> None:
    node = LocalNode("l1", "lock", "127.0.0.1", tmp_path)
    assert "compiled fencecheck's clock shim" in check_compiler(node)
    assert not Path("/tmp/fencecheck-doctor-shim").exists()


def test_a_node_without_gcc_is_told_who_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = LocalNode("l1", "lock", "127.0.0.1", tmp_path)
    monkeypatch.setenv("PATH", _only(tmp_path, {}))
    with pytest.raises(NodeError, match="l1: gcc is not installed; Redis's clock faults"):
        check_compiler(node)


def test_a_gcc_that_cannot_build_the_shim_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = LocalNode("l1", "lock", "127.0.0.1", tmp_path)
    failing = (
        'echo "fakeclock.c:29:10: fatal error: fcntl.h: No such file or directory" >&2; exit 1'
    )
    monkeypatch.setenv("PATH", _only(tmp_path, {"gcc": failing}))
    with pytest.raises(NodeError, match=r"fcntl\.h: No such file.*libc6-dev") as raised:
        check_compiler(node)
    assert "gcc cannot compile fencecheck's clock shim" in str(raised.value)
