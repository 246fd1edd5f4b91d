"""The ``ststrace`` command line: one module per command.

Each command module has ``setup(parser)`` (its arguments) and
``run(args) -> int`` (the exit code), and one row in :data:`COMMANDS`. A command
is imported only when it runs, so ``ststrace --help`` and a plain
``import ststrace`` load none of the heavier modules (converters, hub, viewer).

A command raises :class:`CliError` (or lets ``OSError`` / ``TraceFormatError``
escape) for a one-line message and exit code 1; :func:`main` turns every
exception into such a line, so users never see a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys
from typing import Sequence

from .._errors import TraceFormatError
from ._common import CliError, Command, describe, warn, warnings_to_stderr

__all__ = ["COMMANDS", "CliError", "build_parser", "main"]


def _lazy(name: str, help: str) -> Command:
    """A row whose module is imported only when the command is set up or run."""

    def setup(p: argparse.ArgumentParser) -> None:
        importlib.import_module(f"{__name__}.{name}").setup(p)

    def run(args: argparse.Namespace) -> int:
        return int(importlib.import_module(f"{__name__}.{name}").run(args))

    return Command(name, help, setup, run)


#: One row per command, in the order ``ststrace --help`` lists them.
COMMANDS: list[Command] = [
    _lazy("validate", "check trace files against STS-Format"),
    _lazy("view", "write a self-contained HTML viewer page for a trace"),
    _lazy("stats", "count messages, tool calls, errors, models, tokens, sub-agents, duration"),
    _lazy("cat", "print a trace as a readable transcript"),
    _lazy("tail", "follow a trace while it is being written; ends when its session has closed"),
    _lazy("convert", "convert other agents' session files (Pi, Claude Code, Codex, ...) to STS"),
    _lazy("export", "write training rows (TRL messages + tools, JSONL or Parquet), one per session"),
    _lazy("outcome", "attach an outcome (reward, rewards, labels, success) to closed trace files"),
    _lazy("upload", "check traces, then upload them to a Hub dataset repo or Storage Bucket"),
    _lazy("otlp", "send traces to an OpenTelemetry backend (OTLP/HTTP) as GenAI spans"),
    _lazy("hooks", "capture coding agents (Claude Code, Gemini CLI, Codex) live through their hooks"),
]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ststrace")
    except Exception:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ststrace",
        description="Inspect, check and view STS-Format agent traces (JSONL).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help[:1].upper() + cmd.help[1:] + ".")
        cmd.setup(p)
        p.set_defaults(run=cmd.run)
    return parser


def _safe_stdout() -> None:
    # Trace text may hold characters the terminal's encoding lacks; show them
    # escaped rather than dying with UnicodeEncodeError half-way through.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            with contextlib.suppress(Exception):
                stream.reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 failure, 2 usage)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["hooks", "run"] and not {"-h", "--help"} & set(words):
        # A coding agent waits on this at every event: skip building the
        # parser, which sets up (imports) every command.
        from .._hooks import hook

        return hook.run(words[2:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help / --version (0) or bad usage (2)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_usage(sys.stderr)
        print("ststrace: error: a command is required", file=sys.stderr)
        return 2
    prog = f"ststrace {args.command}"
    _safe_stdout()
    try:
        with warnings_to_stderr():
            return int(run(args))
    except BrokenPipeError:
        # `ststrace cat trace.jsonl | head`: the reader left; stop quietly.
        with contextlib.suppress(Exception):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        return 130
    except (CliError, OSError, TraceFormatError) as exc:
        warn(prog, str(exc) if isinstance(exc, CliError) else describe(exc))
        return 1
    except Exception as exc:  # never a traceback for the user, unless asked for
        if os.environ.get("STSTRACE_DEBUG"):
            import traceback

            traceback.print_exc()
        warn(prog, f"internal error: {type(exc).__name__}: {describe(exc)} (STSTRACE_DEBUG=1 shows the traceback)")
        return 1
