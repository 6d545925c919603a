"""``fencecheck new-system``: a new adapter package that passes ``adapter check`` as generated.

The package (``fencecheck-NAME``) holds the adapter, its holder client, a minimal lock service
and fenced store standing in for the real system, its Debian package list, a test that runs
``fencecheck adapter check NAME``, a README and ``py.typed``. The templates live in
``systems/templates/new_system``.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template
from typing import Final

from systems.base import ConfigError

__all__ = ["TEMPLATES", "package_name", "scaffold"]

TEMPLATES: Final = Path(__file__).with_name("templates") / "new_system"
_NAME: Final = re.compile(r"[a-z][a-z0-9-]{0,30}")
# Template file -> where it goes, relative to the new project ({package} is filled in).
_LAYOUT: Final = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "__init__.py.tmpl": "{package}/__init__.py",
    "adapter.py.tmpl": "{package}/adapter.py",
    "client.py.tmpl": "{package}/client.py",
    "server.py.tmpl": "{package}/server.py",
    "packages.txt.tmpl": "{package}/packages.txt",
    "test_contract.py.tmpl": "tests/test_contract.py",
}


def package_name(name: str) -> str:
    """The Python package of system ``name``: ``fencecheck_`` plus the name, ``-`` as ``_``."""
    return "fencecheck_" + name.replace("-", "_")


def scaffold(name: str, directory: Path) -> Path:
    """Write the project of system ``name`` into ``directory/fencecheck-NAME``; return its path.

    Raises :class:`ConfigError` for a name that is not lowercase letters, digits and ``-``, or a
    project folder that already exists (nothing is overwritten).
    """
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"system name {name!r} must be lowercase letters, digits and '-', starting with a "
            "letter (it names the command-line system and the entry point), e.g. my-lock"
        )
    project = directory / f"fencecheck-{name}"
    if project.exists():
        raise ConfigError(f"{project} already exists; remove it or choose another --dir")
    package = package_name(name)
    words = {
        "name": name,
        "package": package,
        "classname": "".join(part.capitalize() for part in name.split("-")) + "System",
    }
    for template, target in _LAYOUT.items():
        text = Template((TEMPLATES / template).read_text()).substitute(words)
        path = project / target.format(package=package)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (project / package / "py.typed").write_text("")
    return project
