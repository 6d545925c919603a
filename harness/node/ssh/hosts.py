"""The hosts file: which real machines a run uses, how to log in to them, and their roles.

A TOML file with an optional ``[ssh]`` table of defaults and one ``[[host]]`` table per node::

    [ssh]
    user = "root"                      # default login user; not root means `sudo -n` is used
    key = "~/.ssh/id_ed25519"          # default private key
    known_hosts = "~/.ssh/known_hosts" # host keys are verified against this file
    accept_new = false                 # true: record unknown host keys on first contact

    [[host]]
    address = "10.0.0.11"              # where the controller reaches it over SSH
    role = "lock"
    name = "l1"                        # optional; default: role initial + index (l1, s1, w1...)
    # port, user, key: per-host overrides; ip: the address the other hosts use for it
    # (default: address, resolved by the controller)

Relative paths are taken from the hosts file's folder; ``~`` is expanded.
"""

from __future__ import annotations

import ipaddress
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from harness.node import NodeError

__all__ = ["HostSpec", "HostsError", "HostsFile", "load_hosts"]

_HOST_KEYS: Final = frozenset({"address", "role", "name", "port", "user", "key", "ip"})
_SSH_KEYS: Final = frozenset({"user", "key", "port", "known_hosts", "accept_new"})


class HostsError(NodeError):
    """The hosts file cannot be used; the message names the file, the entry and the fix."""


@dataclass(frozen=True, slots=True)
class HostSpec:
    """One host of the hosts file, with the defaults of ``[ssh]`` filled in."""

    name: str
    role: str
    address: str
    port: int
    user: str
    key: Path | None
    ip: str
    """The IPv4 address the other hosts reach this one at (used by partitions and adapters)."""


@dataclass(frozen=True, slots=True)
class HostsFile:
    """A loaded hosts file: its hosts in file order and how their host keys are verified."""

    path: Path
    hosts: tuple[HostSpec, ...]
    known_hosts: Path | None
    """Host keys are checked against this file; ``None`` means the user's ``~/.ssh/known_hosts``."""
    accept_new: bool
    """Whether an unknown host key is recorded (into ``known_hosts``) instead of refused."""

    def roles(self) -> dict[str, str]:
        """Node name -> role, in file order."""
        return {host.name: host.role for host in self.hosts}


def load_hosts(path: Path) -> HostsFile:
    """Read and validate a hosts file (raises :class:`HostsError` naming the problem and fix)."""
    try:
        data = tomllib.loads(path.read_text())
    except OSError as problem:
        raise HostsError(f"cannot read hosts file {path}: {problem.strerror}") from None
    except tomllib.TOMLDecodeError as problem:
        raise HostsError(f"hosts file {path} is not valid TOML: {problem}") from None
    unknown = sorted(set(data) - {"ssh", "host"})
    if unknown:
        raise HostsError(f"{path}: unknown table(s) {', '.join(unknown)}; use [ssh] and [[host]]")
    defaults = _table(path, data.get("ssh", {}), "[ssh]", _SSH_KEYS)
    entries = data.get("host", [])
    if not isinstance(entries, list) or not entries:
        raise HostsError(f"{path}: no hosts; add one [[host]] table per machine (address, role)")
    base = path.parent
    hosts = [_host(path, base, index, entry, defaults) for index, entry in enumerate(entries)]
    hosts = _named(path, hosts)
    known = defaults.get("known_hosts")
    return HostsFile(
        path=path,
        hosts=tuple(hosts),
        known_hosts=_path(base, _text(path, "[ssh]", "known_hosts", known)) if known else None,
        accept_new=_flag(path, defaults.get("accept_new", False)),
    )


def _table(path: Path, raw: Any, where: str, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise HostsError(f"{path}: {where} must be a table")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise HostsError(
            f"{path}: {where} has unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    return dict(raw)


def _host(path: Path, base: Path, index: int, raw: Any, defaults: Mapping[str, Any]) -> HostSpec:
    where = f"host #{index + 1}"
    entry = _table(path, raw, where, _HOST_KEYS)
    for required in ("address", "role"):
        if required not in entry:
            raise HostsError(f'{path}: {where} has no {required!r}; add {required} = "..."')
    address = _text(path, where, "address", entry["address"])
    port = entry.get("port", defaults.get("port", 22))
    if not isinstance(port, int) or not 0 < port < 65536:
        raise HostsError(f"{path}: {where}: port {port!r} must be a number from 1 to 65535")
    key = entry.get("key", defaults.get("key"))
    return HostSpec(
        name=_text(path, where, "name", entry.get("name", "")) if "name" in entry else "",
        role=_text(path, where, "role", entry["role"]),
        address=address,
        port=port,
        user=_text(path, where, "user", entry.get("user", defaults.get("user", "root"))),
        key=_path(base, _text(path, where, "key", key)) if key is not None else None,
        ip=_ipv4(path, where, _text(path, where, "ip", entry.get("ip", address))),
    )


def _named(path: Path, hosts: list[HostSpec]) -> list[HostSpec]:
    """Give unnamed hosts ``<role initial><n>`` names and refuse duplicates."""
    counts: dict[str, int] = {}
    named = []
    for host in hosts:
        if host.name:
            named.append(host)
            continue
        initial = host.role[0]
        counts[initial] = counts.get(initial, 0) + 1
        named.append(_replace_name(host, f"{initial}{counts[initial]}"))
    names = [host.name for host in named]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise HostsError(
            f"{path}: host names must be unique; repeated: {', '.join(repeated)} "
            "(give each [[host]] its own name)"
        )
    return named


def _replace_name(host: HostSpec, name: str) -> HostSpec:
    return HostSpec(name, host.role, host.address, host.port, host.user, host.key, host.ip)


def _text(path: Path, where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise HostsError(f"{path}: {where}: {key} must be a non-empty string, not {value!r}")
    return value


def _flag(path: Path, value: Any) -> bool:
    if not isinstance(value, bool):
        raise HostsError(f"{path}: [ssh] accept_new must be true or false, not {value!r}")
    return value


def _path(base: Path, value: str) -> Path:
    return (base / Path(value).expanduser()).resolve()


def _ipv4(path: Path, where: str, address: str) -> str:
    """``address`` as an IPv4 literal, resolving a host name on the controller."""
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        pass
    try:
        return str(socket.getaddrinfo(address, None, socket.AF_INET)[0][4][0])
    except (OSError, IndexError):
        raise HostsError(
            f"{path}: {where}: cannot resolve {address!r} to an IPv4 address; "
            'give ip = "a.b.c.d" (the address the other hosts use for it)'
        ) from None
