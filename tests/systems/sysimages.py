"""A system's node image for the Docker tests: the node image plus the system's packages.txt.

Built with the Docker SDK on the recipe-hashed node image and tagged by a hash of the node tag and
the package list, so it is built once and reused until either changes.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from typing import Final

from harness.node.docker.engine import engine
from harness.node.docker.images import image_exists, node_image

__all__ = ["system_image"]

# Daemons' maintainer scripts would start them during the build without this (SYSTEMS.md).
_DOCKERFILE: Final = """\
ARG BASE
FROM ${BASE}
COPY packages.txt /tmp/packages.txt
RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \\
 && export DEBIAN_FRONTEND=noninteractive && apt-get update \\
 && sed 's/#.*//' /tmp/packages.txt | xargs apt-get install -y --no-install-recommends \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/packages.txt
CMD ["sleep", "infinity"]
"""


def system_image(packages: Path) -> str:
    """The tag of the image for a system whose package list is ``packages``, built if absent."""
    base = node_image()
    text = packages.read_bytes()
    digest = hashlib.sha256(base.encode() + b"\0" + text + _DOCKERFILE.encode()).hexdigest()[:12]
    tag = f"fencecheck-system:{digest}"
    if image_exists(tag):
        return tag
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", _DOCKERFILE.encode()), ("packages.txt", text)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    output = []
    for chunk in engine().api.build(
        fileobj=context,
        custom_context=True,
        tag=tag,
        buildargs={"BASE": base},
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
    ):
        if "error" in chunk:
            raise RuntimeError(f"building {tag} failed: {chunk['error']}\n{''.join(output[-30:])}")
        output.append(str(chunk.get("stream", "")))
    return tag
