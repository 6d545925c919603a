"""The container images, built offline from Debian packages and tagged by a hash of their recipe.

The base image is a ``debootstrap --variant=minbase`` tree imported into the engine (nothing is
pulled from a registry); the node image is built on it from ``docker/node/Dockerfile`` with the
packages of ``docker/node/packages.txt``; the sshd image (test hosts for the SSH backend) is built
on the node image from ``docker/sshd/``. A tag is the first 12 hex digits of a hash over the
recipe, so an image is rebuilt exactly when its recipe changes and reused otherwise.

A system whose nodes need more Debian packages (its ``packages.txt``) gets an image of its own,
built on the node image with those packages and tagged by a hash of the node tag and the package
list (:func:`system_image`); a system that needs nothing more runs on the node image itself.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import docker.errors

from harness.node.docker.engine import builder, engine

__all__ = [
    "BASE_REPOSITORY",
    "NODE_REPOSITORY",
    "RECIPES",
    "SYSTEM_REPOSITORY",
    "ImageError",
    "Progress",
    "base_image",
    "base_tag",
    "build_lock_path",
    "debian_mirror",
    "ensure_images",
    "image_exists",
    "node_image",
    "node_tag",
    "sshd_image",
    "sshd_tag",
    "system_image",
    "system_tag",
]

Progress = Callable[[str], None]
"""Receives one line of build output at a time (for a progress display)."""

BASE_REPOSITORY: Final = "fencecheck-base"
NODE_REPOSITORY: Final = "fencecheck-node"
SSHD_REPOSITORY: Final = "fencecheck-sshd"
SYSTEM_REPOSITORY: Final = "fencecheck-system"
_PACKAGE_NAME: Final = re.compile(r"[a-z0-9][a-z0-9+.-]+")
RECIPES: Final = Path(str(resources.files(__package__ or __name__) / "recipes"))
"""The folder of image recipes (``base.json``, ``node/``, ``sshd/``): the checkout's ``docker/``,
shipped in the wheel as package data."""
# Bump when the build procedure below changes in a way that changes the base image's contents.
_BASE_PROCEDURE: Final = 1
_MIRROR_ENV: Final = "FENCECHECK_DEBIAN_MIRROR"
_APT_SOURCES: Final = Path("/etc/apt")
_LOCK_NAME: Final = "fencecheck/images.lock"


class ImageError(RuntimeError):
    """An image could not be built; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class _BaseRecipe:
    suite: str
    variant: str
    components: tuple[str, ...]
    include: tuple[str, ...]
    env: tuple[str, ...]

    @classmethod
    def load(cls) -> _BaseRecipe:
        path = RECIPES / "base.json"
        try:
            data: dict[str, Any] = json.loads(path.read_text())
            return cls(
                suite=str(data["suite"]),
                variant=str(data["variant"]),
                components=tuple(data["components"]),
                include=tuple(data["include"]),
                env=tuple(data["env"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as problem:
            raise ImageError(
                f"cannot read the base recipe {path}: {problem}; it needs suite, variant, "
                "components, include and env"
            ) from problem


def _digest(parts: list[bytes]) -> str:
    sha = hashlib.sha256()
    for part in parts:
        # Length-prefixed so that moving bytes between parts changes the hash.
        sha.update(len(part).to_bytes(8, "big"))
        sha.update(part)
    return sha.hexdigest()[:12]


def base_tag() -> str:
    """The tag the base image has for the current recipe, e.g. ``fencecheck-base:1a2b3c4d5e6f``."""
    recipe = _BaseRecipe.load()
    text = json.dumps([_BASE_PROCEDURE, dataclasses.asdict(recipe)], sort_keys=True)
    return f"{BASE_REPOSITORY}:{_digest([text.encode()])}"


def node_tag() -> str:
    """The tag the node image has for the current recipe (which includes the base's tag)."""
    return _recipe_tag("node", NODE_REPOSITORY, base_tag())


def sshd_tag() -> str:
    """The tag the sshd test-host image has for the current recipe (which includes the node's)."""
    return _recipe_tag("sshd", SSHD_REPOSITORY, node_tag())


def _recipe_tag(recipe: str, repository: str, parent: str) -> str:
    """``repository:hash`` over the parent image's tag and every file of ``docker/<recipe>/``."""
    folder = RECIPES / recipe
    parts = [parent.encode()]
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        parts += [str(path.relative_to(folder)).encode(), path.read_bytes()]
    return f"{repository}:{_digest(parts)}"


def image_exists(tag: str) -> bool:
    """Whether the engine has an image called ``tag``."""
    try:
        engine().images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def debian_mirror(suite: str = "bookworm", apt_dir: Path = _APT_SOURCES) -> str:
    """The Debian mirror this machine's apt uses for ``suite``.

    ``$FENCECHECK_DEBIAN_MIRROR`` wins; otherwise ``sources.list`` (one-line format) and
    ``sources.list.d/*.list`` / ``*.sources`` (deb822) are read, and the first enabled ``deb``
    entry that serves exactly ``suite`` is taken.
    """
    override = os.environ.get(_MIRROR_ENV)
    if override:
        return override.rstrip("/")
    files = [apt_dir / "sources.list"]
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        files += sorted(p for p in parts.iterdir() if p.suffix in (".list", ".sources"))
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        entries = _deb822_entries(text) if path.suffix == ".sources" else _one_line_entries(text)
        for uri, suites in entries:
            if suite in suites:
                return uri.rstrip("/")
    raise ImageError(
        f"no Debian mirror for {suite} in {apt_dir}/sources.list or sources.list.d; "
        f"set {_MIRROR_ENV}=http://deb.debian.org/debian (or your mirror)"
    )


def _one_line_entries(text: str) -> Iterator[tuple[str, list[str]]]:
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        # Options in brackets ("[arch=amd64 signed-by=...]") may contain spaces.
        line = re.sub(r"\[[^\]]*\]", " ", line)
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "deb":
            yield fields[1], [fields[2]]


def _deb822_entries(text: str) -> Iterator[tuple[str, list[str]]]:
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for raw in stanza.splitlines():
            if raw.startswith("#") or not raw.strip():
                continue
            if raw[0] in " \t" and key:
                fields[key] += " " + raw.strip()
                continue
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        suites = fields.get("suites", "").split()
        for uri in fields.get("uris", "").split():
            yield uri, suites


def build_lock_path() -> Path:
    """The build lock: in the invoking user's own cache folder (``$XDG_CACHE_HOME``, else
    ``~/.cache``), where no other user can create or lock it; a shared ``/tmp`` file let anyone
    ``flock`` it and hold every build back for ever."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / _LOCK_NAME


@contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time for this user, so parallel test runs do not build twice.

    The file is opened without following a symlink (one planted there would lock, or create,
    another file) and must belong to this user.
    """
    path = build_lock_path()
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(path, flags, 0o600)
    except OSError as problem:
        raise ImageError(
            f"cannot open the image build lock {path}: {problem.strerror or problem} (a symlink "
            "there is refused); remove it, or set XDG_CACHE_HOME to a folder of your own"
        ) from None
    try:
        if os.fstat(descriptor).st_uid != os.geteuid():
            raise ImageError(
                f"the image build lock {path} belongs to another user; remove it, or set "
                "XDG_CACHE_HOME to a folder of your own"
            )
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def base_image(progress: Progress | None = None) -> str:
    """The tag of the current base image, debootstrapped and imported if absent."""
    tag = base_tag()
    if image_exists(tag):
        return tag
    with _build_lock():
        if not image_exists(tag):
            _build_base(tag, progress or _quiet)
    return tag


def _build_base(tag: str, progress: Progress) -> None:
    recipe = _BaseRecipe.load()
    if os.geteuid() != 0:
        raise ImageError("building the base image runs debootstrap, which needs root; use sudo")
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is missing; install it with `apt-get install -y debootstrap`")
    mirror = debian_mirror(recipe.suite)
    progress(f"debootstrap {recipe.variant} {recipe.suite} from {mirror}")
    with tempfile.TemporaryDirectory(prefix="fencecheck-rootfs-", dir="/var/tmp") as scratch:
        rootfs = Path(scratch) / "rootfs"
        command = [
            "debootstrap",
            f"--variant={recipe.variant}",
            f"--components={','.join(recipe.components)}",
        ]
        if recipe.include:
            command.append(f"--include={','.join(recipe.include)}")
        _stream([*command, recipe.suite, str(rootfs), mirror], progress, "debootstrap")
        # Package caches are dead weight in every container; the node build refreshes lists.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / leftover).glob("*"):
                if entry.is_file():
                    entry.unlink()
        progress(f"importing {tag}")
        repository, _, version = tag.partition(":")
        with subprocess.Popen(
            ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."],
            stdout=subprocess.PIPE,
        ) as tar:
            assert tar.stdout is not None
            try:
                builder().api.import_image_from_stream(
                    tar.stdout,
                    repository=repository,
                    tag=version,
                    changes=[f"ENV {item}" for item in recipe.env] + ['CMD ["bash"]'],
                )
            except docker.errors.APIError as problem:
                raise ImageError(f"the engine refused to import {tag}: {problem}") from problem
            except BaseException:
                tar.kill()
                raise
        if tar.returncode != 0:
            raise ImageError(
                f"packing the root filesystem for {tag} failed (tar exit {tar.returncode})"
            )
    if not image_exists(tag):
        raise ImageError(f"{tag} is not on the engine after the import; see `docker images`")


def node_image(progress: Progress | None = None) -> str:
    """The tag of the current node image, built (with its base) if absent."""
    return _ensure("node", node_tag(), lambda: base_image(progress), progress)


def sshd_image(progress: Progress | None = None) -> str:
    """The tag of the current sshd test-host image, built (with the node image) if absent."""
    return _ensure("sshd", sshd_tag(), lambda: node_image(progress), progress)


def _ensure(recipe: str, tag: str, parent: Callable[[], str], progress: Progress | None) -> str:
    """``tag``, built from ``docker/<recipe>/`` on ``parent()`` (built first) if absent."""
    if image_exists(tag):
        return tag
    base = parent()
    with _build_lock():
        if not image_exists(tag):
            _build_recipe(recipe, tag, base, progress or _quiet)
    return tag


def system_tag(packages: Sequence[str]) -> str:
    """The tag of a system's image: the node image plus ``packages`` (the node tag itself when
    there are none). Raises :class:`ImageError` for a name that is not a Debian package name."""
    wanted = sorted(set(packages))
    bad = [name for name in wanted if not _PACKAGE_NAME.fullmatch(name)]
    if bad:
        raise ImageError(
            f"{', '.join(map(repr, bad))} is not a Debian package name; fix the system's "
            "packages.txt (one package a line, # for comments)"
        )
    if not wanted:
        return node_tag()
    parts = [node_tag().encode(), *(name.encode() for name in wanted)]
    return f"{SYSTEM_REPOSITORY}:{_digest(parts)}"


def system_image(packages: Sequence[str], progress: Progress | None = None) -> str:
    """The tag of the image for a system needing ``packages``, built (on the node image) if
    absent."""
    tag = system_tag(packages)
    node = node_image(progress)
    if tag == node or image_exists(tag):
        return tag
    with _build_lock(), tempfile.TemporaryDirectory(prefix="fencecheck-system-") as folder:
        if not image_exists(tag):
            context = Path(folder)
            (context / "Dockerfile").write_text((RECIPES / "node" / "Dockerfile").read_text())
            (context / "packages.txt").write_text("\n".join(sorted(set(packages))) + "\n")
            _build_recipe("node", tag, node, progress or _quiet, context)
    return tag


def _build_recipe(
    recipe: str, tag: str, base: str, progress: Progress, context: Path | None = None
) -> None:
    """Build ``docker/<recipe>/`` (or ``context``, a copy of it) as ``tag`` with ``base`` as its
    BASE build argument."""
    progress(f"building {tag} on {base}")
    output: list[str] = []
    try:
        for chunk in builder().api.build(
            path=str(context or RECIPES / recipe),
            tag=tag,
            buildargs={"BASE": base},
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
        ):
            if "error" in chunk:
                tail = "".join(output[-30:])
                raise ImageError(
                    f"building {tag} failed: {chunk['error'].strip()}\n{tail}\n"
                    f"check the package list (docker/{recipe}/packages.txt or the system's "
                    "packages.txt) for a misspelt package and that the Debian mirror answers"
                )
            for line in str(chunk.get("stream", "")).splitlines(keepends=True):
                output.append(line)
                if line.strip():
                    progress(line.rstrip())
    except docker.errors.APIError as problem:
        raise ImageError(f"the engine could not build {tag}: {problem}") from problem


def ensure_images(progress: Progress | None = None) -> list[str]:
    """Build every image whose recipe changed; returns the current tags (base, node)."""
    return [base_image(progress), node_image(progress)]


def _stream(command: list[str], progress: Progress, what: str) -> None:
    """Run ``command``, passing each output line to ``progress``; raise with the tail on failure."""
    tail: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        try:
            for line in process.stdout:
                tail = [*tail[-40:], line]
                progress(line.rstrip())
        except BaseException:
            process.kill()  # a stop signal: the build ends with the controller, not minutes later
            raise
    if process.returncode != 0:
        raise ImageError(
            f"{what} failed (exit {process.returncode}):\n{''.join(tail)}"
            "check that the Debian mirror answers (`apt-get update`)"
        )


def _quiet(line: str) -> None:
    """The progress callback used when none is given."""
