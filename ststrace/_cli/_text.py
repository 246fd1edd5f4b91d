"""Plain-text transcript of a trace, for ``ststrace cat`` and ``ststrace tail``."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
from typing import Any, TextIO

import orjson

__all__ = ["Transcript", "fmt_duration", "is_error", "sanitize", "use_color"]

_RESET = "\033[0m"
_STYLES = {
    "user": "\033[1;34m",
    "assistant": "\033[1;35m",
    "system": "\033[1;33m",
    "tool": "\033[1;32m",
    "unknown": "\033[1m",
    "error": "\033[1;31m",
    "warn": "\033[33m",
    "dim": "\033[2m",
    "bold": "\033[1m",
    "fn": "\033[32m",
}

# Trace text is untrusted: an escape sequence in a tool result must not be able to
# rewrite the user's terminal. Keep newlines and tabs, show every other control.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sanitize(text: str) -> str:
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def is_error(content: str) -> bool:
    """A tool result is an error when its text starts with ``Error:``."""
    return content.lstrip().startswith("Error:")


def use_color(stream: TextIO, no_color: bool) -> bool:
    if no_color or os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def fmt_duration(ms: float) -> str:
    if ms < 0:
        return "-" + fmt_duration(-ms)
    if ms < 1000:
        return f"{ms:.0f} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m {sec:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"


#: Values nested deeper than this print as a marker: the file may nest up to
#: JSON parsers' limits (about 1,000), which recursive printing cannot reach.
MAX_DEPTH = 32
_TOO_DEEP = f"…(nested deeper than {MAX_DEPTH} levels: not shown)"


def _shallow(value: Any, depth: int = 0) -> Any:
    """*value* with containers below MAX_DEPTH replaced by a visible marker."""
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return _TOO_DEEP
        return {k: _shallow(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            return _TOO_DEEP
        return [_shallow(v, depth + 1) for v in value]
    return value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(_shallow(value), ensure_ascii=False, default=repr)


def _local(ms: int) -> _dt.datetime | None:
    try:
        return _dt.datetime.fromtimestamp(ms / 1000).astimezone()
    except (OverflowError, OSError, ValueError):
        return None


def _pretty_args(arguments: Any) -> str:
    if not isinstance(arguments, str):
        return _text(arguments)
    try:
        value = orjson.loads(arguments)  # iterative-safe to its own depth limit
    except (ValueError, RecursionError):
        return arguments
    if value == {}:
        return "{}"
    return json.dumps(_shallow(value), indent=2, ensure_ascii=False)


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.split("\n"))


class Transcript:
    """Writes a header and messages as readable text; remembers what it needs to pair.

    It keeps the call-id -> tool-name table and the previous timestamp, so a
    streamed trace (``tail``) reads the same as a whole one (``cat``).
    """

    def __init__(self, out: TextIO | None = None, *, color: bool = False) -> None:
        self.out = out if out is not None else sys.stdout
        self.color = color
        self._calls: dict[str, tuple[str, int | None]] = {}
        self._prev_ts: int | None = None
        self._prev_date: _dt.date | None = None

    def _c(self, style: str, text: str) -> str:
        if not self.color or not text:
            return text
        return f"{_STYLES[style]}{text}{_RESET}"

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")

    def header(self, header: dict[str, Any], note: str | None = None) -> None:
        name = header.get("name")
        title = sanitize(_text(name)) if name not in (None, "") else "Untitled session"
        self._write(self._c("bold", "# " + title))
        if note:
            self._write(self._c("dim", f"  {note}"))
        facts = []
        for key in ("harness", "id"):
            if key in header:
                facts.append(f"{key} {sanitize(_text(header[key]))}")
        if facts:
            self._write(self._c("dim", "  " + " · ".join(facts)))
        for key, value in header.items():
            if key in ("type", "harness", "id", "name"):
                continue
            self._write(self._c("dim", f"  {sanitize(key)}: ") + sanitize(_text(value)))
        self._write("")

    def _time(self, ts: Any) -> list[str]:
        if isinstance(ts, bool) or not isinstance(ts, int):
            return []
        parts: list[str] = []
        when = _local(ts)
        if when is not None:
            fmt = "%H:%M:%S" if when.date() == self._prev_date else "%Y-%m-%d %H:%M:%S"
            parts.append(when.strftime(fmt))
            self._prev_date = when.date()
        if self._prev_ts is not None:
            gap = ts - self._prev_ts
            parts.append(("-" if gap < 0 else "+") + fmt_duration(abs(gap)))
        self._prev_ts = ts
        return parts

    def remember(self, msg: dict[str, Any]) -> None:
        """Take note of a message without printing it (older than ``tail -n``)."""
        ts = msg.get("timestamp")
        ts = ts if isinstance(ts, int) and not isinstance(ts, bool) else None
        if ts is not None:
            self._prev_ts = ts
            when = _local(ts)
            self._prev_date = when.date() if when is not None else self._prev_date
        calls = msg.get("toolCalls")
        if isinstance(calls, list):
            for tc in calls:
                fn = tc.get("function") if isinstance(tc, dict) else None
                name = _text(fn.get("name")) if isinstance(fn, dict) else ""
                cid = tc.get("id") if isinstance(tc, dict) else None
                if isinstance(cid, str):
                    self._calls[cid] = (name or "(unnamed tool)", ts)

    def message(self, msg: dict[str, Any]) -> None:
        role = msg.get("role")
        role_s = role if role in ("user", "assistant", "system", "tool") else "unknown"
        content = _text(msg.get("content"))
        label = [self._c(role_s, str(role).upper() if isinstance(role, str) else "?")]
        error = False
        if role == "tool":
            cid = msg.get("toolCallId")
            call = self._calls.get(cid) if isinstance(cid, str) else None
            if call is not None:
                label.append(self._c("fn", sanitize(call[0])) + self._c("dim", f" ({sanitize(str(cid))})"))
            elif cid is not None:
                label.append(self._c("warn", f"answers unknown call {sanitize(_text(cid))}"))
            error = is_error(content)
            if error:
                label.append(self._c("error", "ERROR"))
        model = msg.get("model")
        if isinstance(model, str) and model:
            label.append(self._c("dim", sanitize(model)))
        ts = msg.get("timestamp")
        when = self._time(ts)
        if role == "tool" and isinstance(ts, int) and not isinstance(ts, bool):
            cid = msg.get("toolCallId")
            call = self._calls.get(cid) if isinstance(cid, str) else None
            if call is not None and call[1] is not None:
                when = [w for w in when if not w.startswith("+")] + ["took " + fmt_duration(ts - call[1])]
        label.extend(self._c("dim", w) for w in when)
        self._write(" · ".join(label))

        reasoning = _text(msg.get("reasoningContent"))
        if reasoning:
            self._write(self._c("dim", _indent(sanitize(reasoning), "  │ ")))
        if content:
            body = _indent(sanitize(content), "  ")
            self._write(self._c("error", body) if error else body)
        calls = msg.get("toolCalls")
        if isinstance(calls, list):
            for tc in calls:
                fn = tc.get("function") if isinstance(tc, dict) else None
                fn = fn if isinstance(fn, dict) else {}
                name = _text(fn.get("name")) or "(unnamed tool)"
                cid = tc.get("id") if isinstance(tc, dict) else None
                if isinstance(cid, str):
                    self._calls[cid] = (name, ts if isinstance(ts, int) and not isinstance(ts, bool) else None)
                suffix = self._c("dim", f" ({sanitize(_text(cid))})") if cid is not None else ""
                self._write("  " + self._c("fn", "→ " + sanitize(name)) + suffix)
                args = _pretty_args(fn.get("arguments"))
                if args:
                    self._write(_indent(sanitize(args), "      "))
        if not content and not reasoning and not (isinstance(calls, list) and calls):
            self._write(self._c("dim", "  (empty)"))
        self._write("")
