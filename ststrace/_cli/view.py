"""``ststrace view``: a self-contained HTML page for a trace."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .._errors import TraceFormatError
from ._common import CliError, converted_note, describe, load_other, source_format, trace_file, trace_files, warn


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="trace file (.jsonl), or any session file convert reads (converted in memory); several files "
        "or a directory give one page each, with links between parent sessions and their sub-agents",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT.html",
        help="where to write the page ('-' for stdout); default: FILE with an .html suffix. "
        "With several traces: a directory for the pages",
    )
    p.add_argument("--open", action="store_true", help="open the page in the default web browser")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the default output file even if ststrace did not write it",
    )
    p.add_argument("--strict", action="store_true", help="fail on a torn last line instead of skipping it")


def _write_atomically(out: Path, text: str, mode: int) -> None:
    # A temp file + rename: a reader never sees half a page, and an existing
    # symlink at `out` is replaced rather than followed.
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def run(args: argparse.Namespace) -> int:
    _CONVERTED.clear()  # other agents' files, converted once per run
    if len(args.files) == 1 and not args.files[0].is_dir():
        return _one(args, trace_file(args.files[0]), None)
    return _many(args)


def _page_path(src: Path, out_dir: Path | None) -> Path:
    return (out_dir / src.name if out_dir is not None else src).with_suffix(".html")


def _many(args: argparse.Namespace) -> int:
    """One page per trace; each links to its parent and sub-agent sessions among them."""
    from .._reader import read_header

    sources = trace_files(args.files)
    out_dir: Path | None = None
    if args.output is not None:
        if args.output == "-":
            raise CliError("-o - (stdout) takes a single trace, not several")
        out_dir = Path(args.output)
        if not out_dir.is_dir():
            raise CliError(f"{out_dir}: with several traces, -o must name an existing directory")
        names = [src.name for src in sources]
        if len(set(names)) != len(names):
            raise CliError(f"{out_dir}: several traces share a file name; write their pages next to them (no -o)")
    failed = False
    headers: dict[Path, dict[str, Any]] = {}
    for src in sources:
        try:
            headers[src] = _converted(src)[0].header if source_format(src) != "sts" else read_header(src)
        except (CliError, OSError, TraceFormatError) as exc:
            warn("ststrace view", describe(exc))
            failed = True
    by_id = {h["id"]: src for src, h in headers.items() if isinstance(h.get("id"), str)}
    first: Path | None = None
    for src, header in headers.items():
        page = _page_path(src, out_dir)
        links = _links(src, header, headers, by_id, page.parent, out_dir)
        try:
            out = _one(args, src, links, quiet_open=True, page_path=page)
        except (CliError, OSError, TraceFormatError) as exc:
            warn("ststrace view", str(exc) if isinstance(exc, CliError) else describe(exc))
            failed = True
            continue
        if out == 0 and first is None and "parent" not in links:
            first = page
    if args.open and first is not None:
        _open_in_browser(first)
    return 1 if failed else 0


def _links(
    src: Path,
    header: dict[str, Any],
    headers: dict[Path, dict[str, Any]],
    by_id: dict[str, Path],
    page_dir: Path,
    out_dir: Path | None,
) -> dict[str, Any]:
    def ref(other: Path) -> dict[str, Any]:
        h = headers[other]
        rel = Path(os.path.relpath(_page_path(other, out_dir), page_dir)).as_posix()
        # Percent-encoded and anchored, so no file name can read as a URL scheme.
        href = quote(rel if rel.startswith("../") else "./" + rel, safe="/.")
        entry: dict[str, Any] = {"id": h.get("id"), "href": href}
        if isinstance(h.get("name"), str):
            entry["name"] = h["name"]
        if isinstance(h.get("parentToolCallId"), str):
            entry["parentToolCallId"] = h["parentToolCallId"]
        return entry

    links: dict[str, Any] = {}
    parent_id = header.get("parentSessionId")
    parent = by_id.get(parent_id) if isinstance(parent_id, str) else None
    if parent is not None and parent != src:
        links["parent"] = ref(parent)
    own_id = header.get("id")
    children = [ref(other) for other, h in headers.items() if other != src and h.get("parentSessionId") == own_id]
    if children:
        links["children"] = children
    return links


_CONVERTED: dict[Path, list[Any]] = {}


def _converted(src: Path) -> list[Any]:
    """Another agent's file as traces, converted once per run (the header is needed before the page)."""
    key = src.resolve()
    if key not in _CONVERTED:
        traces = load_other(src, source_format(src))
        for t in traces:
            t.path = src
        _CONVERTED[key] = traces
    return _CONVERTED[key]


def _open_in_browser(out: Path) -> None:
    import webbrowser

    if not webbrowser.open(out.resolve().as_uri()):
        warn("ststrace view", f"could not start a web browser; open {out} yourself")


def _one(
    args: argparse.Namespace,
    src: Path,
    links: dict[str, Any] | None,
    quiet_open: bool = False,
    page_path: Path | None = None,
) -> int:
    from .._view import is_viewer_html, render_html

    fmt = source_format(src)
    if fmt == "sts":
        page = render_html(src, strict=args.strict, links=links)
    else:
        traces = _converted(src)
        if len(traces) > 1:
            warn("ststrace view", f"{src}: holds {len(traces)} sessions; the page shows the first ({traces[0].id}); "
                 "ststrace convert writes each one")
        page = render_html(traces[0], links=links, note=converted_note(fmt))
    if args.output == "-":
        if args.open:
            raise CliError("--open needs a file; it cannot be used with -o -")
        sys.stdout.write(page)
        return 0
    explicit = args.output is not None and page_path is None
    out = page_path if page_path is not None else (Path(args.output) if explicit else src.with_suffix(".html"))
    if out.exists():
        if out.is_dir():
            raise CliError(f"{out}: is a directory")
        if out.samefile(src):
            raise CliError(f"{out}: is the trace itself; choose another output with -o")
        # The default name is only a guess, so it replaces nothing but an earlier
        # page of ours; a name given with -o is the user's explicit choice.
        if not explicit and not args.force and not is_viewer_html(out):
            raise CliError(f"{out}: exists and was not written by ststrace; choose another name with -o or use --force")
    if not out.parent.is_dir():
        raise CliError(f"{out.parent}: no such directory")
    # The page holds everything the trace holds, so it gets the trace's permissions.
    mode = src.stat().st_mode & 0o666
    _write_atomically(out, page, mode)
    print(out)
    if args.open and not quiet_open:
        _open_in_browser(out)
    return 0
