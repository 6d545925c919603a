"""The shell of a self-contained HTML page: inline styles, inline scripts, embedded JSON data.

Nothing in a page refers to another file or the network, so a report mailed, attached to a CI
run or opened from a laptop years later looks the same. The stylesheets and scripts are package
files under ``assets/``; the data is JSON in a ``<script type="application/json">`` element,
escaped so that no string in it can close the element.
"""

from __future__ import annotations

import html
from importlib import resources
from pathlib import Path
from typing import Any, Final

from harness.record import json_bytes
from harness.run.store import atomic_write

__all__ = ["DATA_ELEMENT_ID", "asset", "embed_json", "page", "write_file"]

DATA_ELEMENT_ID: Final = "fc-data"


def asset(name: str) -> str:
    """The text of ``harness/report/assets/<name>``."""
    return resources.files("harness.report").joinpath("assets", name).read_text("utf-8")


def embed_json(data: Any) -> str:
    """``data`` as compact JSON that is safe inside a ``<script>`` element.

    ``<``, ``>`` and ``&`` only ever occur inside JSON strings, where their ``\\u`` escapes mean
    the same thing to ``JSON.parse`` but can never form ``</script>`` or an HTML comment.
    """
    raw = json_bytes(data)
    return (
        raw.replace(b"<", b"\\u003c")
        .replace(b">", b"\\u003e")
        .replace(b"&", b"\\u0026")
        .decode("utf-8")
    )


def page(
    title: str,
    body: str,
    *,
    styles: tuple[str, ...] = ("base.css",),
    scripts: tuple[str, ...] = (),
    data: Any = None,
) -> str:
    """A whole HTML document with ``body`` and the named assets inlined."""
    css = "\n".join(asset(name) for name in styles)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No request may leave the page: not even for a favicon.
        '<link rel="icon" href="data:,">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        f"<title>{html.escape(title)}</title>",
        f"<style>\n{css}\n</style>",
        "</head>",
        "<body>",
        body,
    ]
    if data is not None:
        parts.append(
            f'<script type="application/json" id="{DATA_ELEMENT_ID}">{embed_json(data)}</script>'
        )
    parts.extend(f"<script>\n{asset(name)}\n</script>" for name in scripts)
    parts.extend(["</body>", "</html>", ""])
    return "\n".join(parts)


def write_file(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, so a browser or CI never reads half a file."""
    atomic_write(path, text.encode("utf-8"))
    return path
