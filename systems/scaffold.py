"""``fencecheck new-system``: a new adapter package that passes ``adapter check`` as generated.

The package (``fencecheck-NAME``) holds the adapter, its holder client, a minimal lock service
and fenced store standing in for the real system, its Debian package list, a test that runs
``fencecheck adapter check NAME``, a README and ``py.typed``. The templates live in
``systems/templates/new_system``.
"""

from __future__ import annotations

import json
import re
from importlib import metadata
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


def fencecheck_requirement() -> str:
    """The new package's dependency on fencecheck, as this fencecheck was installed: fencecheck
    is no package on PyPI, so a bare ``fencecheck`` could not be installed by name. An install
    from a checkout or a wheel file (PEP 610's ``direct_url.json``) gives ``fencecheck @ URL``;
    otherwise the installed version is pinned, to be satisfied by what is already installed."""
    # A checkout's own fencecheck.egg-info (on sys.path from the working directory) has no
    # direct_url.json: look at every installed copy, not only the first.
    found = list(metadata.distributions(name="fencecheck"))
    for copy in found:
        origin = copy.read_text("direct_url.json")
        url = json.loads(origin).get("url") if origin else None
        if isinstance(url, str) and url:
            return f"fencecheck @ {url}"
    return f"fencecheck=={found[0].version}" if found else "fencecheck"


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
        "fencecheck": fencecheck_requirement(),
    }
    for template, target in _LAYOUT.items():
        text = Template((TEMPLATES / template).read_text()).substitute(words)
        path = project / target.format(package=package)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (project / package / "py.typed").write_text("")
    return project
