"""``ststrace export``: traces (or any format ``convert`` reads) to training rows."""

from __future__ import annotations

import argparse
import sys

from .._convert import FORMATS as SOURCE_FORMATS
from .._export import FORMATS, ExportResult, export
from .convert import plural

__all__ = ["run", "setup"]


def setup(p: argparse.ArgumentParser) -> None:
    """Add ``export``'s arguments and description to its sub-parser *p*."""
    p.description = (
        "Write one training row per session: TRL's conversational shape (messages with tool calls whose "
        "arguments are objects, reasoning_content, tool results with the tool's name), the tool schemas "
        "recorded, and metadata columns. Inputs are STS traces or any format 'ststrace convert' reads. "
        "OUT ending in .parquet writes Parquet (needs ststrace[datasets]); anything else JSON Lines."
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="trace or session file(s), or directories (every *.jsonl under it)")
    p.add_argument("-o", "--out", required=True, metavar="OUT", help="the output file: OUT.jsonl or OUT.parquet")
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="sft",
        help="sft (default): TRL rows with tools and metadata; messages: the OpenAI fine-tuning shape "
        "(messages with arguments as JSON text, tools); rewards: sft rows with the outcome, task and "
        "token ids; kto: prompt/completion/label rows; dpo: prompt/chosen/rejected pairs of sessions "
        "of one task whose rewards differ",
    )
    p.add_argument("--min-reward", type=float, default=None, metavar="X", help="keep sessions whose reward is at least X (rejection sampling)")
    p.add_argument("--threshold", type=float, default=0.5, metavar="T", help="kto: a session without success is labelled good when its reward is at least T (default 0.5)")
    p.add_argument("--pairs", choices=("best-worst", "all"), default="best-worst", help="dpo: one pair per task, highest reward chosen and lowest rejected (default), or every pair whose rewards differ")
    p.add_argument("--no-errors", action="store_true", help="leave out sessions with a failed tool result or an unanswered call")
    p.add_argument("--min-tool-calls", type=int, default=0, metavar="N", help="leave out sessions with fewer than N tool calls")
    p.add_argument("--include-subagents", action="store_true", help="export sub-agent sessions as rows of their own too")
    p.add_argument("--from", dest="from_", metavar="FORMAT", help=f"source format of non-STS inputs: {', '.join(SOURCE_FORMATS)} (default: detect)")
    p.add_argument("--no-redact", action="store_true", help="keep secrets (redaction is on by default, as in convert)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")


def run(args: argparse.Namespace) -> int:
    err = sys.stderr
    if args.min_tool_calls < 0:
        print("ststrace export: --min-tool-calls must be 0 or more", file=err)
        return 1
    try:
        result = export(
            args.inputs,
            args.out,
            format=args.format,
            errors=not args.no_errors,
            min_tool_calls=args.min_tool_calls,
            include_subagents=args.include_subagents,
            from_=args.from_,
            redact=not args.no_redact,
            force=args.force,
            min_reward=args.min_reward,
            threshold=args.threshold,
            pairs=args.pairs,
        )
    except (OSError, ValueError, ImportError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"ststrace export: {text}", file=err)
        return 1
    for line in result.failed:
        print(f"ststrace export: {line}", file=err)
    print(summary(result, args.no_redact, "pair" if args.format == "dpo" else "session"))
    return 1 if result.failed else 0


def summary(r: ExportResult, no_redact: bool = False, unit: str = "session") -> str:
    n_files = r.files + len(r.failed)
    text = (
        f"exported {plural(r.rows, unit)} from {r.files} of {plural(n_files, 'file')} to {r.path} "
        f"({plural(r.messages, 'message')}, {plural(r.tool_calls, 'tool call')})"
    )
    if r.skipped:
        text += "; left out: " + ", ".join(f"{n} {k}" for k, n in sorted(r.skipped.items()))
    text += "; dropped: " + (", ".join(f"{n} {k}" for k, n in sorted(r.dropped.items())) if r.dropped else "nothing")
    if no_redact:
        text += "; redaction off"
    else:
        text += "; redacted: " + (", ".join(f"{n} {k}" for k, n in sorted(r.redactions.items())) if r.redactions else "nothing")
    if r.failed:
        text += f"; {len(r.failed)} failed"
    return text
