"""What every command shares: the one-line error, file checks, JSON output."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple

from .._errors import TraceFormatError

if TYPE_CHECKING:
    from .._reader import Trace

__all__ = [
    "CliError",
    "Command",
    "describe",
    "dump_json",
    "converted_note",
    "load_other",
    "source_format",
    "non_negative_int",
    "one_line",
    "path_problem",
    "positive_float",
    "trace_file",
    "warn",
    "warnings_to_stderr",
]


class CliError(Exception):
    """A failure to report as one line on stderr, with exit code 1."""


class Command(NamedTuple):
    name: str
    help: str
    setup: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ---- helpers ----------------------------------------------------------------


def one_line(text: str) -> str:
    return " ".join(text.split())


def describe(exc: BaseException) -> str:
    """A one-line description that names the file (and line) when known."""
    if isinstance(exc, TraceFormatError):
        return one_line(str(exc))
    if isinstance(exc, OSError):
        name = exc.filename
        reason = exc.strerror or str(exc)
        if isinstance(exc, IsADirectoryError) and name is not None:
            reason = "is a directory, not a trace file"
        if name is not None:
            return one_line(f"{os.fsdecode(name)}: {reason}")
        return one_line(str(exc))
    return one_line(str(exc)) or type(exc).__name__


def path_problem(exc: OSError, role: str = "") -> str:
    """What is wrong with which path, in words, for an OSError about a file the user
    named (never the raw ``[Errno 2] No such file or directory: 'x'``). *role* says
    what the path was for ("output directory")."""
    import errno

    name = os.fsdecode(exc.filename) if exc.filename is not None else None
    what = f"{role} " if role else ""
    if name is None:
        return one_line(exc.strerror or str(exc))
    if exc.errno == errno.ENOENT:
        return f"{what}{name}: no such file or directory"
    if exc.errno == errno.EEXIST:
        kind = "a directory" if os.path.isdir(name) else "a file"
        return f"{what}{name}: {kind} of that name already exists" + (", not a directory" if kind == "a file" and role.endswith("directory") else "")
    if exc.errno == errno.ENOTDIR:
        # Name the part of the path that is a file where a directory was needed.
        part = Path(name)
        blocker = next((q for q in [part, *part.parents] if q.exists() and not q.is_dir()), None)
        if blocker is not None and blocker != part:
            return f"{what}{name}: {blocker} is a file, not a directory"
        return f"{what}{name}: not a directory"
    if exc.errno == errno.EISDIR:
        return f"{what}{name}: is a directory, not a file"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{what}{name}: permission denied"
    if exc.errno == errno.ENOSPC:
        return f"{what}{name}: no space left on the device"
    return f"{what}{name}: {(exc.strerror or str(exc)).lower()}"


def warn(prog: str, message: str) -> None:
    print(f"{prog}: {one_line(message)}", file=sys.stderr)


def trace_file(path: Path) -> Path:
    """Refuse what cannot be a trace before opening it, with a clear reason."""
    if not path.exists():
        raise CliError(f"{path}: no such file")
    if path.is_dir():
        raise CliError(f"{path}: is a directory, not a trace file")
    return path


def dump_json(doc: Any) -> None:
    from .._encode import dumps

    sys.stdout.write(dumps(doc).decode("utf-8") + "\n")


@contextlib.contextmanager
def warnings_to_stderr() -> Iterator[None]:
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




def non_negative_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {n}")
    return n


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text}")
    return x


def trace_files(paths: Iterable[Path]) -> list[Path]:
    """Files and directories as given -> trace files: a directory stands for every
    ``*.jsonl`` below it (sorted); one without any is an error."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
            if not found:
                raise CliError(f"{path}: is a directory with no trace files (*.jsonl)")
            out.extend(found)
        else:
            out.append(trace_file(path))
    return out


# ---- other agents' files in the reading commands ---------------------------------


def source_format(path: Path) -> str:
    """``"sts"``, or the agent format ``convert`` would read *path* as.

    Only the head of the file is looked at. A file no converter recognises is
    taken for STS, so the reader names what is wrong with it.
    """
    from .._convert import ConvertError, detect

    try:
        return detect(path)
    except (ConvertError, OSError):
        return "sts"


def load_other(path: Path, fmt: str) -> list[Trace]:
    """The traces of another agent's session file, converted in memory as
    ``ststrace convert`` would write them (secrets redacted)."""
    from .._convert import ConvertError, convert_file

    try:
        return convert_file(path, fmt).traces
    except ConvertError as exc:
        raise CliError(exc.cli_message()) from None


def converted_note(fmt: str) -> str:
    """How the reading commands say that a file was converted."""
    from .._convert import FORMAT_LABELS

    return f"converted in memory from {FORMAT_LABELS.get(fmt, fmt)} ({fmt})"
