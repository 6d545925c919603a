"""The controller never imports a holder client (it only ships it), and the harness checks on a
node that every module the client imports is there, naming the missing one and the package list."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.run.agents import client_imports_problem
from systems import HolderClientCode, deploy
from tests.support.localcluster import LocalNode

_CLIENT = "tests.support.nodeonly.client"


def test_a_named_client_is_shipped_without_being_imported() -> None:
    source = deploy.source_of(_CLIENT)
    assert b"import fencecheck_absent_driver" in source
    assert _CLIENT not in sys.modules and "fencecheck_absent_driver" not in sys.modules


def test_a_missing_import_on_the_node_is_named_with_the_package_list(tmp_path: Path) -> None:
    node = LocalNode("w1", "worker", "127.0.0.1", tmp_path / "logs")
    code = HolderClientCode(_CLIENT, {})
    problem = client_imports_problem(node, code, ("python3-psycopg2",), str(tmp_path / "opt"))
    assert problem is not None
    assert "'fencecheck_absent_driver'" in problem and "node w1" in problem
    assert "python3-fencecheck-absent-driver" in problem and "python3-psycopg2" in problem
    assert _CLIENT not in sys.modules


def test_a_client_that_imports_is_passed(tmp_path: Path) -> None:
    node = LocalNode("w1", "worker", "127.0.0.1", tmp_path / "logs")
    code = HolderClientCode("systems.reference.client", {})
    assert client_imports_problem(node, code, (), str(tmp_path / "opt")) is None
