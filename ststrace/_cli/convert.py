"""``ststrace convert``: other agents' session files to STS traces (or STS to Pi)."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

import orjson

from .._errors import internal_error
from .._reader import Trace
from .._convert import (
    FORMATS,
    ConvertError,
    convert_file,
    format_name,
    guard_trace,
    input_files,
    is_sts,
    output_name,
    replace_file,
    sts_bytes,
    write_new,
)
from .._convert.to_pi import CONVERTED_BY, pi_bytes
from ._common import path_problem

__all__ = ["plural", "run", "setup"]


def setup(p: argparse.ArgumentParser) -> None:
    """Add ``convert``'s arguments and description to its sub-parser *p*."""
    p.description = (
        "Convert Pi, Claude Code, Codex, Gemini CLI, Hermes, Droid, Cursor or OpenAI-messages session files "
        "to STS traces, one file per session in OUTDIR; an STS file (a llama.app message tree too) "
        "is normalised. The format is detected unless --from is given."
    )
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="session file(s) or directories (every *.jsonl under it, Gemini CLI's session-*.json / checkpoint-*.json, "
        "Cline's api_conversation_history.json)",
    )
    p.add_argument("-o", "--out", dest="outdir", required=True, metavar="OUTDIR", help="directory for the converted files")
    p.add_argument("--from", dest="from_", metavar="FORMAT", help=f"source format: {', '.join(FORMATS)} (default: detect)")
    p.add_argument(
        "--to",
        choices=("sts", "pi"),
        default="sts",
        help="output layout: sts (default) or pi (a Pi v3 session with a harness field; STS inputs are accepted too)",
    )
    p.add_argument(
        "--all-branches", action="store_true", help="Pi and llama.app trees: one file per branch (leaf), not just the active one"
    )
    p.add_argument("--no-redact", action="store_true", help="keep secrets (redaction is on by default, as in Session)")
    again = p.add_mutually_exclusive_group()
    again.add_argument(
        "--skip-existing", action="store_true", help="leave outputs that already hold the same session alone (reported as skipped)"
    )
    again.add_argument("--force", action="store_true", help="replace existing outputs that ststrace wrote (never other files)")


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


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class _Totals:
    done: int = 0
    failed: int = 0
    traces: int = 0
    skipped: int = 0
    replaced: int = 0
    messages: int = 0
    calls: int = 0
    #: Replies (and, for Droid, sessions) whose token usage was carried over, and their tokens.
    usage_replies: int = 0
    usage_sessions: int = 0
    tokens: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    redacted: Counter[str] = field(default_factory=Counter)


class _Refused(Exception):
    """An output exists and the options say not to touch it."""


def _load(path: Path, args: argparse.Namespace) -> tuple[list[Trace], Counter[str], dict[str, int]]:
    """(traces, dropped, redactions) for one input."""
    redact = not args.no_redact
    result = convert_file(path, args.from_, all_branches=args.all_branches, redact=redact)
    return result.traces, result.dropped, result.redactions


def _ours(path: Path, to: str) -> bool:
    """Whether *path* is a file this command writes (so --force may replace it)."""
    if to == "sts":
        return is_sts(path)
    head = _first_line(path)
    return head is not None and head.get("type") == "session" and head.get("convertedBy") == CONVERTED_BY


def _first_line(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            obj = orjson.loads(f.readline(1 << 20))
    except (OSError, orjson.JSONDecodeError):
        return None
    return obj if isinstance(obj, dict) else None


def _write(path: Path, traces: list[Trace], args: argparse.Namespace, outdir: Path, totals: _Totals) -> list[Trace]:
    """Write the outputs of one input, all or nothing; returns the traces written."""
    render: Callable[[Trace], bytes] = pi_bytes if args.to == "pi" else sts_bytes
    plan: list[tuple[Path, bytes, bool]] = []  # (output, data, replace)
    kept: list[Trace] = []
    skipped = 0
    for trace in traces:
        out = outdir / output_name(trace)
        if any(out == q for q, _, _ in plan):
            raise _Refused(f"{path}: two sessions with the id {trace.id!r}; the second would overwrite the first")
        if os.path.lexists(out):
            head = _first_line(out)
            if args.skip_existing and head is not None and head.get("id") == trace.id and _ours(out, args.to):
                skipped += 1
                continue
            if args.force and _ours(out, args.to):
                plan.append((out, render(trace), True))
                kept.append(trace)
                continue
            hint = "" if (args.skip_existing or args.force) else " (--skip-existing keeps it, --force replaces it)"
            why = "holds another session" if args.skip_existing and _ours(out, args.to) else "already exists"
            if args.force:
                why = "already exists and was not written by ststrace"
            raise _Refused(f"{path}: {out} {why}; not overwritten{hint}")
        plan.append((out, render(trace), False))
        kept.append(trace)
    written: list[Path] = []
    try:
        for out, data, replace in plan:
            if replace:
                replace_file(out, data)
                totals.replaced += 1
            else:
                written.append(write_new(out, data))
    except BaseException:
        # All of a file or nothing: a re-run must not trip over half of it.
        for w in written:
            w.unlink(missing_ok=True)
        raise
    totals.skipped += skipped
    return kept


def run(args: argparse.Namespace) -> int:
    outdir = Path(args.outdir)
    err: TextIO = sys.stderr
    if args.from_ is not None:
        try:
            args.from_ = format_name(args.from_)
        except ValueError as exc:
            print(f"ststrace convert: {str(exc).replace('source format', '--from format')}", file=err)
            return 1
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"ststrace convert: cannot create the {path_problem(exc, 'output directory')}", file=err)
        return 1
    files, subagents = input_files(args.inputs, outdir)
    if not files:
        print("ststrace convert: no input files (the directories hold no *.jsonl)", file=err)
        return 1
    progress = _Progress(len(files), err)
    totals = _Totals()
    for i, path in enumerate(files):
        progress.update(i, str(path))
        try:
            traces, dropped, redactions = _load(path, args)
            traces = _write(path, traces, args, outdir, totals)
        except Exception as exc:
            progress.clear()
            totals.failed += 1
            print(f"ststrace convert: {_reason(path, exc)}", file=err)
            continue
        totals.done += 1
        totals.traces += len(traces)
        totals.messages += sum(len(t.messages) for t in traces)
        totals.calls += sum(len(calls) for t in traces for m in t.messages if isinstance(calls := m.get("toolCalls"), list))
        _count_usage(traces, totals)
        totals.dropped.update(dropped)
        totals.redacted.update(redactions)
    progress.update(len(files), "")
    progress.clear()
    print(_summary(totals, len(files), outdir, args, subagents))
    return 1 if totals.failed else 0


def _count_usage(traces: list[Trace], totals: _Totals) -> None:
    for t in traces:
        replies = [u for m in t.messages if isinstance(u := m.get("usage"), dict)]
        totals.usage_replies += len(replies)
        totals.tokens += sum(_tokens(u) for u in replies)
        head = t.header.get("usage")
        if not replies and isinstance(head, dict):
            totals.usage_sessions += 1
            totals.tokens += _tokens(head)


def _tokens(usage: dict[str, Any]) -> int:
    n = usage.get("totalTokens")
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def _summary(t: _Totals, n_files: int, outdir: Path, args: argparse.Namespace, subagents: int) -> str:
    layout = " (Pi layout)" if args.to == "pi" else ""
    text = (
        f"converted {t.done} of {plural(n_files, 'file')} into {plural(t.traces, 'trace')} in {outdir}{layout} "
        f"({plural(t.messages, 'message')}, {plural(t.calls, 'tool call')})"
    )
    if t.usage_replies or t.usage_sessions:
        kept = [f"{t.usage_replies} repl{'y' if t.usage_replies == 1 else 'ies'}"] if t.usage_replies else []
        if t.usage_sessions:
            kept.append(plural(t.usage_sessions, "session total"))
        text += f"; token usage kept: {' and '.join(kept)}, {t.tokens:,} tokens"
    text += "; dropped: " + (", ".join(f"{n} {k}" for k, n in sorted(t.dropped.items())) if t.dropped else "nothing")
    if args.no_redact:
        text += "; redaction off"
    else:
        text += "; redacted: " + (", ".join(f"{n} {k}" for k, n in sorted(t.redacted.items())) if t.redacted else "nothing")
    if subagents:
        text += f"; {plural(subagents, 'subagent file')} found"
    if t.skipped:
        text += f"; {t.skipped} skipped (already converted)"
    if t.replaced:
        text += f"; {t.replaced} replaced"
    if t.failed:
        text += f"; {t.failed} failed"
    return text


def _reason(path: Path, exc: BaseException) -> str:
    """One line naming the input file once."""
    if isinstance(exc, ConvertError):
        text = exc.cli_message()
    elif isinstance(exc, FileExistsError):
        return f"{path}: {exc.filename or exc} already exists; not overwritten"
    elif isinstance(exc, OSError) and exc.filename is not None:
        # A path's problem in words, naming the input whose conversion it stopped.
        text = path_problem(exc)
        return text if os.fsdecode(exc.filename) == str(path) else f"{path}: {text}"
    elif isinstance(exc, (_Refused, OSError, ValueError)):
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    else:
        # A bug of ours (or input nobody foresaw): logged, reported with the file, and the batch goes on.
        internal_error(exc, f"converting {path}")
        text = f"internal error: {type(exc).__name__}: {str(exc)[:200]} (STSTRACE_DEBUG=1 shows the traceback)"
        if os.environ.get("STSTRACE_DEBUG"):
            import traceback

            traceback.print_exception(type(exc), exc, exc.__traceback__)
    text = " ".join(text.split())
    return text if str(path) in text else f"{path}: {text}"

