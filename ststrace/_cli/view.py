"""``ststrace view``: a self-contained HTML page for a trace."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

from ._common import CliError, trace_file, warn

HELP = "write a self-contained HTML viewer page for a trace"


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="trace file (.jsonl)")
    p.add_argument(
        "-o",
        "--output",
        metavar="OUT.html",
        help="where to write the page ('-' for stdout); default: FILE with an .html suffix",
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
    from .._view import is_viewer_html, render_html

    src = trace_file(args.file)
    page = render_html(src, strict=args.strict)
    if args.output == "-":
        if args.open:
            raise CliError("--open needs a file; it cannot be used with -o -")
        sys.stdout.write(page)
        return 0
    explicit = args.output is not None
    out = Path(args.output) if explicit else src.with_suffix(".html")
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
    if args.open:
        import webbrowser

        if not webbrowser.open(out.resolve().as_uri()):
            warn("ststrace view", f"could not start a web browser; open {out} yourself")
    return 0
