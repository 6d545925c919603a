"""The ``--json`` outputs keep the shapes docs/json/*.schema.json document: ``check``, ``run``
(and ``analyze``), ``run-all`` and ``run-all --dry-run``, each validated as printed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

import harness.cli.run as run_module
import harness.cli.run_all as run_all_module
from harness.cli import main
from harness.record.spec import TestSpec as RunSpec  # not "Test*": pytest would collect it
from harness.run.judge import RunOutcome

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "json"


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schemas = {p.name: json.loads(p.read_text()) for p in SCHEMAS.glob("*.schema.json")}
    registry: Registry[Any] = Registry().with_resources(
        (f"fencecheck/{file}", Resource.from_contents(schema)) for file, schema in schemas.items()
    )
    schema = schemas[name]
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    with pytest.raises(SystemExit):
        main(argv)
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def faked(monkeypatch: pytest.MonkeyPatch, fake_runner: Callable[[RunSpec], RunOutcome]) -> None:
    """``run`` and ``run-all`` carry out fake runs (synthetic histories, the real checker)."""

    def run_test(spec: RunSpec, **_: object) -> RunOutcome:
        return fake_runner(spec)

    monkeypatch.setattr(run_module, "run_test", run_test)
    monkeypatch.setattr(run_all_module, "run_test", run_test)


@pytest.mark.parametrize("example", ["valid.jsonl", "stale-write.jsonl"])
def test_check_json_has_the_documented_shape(
    example: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _printed(["check", str(ROOT / "examples" / example), "--json"], capsys)
    _validator("check.schema.json").validate(data)


@pytest.mark.usefixtures("faked")
@pytest.mark.parametrize("bugs", [[], ["--bug", "store-skips-check"]])
def test_run_json_has_the_documented_shape(
    bugs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--store", str(tmp_path / "store"), "--no-progress", "--json", *bugs]
    _validator("run.schema.json").validate(_printed(argv, capsys))


@pytest.mark.usefixtures("faked")
def test_run_all_json_and_its_dry_run_have_the_documented_shapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run-all", "--bug", "none", "--bug", "store-skips-check", "--store", str(tmp_path)]
    validator = _validator("run-all.schema.json")
    results = _printed([*argv, "--json"], capsys)
    validator.validate(results)
    names = [r["name"] for r in results]
    assert names[0].startswith("row 01: reference [no bugs] ")
    assert names[1].startswith("row 02: reference [store-skips-check] ")
    dry = _printed([*argv, "--json", "--dry-run"], capsys)
    validator.validate(dry)
    assert [row["number"] for row in dry["rows"]] == [1, 2]
