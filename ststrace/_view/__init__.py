"""Render a trace as one self-contained, offline HTML page.

The page itself is built by :mod:`ststrace._view.page` from a trace in memory;
this module adds reading one from a file (with the file's line numbers and a
tree's side branches). The trace travels as JSON inside a
``<script type="application/json">`` element and the script builds the page with
``textContent`` only, so nothing in a trace is ever parsed as HTML. A
Content-Security-Policy with hashes of our own script and stylesheet forbids
everything else (other scripts, network requests), as a second line of defence.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .page import GENERATOR_MARKER, TraceLike, embed_json, is_viewer_html, render_page

__all__ = ["GENERATOR_MARKER", "TraceLike", "embed_json", "is_viewer_html", "render_html"]


def _line_numbers(path: Path) -> list[int] | None:
    """File line of each message, or None when it is simply index + 2.

    The reader skips blank lines and outcome lines, so only a file with those needs the table.
    """
    lines: list[int] = []
    shifted = False
    n_line = 0
    with open(path, "rb") as f:
        for n_line, raw in enumerate(f, 1):
            if not raw.strip() or raw.startswith(b'{"type":"outcome"'):  # not messages
                shifted = True
                continue
            lines.append(n_line)
    if not shifted:
        return None
    return lines[1:]  # drop the header


def render_html(
    source: str | os.PathLike[str] | TraceLike,
    *,
    strict: bool = False,
    title: str | None = None,
    links: dict[str, Any] | None = None,
    note: str | None = None,
) -> str:
    """Return the viewer page for a trace file path or an in-memory trace.

    With a path, the file is read with :func:`ststrace.read` (``strict=False`` by
    default, so the torn last line of a crashed run is skipped, not fatal);
    :class:`ststrace.TraceFormatError` and ``OSError`` propagate to the caller.
    *note* says where the trace came from when it is not the file as it is
    ("converted in memory from a Codex session").
    """
    info: dict[str, Any] = {}
    lines: list[int] | None = None
    branches: list[dict[str, Any]] = []
    if isinstance(source, (str, os.PathLike)):
        from .._reader import read_tree
        from .._tree import is_tree, resolve, side_branches

        path = Path(source)
        trace: TraceLike = read_tree(path, strict=strict)
        info["file"] = path.name
        try:
            info["bytes"] = path.stat().st_size
            lines = _line_numbers(path)
        except OSError:
            pass
        every = trace.messages
        shown = resolve(trace.header, every)
        if shown is not every:
            # A llama.app tree: the path llama.app shows (no placeholder root),
            # the other branches beside it, each message with its own file line.
            file_lines = lines if lines is not None and len(lines) == len(every) else [i + 2 for i in range(len(every))]
            line_of = {id(m): n for m, n in zip(every, file_lines)}
            if is_tree(trace.header, every):
                branches = side_branches(trace.header, every)
            trace.messages = shown
            lines = [line_of[id(m)] for m in shown]
    else:
        trace = source
    return render_page(trace, title=title, links=links, note=note, info=info, lines=lines, branches=branches)
