"""Write docs/contract-reference.md from the code: every public name of the adapter contract
(``systems.__all__``, the adapter author's one import: ``systems.base``, ``systems.kit``,
``systems.deploy``, the node types...), grouped by the module that defines it, with its fields and
methods, their types and their docstrings, so an adapter author needs no ``inspect.signature`` or
``dir()``.

    python3 scripts/contract_reference.py          # rewrite the file
    python3 scripts/contract_reference.py --check  # exit 1 when the file differs (CI, tests)

The output depends on nothing but the code (no addresses, no paths), so a regeneration of an
unchanged tree gives the same bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
TARGET: Final = ROOT / "docs" / "contract-reference.md"
_ORDER: Final = ("systems.base", "systems.kit", "systems.deploy", "systems.registry")
"""The contract's own modules first, in this order; the others (node types...) after them."""
_CONSTANT_HOMES: Final = ("systems.base", "systems.kit", "systems.registry", "systems.holder_flaws")

_HEAD: Final = """# The adapter contract: reference

Generated from the code by `python3 scripts/contract_reference.py` (a test fails when this file
differs from a regeneration: edit the docstrings, not this file). The guide,
[adding-a-system.md](adding-a-system.md), says how the pieces fit; this page lists every public
name the `systems` package exports (`from systems import ...`, the adapter author's one import),
grouped by the module that defines it, with its fields, methods, types and docstrings.
"""


def _doc(thing: Any) -> str:
    text = inspect.getdoc(thing) or ""
    return text.strip()


def _quote(text: str) -> list[str]:
    return [text, ""] if text else []


def _annotation(annotation: Any) -> str:
    """An annotation as written (they are strings under ``from __future__ import annotations``)."""
    if isinstance(annotation, str):
        return annotation
    return getattr(annotation, "__name__", repr(annotation))


def _signature(thing: Any) -> str:
    """``(name: type = default, ...) -> type``, with the types as the code writes them."""
    try:
        signature = inspect.signature(thing)
    except (TypeError, ValueError):
        return "(...)"
    parts: list[str] = []
    star = False
    for param in signature.parameters.values():
        if param.kind is param.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
        star = star or param.kind is param.VAR_POSITIONAL
        text = prefix + param.name
        if param.annotation is not param.empty:
            text += f": {_annotation(param.annotation)}"
        if param.default is not param.empty:
            text += f" = {param.default!r}"
        parts.append(text)
    returns = signature.return_annotation
    arrow = "" if returns is signature.empty else f" -> {_annotation(returns)}"
    return f"({', '.join(parts)}){arrow}"


def _default(spec_field: dataclasses.Field[Any]) -> str:
    if spec_field.default is not dataclasses.MISSING:
        return f" = {spec_field.default!r}"
    if spec_field.default_factory is not dataclasses.MISSING:
        return " = (a new one per instance)"
    return ""


def _own_members(cls: type) -> list[tuple[str, Any]]:
    """The public methods and properties ``cls`` itself defines (not inherited ones)."""
    members = []
    for name, member in vars(cls).items():
        if name.startswith("_") or name == "CONTRACT":
            continue
        if isinstance(member, property | staticmethod | classmethod) or inspect.isfunction(member):
            members.append((name, member))
    return members


def _class(name: str, cls: type) -> list[str]:
    kind = "protocol" if getattr(cls, "_is_protocol", False) else "class"
    if issubclass(cls, BaseException):
        kind = "exception"
    if dataclasses.is_dataclass(cls):
        kind = "dataclass"
    if issubclass(cls, enum.Enum):
        kind = "enum"
    bases = [b.__name__ for b in cls.__bases__ if b not in (object,) and b.__name__ != "Protocol"]
    lines = [f"### `{name}` ({kind})", ""]
    if bases:
        lines += [f"Based on: {', '.join(f'`{base}`' for base in bases)}.", ""]
    lines += _quote(_doc(cls))
    if dataclasses.is_dataclass(cls):
        lines += ["Fields:", ""]
        for spec_field in dataclasses.fields(cls):
            lines.append(f"- `{spec_field.name}: {spec_field.type}{_default(spec_field)}`")
        lines.append("")
    members = _own_members(cls)
    if members:
        lines += ["Methods and properties:", ""]
    for member_name, member in members:
        if isinstance(member, property):
            returns = inspect.signature(member.fget).return_annotation if member.fget else ""
            lines.append(f"- `{member_name}` (property) -> `{_annotation(returns)}`")
            doc = _doc(member)
        else:
            function = member.__func__ if isinstance(member, staticmethod | classmethod) else member
            lines.append(f"- `{member_name}{_signature(function)}`")
            doc = _doc(function)
        lines += [f"  {line}".rstrip() for line in doc.splitlines()]
    if members:
        lines.append("")
    return lines


def _value(name: str, value: Any) -> list[str]:
    shown = repr(value)
    if isinstance(value, ModuleType) or " at 0x" in shown:
        shown = type(value).__name__
    return [f"### `{name}` (constant)", "", f"`{name} = {shown}`", ""]


def _entry(name: str, thing: Any) -> list[str]:
    if inspect.isclass(thing):
        return _class(name, thing)
    if inspect.isfunction(thing):
        lines = [f"### `{name}` (function)", "", f"`{name}{_signature(thing)}`", ""]
        return lines + _quote(_doc(thing))
    return _value(name, thing)


def _home(name: str, thing: Any) -> str:
    """The module that defines ``thing`` (a constant: the first module of the contract that
    lists it)."""
    if inspect.isclass(thing) or inspect.isfunction(thing):
        return str(thing.__module__)
    if isinstance(thing, ModuleType):
        return thing.__name__
    for module_name in _CONSTANT_HOMES:
        if name in getattr(sys.modules.get(module_name), "__all__", ()):
            return module_name
    return "systems"


def render() -> str:
    """The whole reference page: every name of ``systems.__all__``, grouped by the module that
    defines it; a module it exports (``deploy``) gets a section of its own ``__all__``."""
    import importlib

    package = importlib.import_module("systems")
    groups: dict[str, list[str]] = {}
    for name in package.__all__:
        groups.setdefault(_home(name, getattr(package, name)), []).append(name)
    lines = [_HEAD]
    order = {name: number for number, name in enumerate(_ORDER)}
    for module_name in sorted(groups, key=lambda m: (order.get(m, len(order)), m)):
        module = importlib.import_module(module_name)
        names = groups[module_name]
        if any(isinstance(getattr(package, n), ModuleType) for n in names):
            names = list(module.__all__)  # an exported module: its own public names
        lines += [f"## `{module_name}`", "", *_quote(_doc(module))]
        for name in sorted(names, key=lambda n: (not inspect.isclass(getattr(module, n)), n)):
            lines += _entry(name, getattr(module, name))
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Rewrite the reference, or with ``--check`` say whether it is up to date."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(
                f"{TARGET.relative_to(ROOT)} differs from the code; "
                "run python3 scripts/contract_reference.py and commit it",
                file=sys.stderr,
            )
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
