"""Converters from other agents' session files to STS traces.

``convert(path)`` returns the traces in a file (most formats hold one session;
Hermes exports and OpenAI JSONL hold many, Claude Code subagents and Pi
branches add more). ``convert_file`` returns the same traces together with the
count of what could not be carried over (images, results without a call, ...),
kept out of the trace headers. ``write_trace`` writes one trace as a new file.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson

from .._encode import dumps
from .._reader import Trace
from . import claude_code, codex, cursor, droid, hermes, openai, pi
from ._common import ConvertError, Converted

__all__ = [
    "FORMATS",
    "ConvertError",
    "ConvertResult",
    "Converted",
    "convert",
    "convert_file",
    "detect",
    "output_name",
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
}

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
}


@dataclass
class ConvertResult:
    """What one source file turned into."""

    path: Path
    format: str
    items: list[Converted] = field(default_factory=list)

    @property
    def traces(self) -> list[Trace]:
        return [c.trace for c in self.items]

    @property
    def dropped(self) -> Counter[str]:
        """Items of the source that are missing from, or only a placeholder in, the traces."""
        total: Counter[str] = Counter()
        for c in self.items:
            total.update(c.dropped)
        return total


def format_name(name: str) -> str:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in FORMATS:
        raise ValueError(f"unknown source format {name!r}; choose one of: {', '.join(FORMATS)}")
    return key


def convert(path: str | os.PathLike[str], from_: str | None = None, *, all_branches: bool = False) -> list[Trace]:
    """The STS traces in the session file *path* (format detected unless *from_* names it)."""
    return convert_file(path, from_, all_branches=all_branches).traces


def convert_file(path: str | os.PathLike[str], from_: str | None = None, *, all_branches: bool = False) -> ConvertResult:
    """Like :func:`convert`, also reporting the format used and what was dropped."""
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{p} is a directory, not a session file")
    fmt = format_name(from_) if from_ is not None else detect(p)
    return ConvertResult(p, fmt, FORMATS[fmt](p, all_branches=all_branches))


# -- detection -------------------------------------------------------------------

_HEAD_LINES = 40
_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "file-history-snapshot", "queue-operation", "system"})
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


def detect(path: str | os.PathLike[str]) -> str:
    """The source format of *path*; :class:`ValueError` naming the file when unsure."""
    p = Path(path)
    objs = _head(p)
    if not objs:
        try:
            whole = orjson.loads(p.read_bytes())
        except (orjson.JSONDecodeError, OSError) as exc:
            raise ConvertError(f"{p}: cannot tell the format (not JSON or JSON Lines: {exc}); pass from_=/--from") from None
        objs = [whole]
        if isinstance(whole, list) and whole and (isinstance(whole[0], dict) and ("role" in whole[0] or "messages" in whole[0])):
            return "openai"
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            return "hermes" if _HERMES_KEYS & whole.keys() else "openai"
        raise ConvertError(f"{p}: cannot tell the format of this JSON file; pass from_=/--from ({', '.join(FORMATS)})")

    dicts = [o for o in objs if isinstance(o, dict)]
    first = objs[0] if isinstance(objs[0], dict) else {}
    ftype = first.get("type")
    if ftype == "session":
        if _looks_sts(dicts):
            raise ConvertError(f"{p} is already an STS trace; nothing to convert")
        return "pi"
    if ftype == "session_start":
        return "droid"
    if ftype in ("cursor_session_meta", "cursor_available_tools"):
        return "cursor"
    if any(o.get("type") in _CODEX_TYPES and isinstance(o.get("payload"), dict) for o in dicts):
        return "codex"
    if "instructions" in first and "id" in first and "timestamp" in first and "messages" not in first:
        return "codex"  # early rollouts: a bare meta line, then bare items
    if any(o.get("type") in _CLAUDE_TYPES and ("sessionId" in o or "uuid" in o) for o in dicts):
        return "claude-code"
    if all(o.get("type") in _CLAUDE_ONLY_TYPES for o in dicts):
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
    raise ConvertError(
        f"{p}: cannot tell which agent wrote this file; pass from_=/--from with one of: {', '.join(FORMATS)}"
    )


def _looks_sts(dicts: list[dict[str, Any]]) -> bool:
    if not isinstance(dicts[0].get("harness"), str):
        return False
    rest = dicts[1:]
    return all(
        o.get("type") == "message"
        and isinstance(o.get("message"), dict)
        and o["message"].get("role") in _STS_ROLES
        and "id" not in o
        for o in rest
    )


# -- writing ------------------------------------------------------------------------

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def output_name(trace: Trace) -> str:
    """A file name for *trace* from its session id (``<id>.jsonl``)."""
    stem = _UNSAFE.sub("_", trace.id).strip("._") or "session"
    return f"{stem[:200]}.jsonl"


def write_trace(trace: Trace, path: str | os.PathLike[str]) -> Path:
    """Write *trace* as a new STS file (mode 0600); never overwrites (:class:`FileExistsError`)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    chunks = [dumps(trace.header) + b"\n"]
    chunks.extend(b'{"type":"message","message":' + dumps(m) + b"}\n" for m in trace.messages)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(p, flags, 0o600)
    try:
        data = memoryview(b"".join(chunks))
        while data:
            n = os.write(fd, data)
            data = data[n:]
        os.fsync(fd)
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
