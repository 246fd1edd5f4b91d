"""Shared pieces of the converters: the trace builder that keeps every output
valid STS, and small helpers for timestamps, content blocks and arguments.

Every converter feeds a :class:`Builder`; the builder, not the converter, owns
the rules that make a file pass :func:`ststrace.validate`: tool results only
after their call, each call answered at most once, unique call ids, JSON-text
arguments, string content, no ``null`` fields.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import orjson

from .._text import content_text, json_text
from .._reader import Trace
from .._records import check_usage


@dataclass
class Converted:
    """One converted session and what could not be carried over into it.

    ``dropped`` maps a kind (``"image"``, ``"orphan_tool_result"``, ...) to how
    many such items of the source are missing from, or only a placeholder in,
    ``trace``. The counts are kept apart from ``trace.header`` so converted
    files carry no converter bookkeeping.
    """

    trace: Trace
    dropped: Counter[str] = field(default_factory=Counter)


#: The source formats, in the order messages list them (``FORMATS`` keys).
FORMAT_NAMES = ("pi", "claude-code", "codex", "hermes", "droid", "cursor", "openai", "sts", "gemini", "opencode", "cline")

#: What each format is called in messages ("this is a Pi session, not STS").
FORMAT_LABELS = {
    "pi": "a Pi session",
    "claude-code": "a Claude Code session",
    "codex": "a Codex session",
    "hermes": "a Hermes Agent session",
    "droid": "a Factory Droid session",
    "cursor": "a Cursor session",
    "openai": "an OpenAI messages file",
    "sts": "an STS trace",
    "gemini": "a Gemini CLI session",
    "opencode": "an OpenCode session",
    "cline": "a Cline task",
}


class ConvertError(ValueError):
    """A source file cannot be converted (unknown format, unreadable content).

    With ``needs_from`` the message ends with how to name the format; ``str()``
    says it the Python way (``from_=``), :meth:`cli_message` the command-line
    way (``--from``).
    """

    def __init__(self, message: str, *, needs_from: bool = False) -> None:
        self.message = message
        self.needs_from = needs_from
        super().__init__(message + self._hint("from_="))

    def _hint(self, option: str) -> str:
        return f"; pass {option} with one of: {', '.join(FORMAT_NAMES)}" if self.needs_from else ""

    def cli_message(self) -> str:
        return self.message + self._hint("--from")


# -- timestamps -----------------------------------------------------------------

_MS_THRESHOLD = 100_000_000_000  # numbers above this are already milliseconds (after 1973)
#: The last millisecond of year 9999: later "times" are garbage, not dates.
MAX_MS = 253_402_300_799_999


def to_ms(value: Any) -> int | None:
    """Epoch milliseconds from ISO-8601 text, epoch seconds or epoch milliseconds.

    ``None`` for anything that is not a time between 1970 and 9999 (NaN, ``1e30``,
    year 1): a timestamp is optional in STS, a wrong one is worse than none.
    """
    ms = _to_ms(value)
    if ms is None or not 0 < ms <= MAX_MS:
        return None
    return ms


def _to_ms(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if not -1e16 < value < 1e16:  # NaN, infinities and absurd magnitudes
            return None
        if value <= 0:
            return None
        if value >= _MS_THRESHOLD:
            return int(value)
        return int(round(value * 1000))
    if isinstance(value, str) and value and len(value) < 64:
        text = value.strip()
        try:
            return _to_ms(float(text))
        except ValueError:
            pass
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        # Python 3.10's fromisoformat wants 0, 3 or 6 fraction digits.
        m = re.match(r"^(.*T\d\d:\d\d:\d\d)\.(\d+)(.*)$", text)
        if m:
            text = f"{m.group(1)}.{(m.group(2) + '000000')[:6]}{m.group(3)}"
        try:
            dt = datetime.fromisoformat(text)
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            return int(dt.timestamp() * 1000)
        except (ValueError, OverflowError, OSError):
            return None
    return None


# -- content ----------------------------------------------------------------------


def placeholder(kind: str, mime: str | None = None) -> str:
    return f"[{kind}: {mime}]" if mime else f"[{kind}]"


def image_mime(block: Mapping[str, Any]) -> str | None:
    """The media type of an image block in any of the common shapes."""
    for key in ("mimeType", "mime_type", "media_type", "mediaType"):
        v = block.get(key)
        if isinstance(v, str) and v:
            return v
    src = block.get("source")
    if isinstance(src, Mapping):
        for key in ("media_type", "mediaType", "mime_type"):
            v = src.get(key)
            if isinstance(v, str) and v:
                return v
    url = block.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    if isinstance(url, str):
        m = re.match(r"data:([\w.+-]+/[\w.+-]+)[;,]", url)
        if m:
            return m.group(1)
    return None


_IMAGE_TYPES = frozenset({"image", "image_url", "input_image", "output_image"})
_TEXT_TYPES = frozenset({"text", "input_text", "output_text", "summary_text", "reasoning_text"})


def blocks_text(content: Any, dropped: Counter[str], *, sep: str = "\n") -> str:
    """Text of a content value: a string, or a list of blocks in any of the
    usual shapes (Anthropic, OpenAI chat, OpenAI responses, Pi). Images become
    placeholders; other non-text blocks become their JSON text. Both are counted.
    Blocks holding only whitespace are left out when there is other text (agents
    write ``"\n\n"`` blocks between the real ones)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return content_text(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        if not isinstance(block, Mapping):
            parts.append(content_text(block))
            continue
        parts.append(block_text(block, dropped))
    if len(parts) > 1:
        kept = [p for p in parts if p.strip()]
        parts = kept or parts[:1]
    return sep.join(parts)


def block_kind(block: Mapping[str, Any]) -> str | None:
    """A block's ``type`` when it is a string (sources in the wild hold lists, numbers, ...)."""
    kind = block.get("type")
    return kind if isinstance(kind, str) else None


def block_text(block: Mapping[str, Any], dropped: Counter[str]) -> str:
    """Text of one content block (see :func:`blocks_text`)."""
    kind = block_kind(block)
    if kind in _TEXT_TYPES or (kind is None and isinstance(block.get("text"), str)):
        return content_text(block.get("text"))
    if kind in _IMAGE_TYPES:
        dropped["image"] += 1
        return placeholder("image", image_mime(block))
    if kind == "refusal":
        return content_text(block.get("refusal"))
    if kind in ("input_audio", "audio"):
        dropped["audio"] += 1
        audio = block.get("input_audio")
        fmt = block.get("format") or (audio.get("format") if isinstance(audio, Mapping) else None)
        return placeholder("audio", f"audio/{fmt}" if isinstance(fmt, str) else None)
    if kind in ("document", "file", "input_file"):
        dropped[kind] += 1
        src = block.get("source")
        mime = src.get("media_type") if isinstance(src, Mapping) else None
        return placeholder(kind, mime if isinstance(mime, str) else None)
    if kind == "tool_reference" and isinstance(block.get("tool_name"), str):
        return f"[tool: {block['tool_name']}]"
    dropped[f"block:{kind}" if kind is not None else "block:untyped"] += 1
    return json_text(block)


def arguments_json(value: Any) -> str:
    """Tool-call arguments as JSON text. Text that is not JSON (a truncated
    call, a free-form tool input) is kept inside ``{"input": ...}``."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        if not value.strip():
            return "{}"
        try:
            orjson.loads(value)
            return value
        except orjson.JSONDecodeError:
            return json_text({"input": value})
    return json_text(value)


def usage_counts(raw: Any, dropped: Counter[str]) -> dict[str, Any] | None:
    """A source's token usage (any provider shape :func:`ststrace._records.check_usage`
    reads) in the Pi shape, cache reads and writes apart from ``input``; ``None``
    when there is none or all counts are zero (agents write zeros for a reply
    that was never sent). A malformed report is counted as ``invalid_usage``."""
    if raw is None:
        return None
    try:
        usage = check_usage(raw)
    except ValueError:
        dropped["invalid_usage"] += 1
        return None
    if not any(usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens")):
        return None
    cost = usage.get("cost")
    if isinstance(cost, dict) and not any(cost.values()):
        del usage["cost"]  # no prices known (Pi's zeros), not a free reply
    return usage


def add_usage(msg: dict[str, Any], usage: Mapping[str, Any]) -> None:
    """Add *usage* to the counts *msg* already carries (two model calls merged into one message)."""
    prev = msg.get("usage")
    if not isinstance(prev, dict):
        msg["usage"] = dict(usage)
        return
    for key, value in usage.items():
        if isinstance(value, int) and isinstance(prev.get(key, 0), int):
            prev[key] = prev.get(key, 0) + value
        elif key == "cost" and isinstance(value, Mapping) and isinstance(prev.get("cost"), dict):
            for k, v in value.items():
                prev["cost"][k] = prev["cost"].get(k, 0) + v


def mark_error(text: str, is_error: bool) -> str:
    if not is_error:
        return text
    if text.lstrip().lower().startswith("error"):
        return text
    return f"Error: {text}" if text else "Error"


# -- reading sources ----------------------------------------------------------------


def iter_jsonl(path: Path, dropped: Counter[str] | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for each non-blank line; a line that is not
    JSON is skipped and counted (agents leave torn last lines behind)."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield n, orjson.loads(raw)
            except orjson.JSONDecodeError:
                if dropped is not None:
                    dropped["invalid_line"] += 1


def shorten(text: str, limit: int = 80) -> str | None:
    """A title from a prompt: its first non-blank line, whitespace collapsed, at most *limit* characters."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    if not line:
        return None
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# -- the builder -----------------------------------------------------------------------


class Builder:
    """Accumulates STS messages for one session and keeps them valid."""

    def __init__(self, harness: str, session_id: str, dropped: Counter[str] | None = None) -> None:
        self.harness = harness
        self.session_id = session_id
        self.name: str | None = None
        self.metadata: dict[str, Any] = {}
        self.messages: list[dict[str, Any]] = []
        self.dropped: Counter[str] = dropped if dropped is not None else Counter()
        self._used_ids: set[str] = set()
        self._id_map: dict[str, str] = {}  # source call id -> STS id of its latest call
        self._answered: set[str] = set()
        self._auto = 0

    # -- messages ------------------------------------------------------

    def _add(self, role: str, content: str, timestamp: int | None, **extra: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": role, "content": content}
        for key, value in extra.items():
            if value is not None and value != "" and value != []:
                msg[key] = value
        if timestamp is not None:
            msg["timestamp"] = timestamp
        self.messages.append(msg)
        return msg

    def user(self, content: str, timestamp: int | None = None) -> dict[str, Any]:
        return self._add("user", content, timestamp)

    def system(self, content: str, timestamp: int | None = None) -> dict[str, Any]:
        return self._add("system", content, timestamp)

    def assistant(
        self,
        content: str = "",
        *,
        reasoning: str | None = None,
        tool_calls: Iterable[tuple[str | None, str, Any]] = (),
        model: str | None = None,
        timestamp: int | None = None,
    ) -> dict[str, Any]:
        """Add an assistant message; ``tool_calls`` are ``(source id, name, arguments)``."""
        msg = self._add("assistant", content, timestamp, reasoningContent=reasoning or None, model=model or None)
        for call in tool_calls:
            self.add_tool_call(msg, *call)
        self._reorder(msg)
        return msg

    def add_tool_call(self, msg: dict[str, Any], source_id: str | None, name: str, arguments: Any) -> str:
        """Attach one call to assistant message *msg* (which may already be in the trace)."""
        sts_id = self._new_call_id(source_id)
        if source_id:
            self._id_map[source_id] = sts_id
        entry = {"id": sts_id, "function": {"name": name or "unknown", "arguments": arguments_json(arguments)}}
        msg.setdefault("toolCalls", []).append(entry)
        self._reorder(msg)
        return sts_id

    def extend_assistant(
        self, msg: dict[str, Any], *, text: str = "", reasoning: str = "", model: str | None = None
    ) -> None:
        """Append text / reasoning to an assistant message already added."""
        if text and (text.strip() or not msg["content"]):
            if msg["content"] and not msg["content"].strip():
                msg["content"] = text  # a blank block before the real text
            else:
                msg["content"] = f"{msg['content']}\n\n{text}" if msg["content"] else text
        if reasoning and reasoning.strip():
            prev = msg.get("reasoningContent")
            msg["reasoningContent"] = f"{prev}\n\n{reasoning}" if prev else reasoning
        if model and "model" not in msg:
            msg["model"] = model
        self._reorder(msg)

    @staticmethod
    def _reorder(msg: dict[str, Any]) -> None:
        # A stable key order keeps the output readable and diff-friendly.
        order = ("role", "content", "reasoningContent", "toolCalls", "toolCallId", "model", "timestamp")
        items = [(k, msg[k]) for k in order if k in msg] + [(k, v) for k, v in msg.items() if k not in order]
        msg.clear()
        msg.update(items)

    def tool_result(
        self, source_id: str | None, content: str, *, is_error: bool = False, timestamp: int | None = None
    ) -> dict[str, Any] | None:
        """Add the result of call *source_id*; a result whose call is not in
        the trace, or that answers a call a second time, is dropped and counted."""
        sts_id = self._id_map.get(source_id) if source_id else None
        if sts_id is None:
            self.dropped["orphan_tool_result"] += 1
            return None
        if sts_id in self._answered:
            self.dropped["duplicate_tool_result"] += 1
            return None
        self._answered.add(sts_id)
        return self._add("tool", mark_error(content, is_error), timestamp, toolCallId=sts_id)

    def _new_call_id(self, source_id: str | None) -> str:
        base = source_id if source_id else None
        if base is None:
            self._auto += 1
            base = f"call_{self._auto}"
        candidate, n = base, 1
        # Some models number calls per response ("functions.read:0"), so the
        # same id comes back later; STS needs ids unique within the file.
        while candidate in self._used_ids:
            n += 1
            candidate = f"{base}#{n}"
        self._used_ids.add(candidate)
        return candidate

    # -- kept between runs (``hooks``) ---------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """What continuing needs, as JSON values (the messages held, not the header)."""
        # A call already answered can take no other result: left out, its
        # next result is dropped as an orphan instead of a duplicate (both dropped).
        return {
            "messages": self.messages,
            "used": list(self._used_ids),
            "map": {k: v for k, v in self._id_map.items() if v not in self._answered},
            "answered": [],
            "auto": self._auto,
            "dropped": dict(self.dropped),
        }

    @classmethod
    def restore(cls, harness: str, snap: Mapping[str, Any]) -> Builder:
        b = cls(harness, "", Counter(snap["dropped"]))
        b.messages = list(snap["messages"])
        b._used_ids = set(snap["used"])
        b._id_map = dict(snap["map"])
        b._answered = set(snap["answered"])
        b._auto = int(snap["auto"])
        return b

    # -- result -------------------------------------------------------------

    def build(self) -> Converted:
        header: dict[str, Any] = {"type": "session", "harness": self.harness, "id": self.session_id}
        if self.name:
            header["name"] = self.name
        for key, value in self.metadata.items():
            if key not in header and value is not None and value != {} and value != "":
                header[key] = value
        return Converted(Trace(header=header, messages=self.messages), self.dropped)


def finish(builders: Iterable[Builder], file_dropped: Counter[str]) -> list[Converted]:
    """The traces of the builders that hold messages; what the empty ones
    dropped (an orphan result in an otherwise empty subagent) stays counted
    with the file."""
    out: list[Converted] = []
    for b in builders:
        if b.messages:
            out.append(b.build())
        else:
            file_dropped.update(b.dropped)
    return out
