"""The viewer page of a trace in memory: one self-contained, offline HTML page.

The page is the template in this package with the stylesheet, the script and the
trace data inlined. The trace travels as JSON inside a
``<script type="application/json">`` element and the script builds the page with
``textContent`` only, so nothing in a trace is ever parsed as HTML. A
Content-Security-Policy with hashes of our own script and stylesheet forbids
everything else (other scripts, network requests), as a second line of defence.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import html
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from .._encode import dumps

__all__ = ["GENERATOR_MARKER", "TraceLike", "embed_json", "is_viewer_html", "render_page"]

#: Present in every page we generate; ``ststrace view`` only replaces files that carry it.
GENERATOR_MARKER = '<meta name="generator" content="ststrace">'


class TraceLike(Protocol):
    header: dict[str, Any]
    messages: list[dict[str, Any]]


# In a <script> element the HTML parser looks only for "</script" (and "<!--"),
# so escaping "<" is what keeps trace text from ending the element. ">" and "&"
# are escaped too for old parsers; U+2028/U+2029 for pre-ES2019 JavaScript.
# All five can only occur inside JSON strings, where \uXXXX means the same.
_JSON_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}

_PLACEHOLDER = re.compile(r"\{\{(CSP|TITLE|CSS|JS|DATA)\}\}")


def embed_json(obj: Any) -> str:
    """JSON text that is safe to place inside a ``<script>`` element."""
    return dumps(obj).decode("utf-8").translate(_JSON_ESCAPES)


_SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.M)


@lru_cache(maxsize=1)
def _assets() -> tuple[str, str, str]:
    pkg = resources.files(__package__ or "ststrace._view")
    # marked (vendor/README.md) goes first in the page's one script: only its
    # lexer is used, and viewer.js builds the DOM from its tokens. Its source-map
    # comment is dropped so that no developer tool asks for a file we do not ship.
    marked = _SOURCE_MAP.sub("", pkg.joinpath("vendor").joinpath("marked.umd.js").read_text(encoding="utf-8"))
    return (
        pkg.joinpath("template.html").read_text(encoding="utf-8"),
        pkg.joinpath("viewer.css").read_text(encoding="utf-8"),
        marked.rstrip() + "\n" + pkg.joinpath("viewer.js").read_text(encoding="utf-8"),
    )


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ststrace")
    except Exception:
        return ""


def render_page(
    trace: TraceLike,
    *,
    title: str | None = None,
    links: dict[str, Any] | None = None,
    note: str | None = None,
    info: dict[str, Any] | None = None,
    lines: list[int] | None = None,
    branches: list[dict[str, Any]] | None = None,
) -> str:
    """The viewer page for *trace* (see :func:`ststrace._view.render_html`).

    *info*, *lines* and *branches* are what the file reader knows beside the
    messages (file name and size, each message's file line, a tree's side
    branches); this module never reads a file, so the notebook repr of a
    ``Trace`` (which ``_reader`` gives) does not import the reader back."""
    info = dict(info) if info else {}
    if "file" not in info:
        src_path = getattr(trace, "path", None)
        if isinstance(src_path, Path):
            info["file"] = src_path.name
    header = trace.header if isinstance(trace.header, dict) else {}
    messages = list(trace.messages)
    if lines is not None and len(lines) != len(messages):
        lines = None
    if note:
        info["note"] = note
    info["generated"] = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()
    version = _version()
    if version:
        info["version"] = version

    data: dict[str, Any] = {"header": header, "messages": messages, "source": info}
    outcome = getattr(trace, "outcome", None)
    if isinstance(outcome, dict):
        # Shown in the header card: what was set (Session.outcome, ststrace outcome).
        kept = {k: v for k, v in outcome.items() if v is not None and v != {}}
        if kept:
            data["outcome"] = kept
    if lines is not None:
        data["lines"] = lines
    if branches:
        data["branches"] = branches
    if links:
        # Sub-agent pages (``ststrace view DIR``): {"parent": ref, "children": [ref]},
        # ref = {"id", "name"?, "href", "parentToolCallId"?}; hrefs relative to this page.
        data["links"] = links

    template, css, js = _assets()
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_sha256(js)}",
            f"style-src {_sha256(css)}",
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    if title is None:
        name = header.get("name")
        title = f"{name if isinstance(name, str) and name else header.get('id', 'Session')} · ststrace"
    values = {
        "CSP": csp,
        "TITLE": html.escape(str(title), quote=True),
        "CSS": css,
        "JS": js,
        "DATA": embed_json(data),
    }
    # One pass, so text inserted for one placeholder is never scanned for another.
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def is_viewer_html(path: str | os.PathLike[str]) -> bool:
    """True when *path* is a page written by :func:`render_html` (safe to replace)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2048)
    except OSError:
        return False
    return GENERATOR_MARKER.encode("ascii") in head
