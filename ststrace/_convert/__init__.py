"""Converters from other agents' session files to STS traces.

``convert(path)`` returns the traces in a file (most formats hold one session;
Hermes exports and OpenAI JSONL hold many, Claude Code subagents and Pi
branches add more). ``convert_file`` returns the same traces together with the
count of what could not be carried over (images, results without a call, ...),
kept out of the trace headers. ``write_trace`` writes one trace as a new file.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson

from .._encode import dumps
from .._guard import MessageGuard, make_guard
from .._reader import Trace
from .._redact import Redactor
from . import claude_code, cline, codex, cursor, droid, gemini, hermes, openai, opencode, pi, sts
from ._common import FORMAT_LABELS, FORMAT_NAMES, ConvertError, Converted

__all__ = [
    "FORMATS",
    "FORMAT_LABELS",
    "ConvertError",
    "ConvertResult",
    "Converted",
    "convert",
    "convert_file",
    "detect",
    "guard_trace",
    "input_files",
    "is_sts",
    "output_name",
    "replace_file",
    "sts_bytes",
    "write_new",
    "write_trace",
]

Converter = Callable[..., list[Converted]]

#: Format name -> converter. Names are what ``from_`` / ``--from`` accept.
FORMATS: dict[str, Converter] = {
    "pi": pi.convert,
    "claude-code": claude_code.convert,
    "codex": codex.convert,
    "hermes": hermes.convert,
    "droid": droid.convert,
    "cursor": cursor.convert,
    "openai": openai.convert,
    "sts": sts.convert,
    "gemini": gemini.convert,
    "opencode": opencode.convert,
    "cline": cline.convert,
}
assert tuple(FORMATS) == FORMAT_NAMES

_ALIASES = {
    "claude": "claude-code",
    "claude_code": "claude-code",
    "claudecode": "claude-code",
    "openclaw": "pi",
    "factory": "droid",
    "factory-droid": "droid",
    "hermes-agent": "hermes",
    "codex-cli": "codex",
    "chat": "openai",
    "messages": "openai",
    "llama.app": "sts",
    "llama": "sts",
    "gemini-cli": "gemini",
}


@dataclass
class ConvertResult:
    """What one source file turned into."""

    path: Path
    format: str
    items: list[Converted] = field(default_factory=list)
    #: Dropped items that belong to no trace (torn lines, skipped line kinds,
    #: an orphan result in an otherwise empty subagent).
    file_dropped: Counter[str] = field(default_factory=Counter)
    #: Secrets redacted in the traces, by kind (empty with ``redact=False``).
    redactions: dict[str, int] = field(default_factory=dict)

    @property
    def traces(self) -> list[Trace]:
        return [c.trace for c in self.items]

    @property
    def dropped(self) -> Counter[str]:
        """Items of the source that are missing from, or only a placeholder in, the traces."""
        total: Counter[str] = Counter(self.file_dropped)
        for c in self.items:
            total.update(c.dropped)
        return total


def format_name(name: str) -> str:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in FORMATS:
        raise ValueError(f"unknown source format {name!r}; choose one of: {', '.join(FORMATS)}")
    return key


def convert(
    path: str | os.PathLike[str],
    from_: str | None = None,
    *,
    all_branches: bool = False,
    redact: bool | Redactor = True,
) -> list[Trace]:
    """The STS traces in the session file *path* (format detected unless *from_* names it).

    Secrets are redacted as in :class:`~ststrace.Session` (``redact=False`` keeps them).
    """
    return convert_file(path, from_, all_branches=all_branches, redact=redact).traces


def convert_file(
    path: str | os.PathLike[str],
    from_: str | None = None,
    *,
    all_branches: bool = False,
    redact: bool | Redactor = True,
    max_field_chars: int | None = 1_000_000,
) -> ConvertResult:
    """Like :func:`convert`, also reporting the format used, what was dropped and what was redacted.

    :class:`ConvertError` (a :class:`ValueError`) when the file cannot be read
    as that format, or holds no message in it.
    """
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{p} is a directory, not a session file")
    fmt = format_name(from_) if from_ is not None else detect(p)
    file_dropped: Counter[str] = Counter()
    items = FORMATS[fmt](p, all_branches=all_branches, dropped=file_dropped)
    if not items:
        raise ConvertError(f"no messages found in {p} as {fmt}; detected: {_detected(p)}")
    result = ConvertResult(p, fmt, items, file_dropped)
    guard = make_guard(redact, max_field_chars)
    if guard is not None:
        for c in items:
            guard_trace(guard, c.trace)
        result.redactions = dict(guard.counts)
    return result


def guard_trace(guard: MessageGuard, trace: Trace) -> None:
    """Redact and cap *trace* in place, as a :class:`~ststrace.Session` would have on writing."""
    trace.header = guard.header(trace.header)
    trace.messages = [guard.message(m) for m in trace.messages]


def _detected(p: Path) -> str:
    try:
        return detect(p)
    except (ValueError, OSError):
        return "unknown"


# -- detection -------------------------------------------------------------------

_HEAD_LINES = 40
_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CODEX_ITEMS = frozenset({"message", "function_call", "function_call_output", "reasoning", "local_shell_call", "custom_tool_call"})
_CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "file-history-snapshot", "queue-operation", "system", "progress"})
_CLAUDE_ONLY_TYPES = frozenset({"summary", "file-history-snapshot", "queue-operation", "custom-title", "last-prompt"})
_HERMES_KEYS = frozenset({"system_prompt", "started_at", "message_count", "model_config", "tool_call_count"})
_STS_ROLES = frozenset({"user", "assistant", "system", "tool"})


def _head(path: Path) -> list[Any]:
    objs: list[Any] = []
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                objs.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                if not objs:
                    return []
                break
            if len(objs) >= _HEAD_LINES:
                break
    return objs


def _str_type(o: dict[str, Any]) -> str | None:
    t = o.get("type")
    return t if isinstance(t, str) else None


def detect(path: str | os.PathLike[str]) -> str:
    """The source format of *path*; :class:`ConvertError` naming the file when unsure."""
    p = Path(path)
    objs = _head(p)
    if len(objs) == 1 and not isinstance(objs[0], dict):
        objs = []  # one JSON document on one line (json.dump writes lists that way)
    if not objs:
        try:
            whole = orjson.loads(p.read_bytes())
        except (orjson.JSONDecodeError, OSError) as exc:
            raise ConvertError(f"{p}: cannot tell the format (not JSON or JSON Lines: {exc})", needs_from=True) from None
        return _detect_document(p, whole)

    dicts = [o for o in objs if isinstance(o, dict)]
    first = objs[0] if isinstance(objs[0], dict) else {}
    ftype = _str_type(first)
    if ftype == "session":
        # A damaged STS file is still STS: the reader names what is wrong with it.
        return "pi" if not _looks_sts(dicts) and _looks_pi(dicts) else "sts"
    if ftype == "session_start":
        return "droid"
    if ftype in ("cursor_session_meta", "cursor_available_tools"):
        return "cursor"
    if gemini.is_jsonl_head(first):
        return "gemini"  # Gemini CLI 0.61's JSON Lines recording
    if first.get("role") == "session_meta":
        return "hermes"  # a Hermes gateway transcript
    if any(_str_type(o) in _CODEX_TYPES and isinstance(o.get("payload"), dict) for o in dicts):
        return "codex"
    if _early_codex(first, dicts):
        return "codex"
    if any(_str_type(o) in _CLAUDE_TYPES and ("sessionId" in o or "uuid" in o) for o in dicts):
        return "claude-code"
    if dicts and all(_str_type(o) in _CLAUDE_ONLY_TYPES for o in dicts):
        return "claude-code"  # a head of bookkeeping lines before the first message
    if any(isinstance(o.get("messages"), list) for o in dicts):
        if any(_HERMES_KEYS & o.keys() for o in dicts):
            return "hermes"
        return "openai"
    if dicts and all(isinstance(o.get("role"), str) or "type" in o for o in dicts):
        if any(isinstance(o.get("message"), dict) and isinstance(o.get("role"), str) for o in dicts):
            return "cursor"
        if any(isinstance(o.get("role"), str) and "content" in o for o in dicts) and all("role" in o for o in dicts):
            return "openai"
    raise ConvertError(f"{p}: cannot tell which agent wrote this file", needs_from=True)


def _early_codex(first: dict[str, Any], dicts: list[dict[str, Any]]) -> bool:
    """Early Codex rollouts: a bare meta line (``id``, ``timestamp``, maybe
    ``instructions``), then bare response items and ``record_type`` lines."""
    if "type" in first or "id" not in first or "timestamp" not in first or "messages" in first or "role" in first:
        return False
    if "instructions" in first:
        return True
    rest = dicts[1:]
    return bool(rest) and all(_str_type(o) in _CODEX_ITEMS or "record_type" in o for o in rest)


def _detect_document(p: Path, whole: Any) -> str:
    """The format of a file holding one JSON document."""
    if gemini.is_recording(whole) or gemini.is_checkpoint(whole):
        return "gemini"
    if opencode.is_export(whole):
        return "opencode"
    if cline.is_history(whole):
        return "cline"
    if isinstance(whole, list):
        if whole and all(isinstance(x, dict) and isinstance(x.get("messages"), list) for x in whole):
            return "hermes" if any(_HERMES_KEYS & x.keys() for x in whole) else "openai"
        if whole and isinstance(whole[0], dict) and ("role" in whole[0] or "messages" in whole[0]):
            return "openai"
    if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
        return "hermes" if _HERMES_KEYS & whole.keys() else "openai"
    raise ConvertError(f"{p}: cannot tell the format of this JSON file", needs_from=True)


def _looks_sts(dicts: list[dict[str, Any]]) -> bool:
    if not dicts or not isinstance(dicts[0].get("harness"), str):
        return False
    rest = dicts[1:]
    return all(
        o.get("type") == "outcome"  # an STS trace's outcome line (see _records.outcome)
        and isinstance(o.get("outcome"), dict)
        or o.get("type") == "message"
        and isinstance(o.get("message"), dict)
        and isinstance(o["message"].get("role"), str)
        and o["message"]["role"] in _STS_ROLES
        and "id" not in o
        for o in rest
    )


def _looks_pi(dicts: list[dict[str, Any]]) -> bool:
    """A Pi header (no ``harness``, or a ``version`` / ``convertedBy``) or Pi's linked entries."""
    first = dicts[0]
    if not isinstance(first.get("harness"), str) or "version" in first or "convertedBy" in first:
        return True
    return any("parentId" in o for o in dicts[1:])


def is_sts(path: str | os.PathLike[str], *, whole: bool = True) -> bool:
    """Whether *path* holds an STS trace (a header with ``harness`` and ``id``, then message lines only).

    ``whole=False`` looks at the header and the first message only: enough to
    tell STS from the other formats, for a caller that reads the file as STS
    next (and reports a bad later line then)."""
    try:
        with open(path, "rb") as f:
            dicts: list[dict[str, Any]] = []
            for raw in f:
                if not raw.strip():
                    continue
                obj = orjson.loads(raw)
                if not isinstance(obj, dict):
                    return False
                dicts.append(obj)
                if len(dicts) > 1 and not _looks_sts([dicts[0], obj]):
                    return False
                if len(dicts) > 1:
                    if not whole:
                        break
                    del dicts[1:]
    except (OSError, orjson.JSONDecodeError):
        return False
    return bool(dicts) and dicts[0].get("type") == "session" and isinstance(dicts[0].get("id"), str) and _looks_sts(dicts[:1])


#: The files a directory's traces are, at any depth (Gemini CLI and Cline keep
#: their sessions as JSON documents).
_TRACE_GLOBS = ("*.jsonl", "session-*.json", "checkpoint-*.json", "api_conversation_history.json")
_TRACE_NAME = re.compile(
    "|".join(fnmatch.translate(g) for g in _TRACE_GLOBS), re.IGNORECASE if os.name == "nt" else 0
)


def _parts(path: Path) -> tuple[str, ...]:
    return path.parts


def _trace_files(top: Path) -> list[Path]:
    """The files under *top* whose names match :data:`_TRACE_GLOBS`: what
    ``rglob`` gives for each glob (into sub-directories, not through links to
    them; unreadable ones skipped), that ``is_file``, in one ``os.scandir``
    walk that reads each entry's type from the directory listing."""
    out: list[Path] = []
    stack = [top]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except (PermissionError, FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                if _TRACE_NAME.match(entry.name) and entry.is_file():
                    out.append(here / entry.name)
                elif entry.is_dir() and not entry.is_symlink():
                    stack.append(here / entry.name)
            except OSError:
                continue
    return out


def input_files(names: Iterable[str | os.PathLike[str]], outdir: Path | None = None) -> tuple[list[Path], int]:
    """The files to convert (or export), and how many of them are Claude Code subagent files.

    A Claude Code session ``<dir>/<id>.jsonl`` keeps its subagents in
    ``<dir>/<id>/subagents/agent-*.jsonl``: given the session, those come too.
    A directory's files under *outdir* (a sub-directory of it) are left out: with ``convert dir -o dir/sts``
    a re-run must not take the last run's outputs for inputs.
    """
    skip = outdir.resolve() if outdir is not None else None
    out: list[Path] = []
    for name in names:
        p = Path(name)
        if p.is_dir():
            # Path order; by parts on POSIX, the same order without Path.__lt__ per comparison.
            found = iter(sorted(_trace_files(p), key=None if os.name == "nt" else _parts))
            # Only an output directory strictly below the input one: with `-o dir`
            # itself, the inputs and outputs cannot be told apart by place.
            below = skip is not None and skip != p.resolve()
            out.extend(f for f in found if not below or skip not in f.resolve().parents)
            continue
        out.append(p)
        subagents = p.with_suffix("") / "subagents"
        if p.suffix == ".jsonl" and subagents.is_dir():
            out.extend(f for f in sorted(subagents.glob("agent-*.jsonl")) if f.is_file())
    seen: set[Any] = set()
    files: list[Path] = []
    for f in out:
        # The same file named twice (a link, "a/../a"): one stat, not a realpath walk per file.
        try:
            st = f.stat()
            key: Any = (st.st_dev, st.st_ino)
        except OSError:
            key = f.absolute()  # reported as unreadable when it is read
        if key not in seen:
            seen.add(key)
            files.append(f)
    return files, sum(1 for f in files if f.parent.name == "subagents")



# -- writing ------------------------------------------------------------------------

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def output_name(trace: Trace) -> str:
    """A file name for *trace* from its session id (``<id>.jsonl``)."""
    stem = _UNSAFE.sub("_", trace.id).strip("._") or "session"
    return f"{stem[:200]}.jsonl"


def sts_bytes(trace: Trace) -> bytes:
    """The STS file for *trace*: the header line, then one envelope per message."""
    chunks = [dumps(trace.header) + b"\n"]
    chunks.extend(b'{"type":"message","message":' + dumps(m) + b"}\n" for m in trace.messages)
    # The outcome, merged into one line (what was set, nothing else).
    kept = {k: v for k, v in trace.outcome.items() if v is not None and v != {}}
    if kept:
        chunks.append(b'{"type":"outcome","outcome":' + dumps(kept) + b"}\n")
    return b"".join(chunks)


def write_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write *trace* as a new STS file (mode 0600); never overwrites (:class:`FileExistsError`)."""
    return write_new(path, sts_bytes(trace))


_FLAGS = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def write_new(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write *data* as a new file (mode 0600, fsynced); :class:`FileExistsError` if it exists."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, _FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        # A half-written file would pass for a trace later; remove it.
        try:
            os.unlink(p)
        except OSError:
            pass
        raise
    os.close(fd)
    return p


def replace_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Replace *path* with *data* atomically: readers see the old file or the new one, never half."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    write_new(tmp, data)
    try:
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def update_file(path: Path, data: bytes) -> None:
    """:func:`replace_file`, unless *path* already holds *data* (a hook run
    again over an unchanged transcript rewrites nothing)."""
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    replace_file(path, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.fsync(fd)
