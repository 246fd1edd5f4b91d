"""``ststrace cat``: a trace as a readable transcript."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import converted_note, load_other, source_format, trace_file


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="trace file (.jsonl), or any session file convert reads")
    p.add_argument("--no-color", action="store_true", help="never colour the output (also: NO_COLOR=1)")
    p.add_argument("--strict", action="store_true", help="fail on a torn last line instead of skipping it")


def run(args: argparse.Namespace) -> int:
    from .._reader import iter_messages, read_header
    from ._text import Transcript, use_color

    path = trace_file(args.file)
    t = Transcript(sys.stdout, color=use_color(sys.stdout, args.no_color))
    fmt = source_format(path)
    if fmt != "sts":
        # Another agent's file: shown as `ststrace convert` would write it.
        for trace in load_other(path, fmt):
            t.header(trace.header, note=converted_note(fmt))
            for msg in trace.messages:
                t.message(msg)
        return 0
    header = read_header(path)
    t.header(header)
    for msg in iter_messages(path, strict=args.strict):
        t.message(msg)
    return 0
