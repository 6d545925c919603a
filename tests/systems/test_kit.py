"""The optional adapter kit (systems/kit.py) and the switch table helper of systems/base.py."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from harness.node import Node
from harness.node.wait import CommandSucceeds
from systems import (
    AdapterError,
    BugSwitch,
    ConfigError,
    Deployment,
    Exposure,
    SystemConfig,
    switch_table,
)
from systems.base import ProcessTarget
from systems.kit import DaemonEntry, DaemonTable, SwitchTable, setting_up
from tests.support.fake import FakeSystem
from tests.support.localcluster import LocalNode, local_nodes, wait_dead

_PAUSE = Exposure(faults=("pause",))


def _switch(name: str) -> BugSwitch:
    return BugSwitch(name, f"{name} planted", _PAUSE, ("stale-write",))


class _Planted(FakeSystem, SwitchTable):
    """A system with two switches whose setup runs a command on ``w1`` that fails."""

    switches = switch_table(_switch("one"), _switch("two"))

    def setup(self, nodes: Mapping[str, Node], config: SystemConfig) -> Deployment:
        with setting_up(self, nodes, config):
            self.calls.append(("started",))
            nodes["w1"].run(["false"], check=True)
        return super().setup(nodes, config)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[str, LocalNode]]:
    made = local_nodes(tmp_path, 0, workers=1)
    yield made
    for node in made.values():
        node.close()


def test_a_switch_table_keeps_the_order_is_read_only_and_refuses_a_name_twice() -> None:
    table = switch_table(_switch("b"), _switch("a"))
    assert list(table) == ["b", "a"]
    with pytest.raises(TypeError):
        table["c"] = _switch("c")  # type: ignore[index]
    with pytest.raises(ConfigError, match="two bug switches are named a;"):
        switch_table(_switch("a"), _switch("b"), _switch("a"))


def test_switch_table_answers_plants_bugs_from_the_class_table() -> None:
    system = _Planted()
    assert list(system.bug_switches()) == ["one", "two"]
    system.validate(SystemConfig(bugs=frozenset({"one", "two"})))
    with pytest.raises(ConfigError, match=r"system 'fake' has no bug switch 'three'.*one, two"):
        system.validate(SystemConfig(bugs=frozenset({"three"})))
    assert system.lease_ttl(SystemConfig(lease_ttl=1.5)) == 1.5


def test_a_switch_named_like_a_holder_flaw_is_refused_as_the_class_is_defined() -> None:
    with pytest.raises(ConfigError, match="retry-on-reject like the harness's holder flaws"):

        class _Clashing(FakeSystem, SwitchTable):
            switches = switch_table(_switch("retry-on-reject"))


def test_setting_up_validates_first_and_tears_down_a_failed_start(
    nodes: dict[str, LocalNode],
) -> None:
    system = _Planted()
    with pytest.raises(ConfigError, match="no bug switch 'three'"):
        system.setup(nodes, SystemConfig(bugs=frozenset({"three"})))
    assert system.calls == []  # nothing started, nothing to tear down
    with pytest.raises(AdapterError, match=r"setting up system 'fake' failed:\nw1: \['false'\]"):
        system.setup(nodes, SystemConfig())
    assert system.calls == [("started",), ("teardown", "l1", "s1", "w1")]


def _sleeper_table() -> DaemonTable:
    """A lock daemon and an untargeted helper on l1, a store daemon on s1: each ready once its
    process runs."""

    def running(node: Node) -> CommandSucceeds:
        return CommandSucceeds("true", timeout=5.0)

    return DaemonTable(
        "fake",
        DaemonEntry("lockd", "lock", running),
        DaemonEntry("helper", "lock", running, targeted=False),
        DaemonEntry("stored", "store", running),
    )


def test_a_daemon_table_derives_targets_from_roles_and_refuses_a_daemon_it_lacks(
    nodes: dict[str, LocalNode],
) -> None:
    table = _sleeper_table()
    assert table.targets(nodes) == (
        ProcessTarget("lock", "l1", "lockd"),
        ProcessTarget("store", "s1", "stored"),
    )
    with pytest.raises(AdapterError, match="the fake system has no daemon 'ghost'"):
        table.restart(nodes["l1"], "ghost")


def test_a_daemon_table_starts_tears_down_and_restarts_on_the_same_command_line(
    nodes: dict[str, LocalNode],
) -> None:
    table = _sleeper_table()
    first = table.start(nodes["l1"], "lockd", ["sleep", "300"])
    assert nodes["l1"].process_state(first) not in (None, "Z", "X")
    table.tear_down(nodes)
    wait_dead(nodes["l1"], first)
    again = table.restart(nodes["l1"], "lockd")
    assert again.argv == first.argv and again.pid != first.pid
    table.tear_down(nodes)
    wait_dead(nodes["l1"], again)


def test_packages_beside_reads_the_list_beside_the_adapters_module(tmp_path: Path) -> None:
    (tmp_path / "packages.txt").write_text("# what the nodes need\npostgresql-15\netcd-server  \n")
    (tmp_path / "my_adapter.py").write_text(
        "from systems.kit import PackagesBeside\n\nclass MySystem(PackagesBeside):\n    pass\n"
    )
    spec = importlib.util.spec_from_file_location("my_adapter", tmp_path / "my_adapter.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["my_adapter"] = module  # where inspect looks for the class's file
    try:
        spec.loader.exec_module(module)

        class Variant(module.MySystem):  # type: ignore[misc]
            """Defined here, beside no package list: it keeps its parent's."""

        assert module.MySystem().packages() == ("postgresql-15", "etcd-server")
        assert Variant().packages() == ("postgresql-15", "etcd-server")
    finally:
        del sys.modules["my_adapter"]


def test_the_systems_package_is_the_one_import_of_an_adapter() -> None:
    import systems
    import systems.base
    import systems.kit

    for name in (*systems.base.__all__, *systems.kit.__all__, "deploy", "Node", "PortOpen"):
        assert name in systems.__all__ and hasattr(systems, name), name
    template = Path(systems.__file__).parent / "templates/new_system/adapter.py.tmpl"
    imports = [
        line for line in template.read_text().splitlines() if line.startswith(("from ", "import "))
    ]
    assert all(
        line.startswith(
            (
                "from systems import",
                "from ${package}",
                "from __future__",
                "from collections",
                "from pathlib",
                "from typing",
            )
        )
        for line in imports
    ), imports


def test_a_daemon_table_answers_one_readiness_check_of_a_daemon(
    nodes: dict[str, LocalNode],
) -> None:
    def answers(node: Node) -> CommandSucceeds:
        return CommandSucceeds("true", timeout=5.0)

    def refuses(node: Node) -> CommandSucceeds:
        return CommandSucceeds("false", timeout=5.0)

    table = DaemonTable(
        "fake",
        DaemonEntry("lockd", "lock", answers),
        DaemonEntry("stored", "store", answers, ready_again=refuses),
    )
    assert table.serves(nodes["l1"], "lockd") is True
    assert table.serves(nodes["s1"], "stored") is False, "after a restart, ready_again decides"
    assert table.serves(nodes["l1"], "ghost") is None
