"""``ststrace convert``: other agents' session files to STS traces."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from .._convert import FORMATS, convert_file, format_name, output_name, write_trace

__all__ = ["HELP", "add_convert_parser", "plural", "run", "run_convert", "setup", "setup_convert"]


HELP = CONVERT_HELP = "convert other agents' session files (Pi, Claude Code, Codex, ...) to STS traces"


def setup_convert(p: argparse.ArgumentParser) -> None:
    """Add ``convert``'s arguments to *p* (for a table of commands)."""
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="session file(s) or directories (every *.jsonl under it)")
    p.add_argument("-o", "--out", dest="outdir", required=True, metavar="OUTDIR", help="directory for the STS files")
    p.add_argument("--from", dest="from_", metavar="FORMAT", help=f"source format: {', '.join(FORMATS)} (default: detect)")
    p.add_argument("--all-branches", action="store_true", help="Pi: one file per branch (leaf), not just the active one")
    p.set_defaults(func=run_convert)


def add_convert_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``convert`` sub-command to an argparse sub-parsers object."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "convert",
        help=HELP,
        description=(
            "Convert Pi, Claude Code, Codex, Hermes, Droid, Cursor or OpenAI-messages session files "
            "to STS traces, one file per session in OUTDIR. The format is detected unless --from is given."
        ),
    )
    setup_convert(p)
    return p


class _Progress:
    """A one-line progress bar on a TTY; silent otherwise."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.enabled = total > 1 and _isatty(stream)
        self._shown = False

    def update(self, done: int, label: str) -> None:
        if not self.enabled:
            return
        width = 24
        filled = width * done // max(self.total, 1)
        name = label if len(label) <= 40 else "…" + label[-39:]
        self.stream.write(f"\r\x1b[2K[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {name}")
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _inputs(names: list[str]) -> list[Path]:
    out: list[Path] = []
    for name in names:
        p = Path(name)
        if p.is_dir():
            out.extend(f for f in sorted(p.rglob("*.jsonl")) if f.is_file())
        else:
            out.append(p)
    return out


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def run_convert(args: argparse.Namespace) -> int:
    outdir = Path(args.outdir)
    err: TextIO = sys.stderr
    if args.from_ is not None:
        try:
            format_name(args.from_)
        except ValueError as exc:
            print(f"ststrace convert: {exc}", file=err)
            return 1
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"ststrace convert: cannot create {outdir}: {exc}", file=err)
        return 1
    files = _inputs(args.inputs)
    progress = _Progress(len(files), err)
    done = failed = traces = messages = calls = 0
    dropped: Counter[str] = Counter()
    for i, path in enumerate(files):
        progress.update(i, str(path))
        try:
            result = convert_file(path, args.from_, all_branches=args.all_branches)
            written: list[Path] = []
            try:
                for trace in result.traces:
                    written.append(write_trace(trace, outdir / output_name(trace)))
            except BaseException:
                # All of a file or nothing: a re-run must not trip over half of it.
                for w in written:
                    w.unlink(missing_ok=True)
                raise
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            progress.clear()
            failed += 1
            print(f"ststrace convert: {_reason(path, exc)}", file=err)
            continue
        done += 1
        traces += len(result.traces)
        messages += sum(len(t.messages) for t in result.traces)
        calls += sum(len(m.get("toolCalls", ())) for t in result.traces for m in t.messages)
        dropped.update(result.dropped)
        if not result.traces:
            progress.clear()
            print(f"ststrace convert: {path}: no messages; nothing written", file=err)
    progress.update(len(files), "")
    progress.clear()
    summary = (
        f"converted {done} of {plural(len(files), 'file')} into {plural(traces, 'trace')} in {outdir} "
        f"({plural(messages, 'message')}, {plural(calls, 'tool call')})"
    )
    summary += "; dropped: " + (", ".join(f"{n} {k}" for k, n in sorted(dropped.items())) if dropped else "nothing")
    if failed:
        summary += f"; {failed} failed"
    print(summary)
    return 1 if failed else 0


def _reason(path: Path, exc: BaseException) -> str:
    """One line naming the input file once."""
    if isinstance(exc, FileExistsError):
        return f"{path}: {exc.filename or exc} already exists; not overwritten"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if text.startswith(str(path)) else f"{path}: {text}"


setup = setup_convert
run = run_convert
