"""The ``ststrace`` command line.

Every command is two functions and one row in :data:`COMMANDS`:

* ``_setup_<name>(parser)`` adds its arguments to its sub-parser;
* ``_cmd_<name>(args) -> int`` runs it and returns the exit code.

A command raises :class:`CliError` (or lets ``OSError`` / ``TraceFormatError``
escape) for a one-line message and exit code 1; :func:`main` turns every
exception into such a line, so users never see a traceback. Commands that need
optional libraries import them inside ``_cmd_<name>``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from ._errors import TraceFormatError

__all__ = ["COMMANDS", "CliError", "main"]


class CliError(Exception):
    """A failure to report as one line on stderr, with exit code 1."""


class Command(NamedTuple):
    name: str
    help: str
    setup: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ---- helpers ----------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _describe(exc: BaseException) -> str:
    """A one-line description that names the file (and line) when known."""
    if isinstance(exc, TraceFormatError):
        return _one_line(str(exc))
    if isinstance(exc, OSError):
        name = exc.filename
        reason = exc.strerror or str(exc)
        if isinstance(exc, IsADirectoryError) and name is not None:
            reason = "is a directory, not a trace file"
        if name is not None:
            return _one_line(f"{os.fsdecode(name)}: {reason}")
        return _one_line(str(exc))
    return _one_line(str(exc)) or type(exc).__name__


def _warn(prog: str, message: str) -> None:
    print(f"{prog}: {_one_line(message)}", file=sys.stderr)


def _trace_file(path: Path) -> Path:
    """Refuse what cannot be a trace before opening it, with a clear reason."""
    if not path.exists():
        raise CliError(f"{path}: no such file")
    if path.is_dir():
        raise CliError(f"{path}: is a directory, not a trace file")
    return path


def _dump_json(doc: Any) -> None:
    from ._encode import dumps

    sys.stdout.write(dumps(doc).decode("utf-8") + "\n")


@contextlib.contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """Show the reader's warnings (a skipped torn line) as plain stderr lines."""
    logger = logging.getLogger("ststrace")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


# ---- validate ---------------------------------------------------------------


def _setup_validate(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="trace files (.jsonl)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of lines")


def _cmd_validate(args: argparse.Namespace) -> int:
    from ._reader import validate

    failed = False
    report: list[dict[str, Any]] = []
    for path in args.files:
        try:
            problems = validate(_trace_file(path))
        except (CliError, OSError) as exc:
            msg = str(exc) if isinstance(exc, CliError) else _describe(exc)
            _warn("ststrace validate", msg)
            failed = True
            report.append(
                {
                    "path": str(path),
                    "ok": False,
                    "errors": 1,
                    "warnings": 0,
                    "problems": [{"line": 0, "code": "unreadable", "severity": "error", "message": msg}],
                }
            )
            continue
        n_err = sum(1 for pr in problems if pr.severity == "error")
        failed = failed or n_err > 0
        report.append(
            {
                "path": str(path),
                "ok": n_err == 0,
                "errors": n_err,
                "warnings": len(problems) - n_err,
                "problems": [pr._asdict() for pr in problems],
            }
        )
        if not args.json:
            for pr in problems:
                where = f"{path}:{pr.line}" if pr.line > 0 else str(path)
                print(f"{where}: {pr.severity}: {pr.code}: {_one_line(pr.message)}")
            if not problems:
                print(f"{path}: ok")
    if args.json:
        _dump_json({"ok": not failed, "files": report})
    return 1 if failed else 0


# ---- view -------------------------------------------------------------------


def _setup_view(p: argparse.ArgumentParser) -> None:
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


def _cmd_view(args: argparse.Namespace) -> int:
    from ._view import is_viewer_html, render_html

    src = _trace_file(args.file)
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
            _warn("ststrace view", f"could not start a web browser; open {out} yourself")
    return 0


# ---- stats ------------------------------------------------------------------


def _setup_stats(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="trace files (.jsonl)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--strict", action="store_true", help="fail on a torn last line instead of skipping it")


def _cmd_stats(args: argparse.Namespace) -> int:
    from ._cli_stats import collect, format_stats, total
    from ._reader import iter_messages

    results = []
    failed = False
    for path in args.files:
        try:
            results.append(collect(path, iter_messages(_trace_file(path), strict=args.strict)))
        except (CliError, OSError, TraceFormatError) as exc:
            _warn("ststrace stats", str(exc) if isinstance(exc, CliError) else _describe(exc))
            failed = True
    tot = total(results)
    if args.json:
        _dump_json({"files": [st.as_dict() for st in results], "total": tot.as_dict()})
    else:
        blocks = [format_stats(st) for st in results]
        if len(results) > 1:
            blocks.append(format_stats(tot))
        if blocks:
            print("\n\n".join(blocks))
    return 1 if failed else 0


# ---- cat --------------------------------------------------------------------


def _setup_cat(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="trace file (.jsonl)")
    p.add_argument("--no-color", action="store_true", help="never colour the output (also: NO_COLOR=1)")
    p.add_argument("--strict", action="store_true", help="fail on a torn last line instead of skipping it")


def _cmd_cat(args: argparse.Namespace) -> int:
    from ._cli_text import Transcript, use_color
    from ._reader import iter_messages, read_header

    path = _trace_file(args.file)
    header = read_header(path)
    t = Transcript(sys.stdout, color=use_color(sys.stdout, args.no_color))
    t.header(header)
    for msg in iter_messages(path, strict=args.strict):
        t.message(msg)
    return 0


# ---- tail -------------------------------------------------------------------


def _non_negative_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {n}")
    return n


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text}")
    return x


def _setup_tail(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="trace file (.jsonl) an agent is writing")
    p.add_argument("-n", "--lines", type=_non_negative_int, default=10, metavar="N", help="show the last N messages first (default 10)")
    p.add_argument("--interval", type=_positive_float, default=0.5, metavar="S", help="seconds between checks (default 0.5)")
    p.add_argument("--max-messages", type=_non_negative_int, default=None, metavar="N", help="exit after showing N messages")
    p.add_argument("--timeout", type=_positive_float, default=None, metavar="S", help="exit after S seconds")
    p.add_argument("--no-color", action="store_true", help="never colour the output (also: NO_COLOR=1)")


def _cmd_tail(args: argparse.Namespace) -> int:
    from ._cli_tail import follow
    from ._cli_text import Transcript, use_color

    path = _trace_file(args.file)
    t = Transcript(sys.stdout, color=use_color(sys.stdout, args.no_color))

    def on_header(header: dict[str, Any]) -> None:
        t.header(header)
        sys.stdout.flush()

    def on_message(msg: dict[str, Any], shown: bool) -> None:
        if shown:
            t.message(msg)
            sys.stdout.flush()
        else:
            t.remember(msg)

    follow(
        path,
        backlog=args.lines,
        interval=args.interval,
        on_header=on_header,
        on_message=on_message,
        max_messages=args.max_messages,
        timeout=args.timeout,
    )
    return 0


# ---- the table of commands ----------------------------------------------------

#: One row per command, in the order ``ststrace --help`` lists them.
def _setup_convert(p: argparse.ArgumentParser) -> None:
    from ._cli_convert import setup_convert

    setup_convert(p)


def _cmd_convert(args: argparse.Namespace) -> int:
    from ._cli_convert import run_convert

    return run_convert(args)


def _setup_upload(p: argparse.ArgumentParser) -> None:
    from ._cli_convert import setup_upload

    setup_upload(p)


def _cmd_upload(args: argparse.Namespace) -> int:
    from ._cli_convert import run_upload

    return run_upload(args)


COMMANDS: list[Command] = [
    Command("validate", "check trace files against STS-Format", _setup_validate, _cmd_validate),
    Command("view", "write a self-contained HTML viewer page for a trace", _setup_view, _cmd_view),
    Command("stats", "count messages, tool calls, errors, models, duration", _setup_stats, _cmd_stats),
    Command("cat", "print a trace as a readable transcript", _setup_cat, _cmd_cat),
    Command("tail", "follow a trace while it is being written", _setup_tail, _cmd_tail),
    Command("convert", "convert other agents' session files (Pi, Claude Code, Codex, ...) to STS", _setup_convert, _cmd_convert),
    Command("upload", "check traces, then upload them to a Hub dataset repo or Storage Bucket", _setup_upload, _cmd_upload),
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
        with _warnings_to_stderr():
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
        _warn(prog, str(exc) if isinstance(exc, CliError) else _describe(exc))
        return 1
    except Exception as exc:  # never a traceback for the user, unless asked for
        if os.environ.get("STSTRACE_DEBUG"):
            import traceback

            traceback.print_exc()
        _warn(prog, f"internal error: {type(exc).__name__}: {_describe(exc)} (STSTRACE_DEBUG=1 shows the traceback)")
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
