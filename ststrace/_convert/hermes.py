"""Hermes Agent sessions, in the three layouts found in the wild:

- exports: one whole session per line (``{"id", "model", "started_at",
  "messages": [...]}``, timestamps in epoch seconds);
- the same exported as (pretty-printed) JSON: one session object, or a list;
- gateway transcripts (``~/.hermes/sessions/<id>.jsonl``): a first line
  ``{"role": "session_meta", "tools": [...], "model": ..., "platform": ...}``,
  then one chat-completions message per line. The session id is the file name.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import orjson

from ._common import Builder, ConvertError, Converted, finish, iter_jsonl, str_or_none, to_ms, usage_counts
from .openai import add_messages

HARNESS = "hermes"

_META = ("source", "cwd", "parent_session_id", "billing_provider", "end_reason")


def is_transcript_meta(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("role") == "session_meta"


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    torn: Counter[str] = Counter()  # counted only if the file is read as lines
    rows = list(iter_jsonl(path, torn))
    if rows and is_transcript_meta(rows[0][1]):
        file_dropped.update(torn)
        return finish([_transcript(path, [obj for _, obj in rows])], file_dropped)
    sessions: list[tuple[int, Any]]
    if rows and all(isinstance(obj, dict) and isinstance(obj.get("messages"), list) for _, obj in rows):
        file_dropped.update(torn)
        sessions = rows
    else:
        # Not one session per line: a JSON document (pretty-printed, or a list).
        try:
            whole = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            if not rows:
                raise ConvertError(f"{path}: neither JSON Lines nor a JSON document") from None
            file_dropped.update(torn)
            sessions = rows
        else:
            if isinstance(whole, dict) and is_transcript_meta(whole):
                raise ConvertError(f"{path}: a session_meta line and nothing else")
            items = whole if isinstance(whole, list) else [whole]
            sessions = list(enumerate(items, 1))
    builders: list[Builder] = []
    for n, obj in sessions:
        if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
            file_dropped["invalid_session"] += 1
            continue
        builders.append(_session(path, n, obj, many=len(sessions) > 1))
    return finish(builders, file_dropped)


def _session(path: Path, n: int, obj: Mapping[str, Any], *, many: bool) -> Builder:
    sid = str_or_none(obj.get("id")) or (f"{path.stem}-{n}" if many else path.stem)
    b = Builder(HARNESS, sid)
    b.name = str_or_none(obj.get("title"))
    model = str_or_none(obj.get("model"))
    b.metadata.update({k: obj[k] for k in _META if isinstance(obj.get(k), str) and obj[k]})
    b.metadata.update(model=model, timestamp=to_ms(obj.get("started_at")), ended_at=to_ms(obj.get("ended_at")))
    b.metadata["usage"] = _session_usage(obj, b)
    prompt = obj.get("system_prompt")
    if isinstance(prompt, str) and prompt.strip():
        b.system(prompt, to_ms(obj.get("started_at")))
    messages = []
    for m in obj["messages"]:
        if isinstance(m, Mapping) and m.get("active") in (0, False):
            # Rewound away: not part of the conversation as it stands.
            b.dropped["inactive_message"] += 1
            continue
        if is_transcript_meta(m):
            continue
        messages.append(m)
    add_messages(b, messages, model=model)
    return b


def _transcript(path: Path, rows: list[Any]) -> Builder:
    meta: Mapping[str, Any] = rows[0]
    b = Builder(HARNESS, path.stem)
    model = str_or_none(meta.get("model"))
    tools = meta.get("tools")
    names = [
        t["function"]["name"]
        for t in (tools if isinstance(tools, list) else [])
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
    ]
    b.metadata.update(
        model=model,
        source=str_or_none(meta.get("platform")),
        timestamp=to_ms(meta.get("timestamp")),
        tools=names or None,
    )
    messages: list[Any] = []
    for obj in rows[1:]:
        if is_transcript_meta(obj):
            # A resumed session writes a new meta line: later replies use its model.
            if messages:
                add_messages(b, messages, model=model)
                messages = []
            model = str_or_none(obj.get("model")) or model
            continue
        messages.append(obj)
    add_messages(b, messages, model=model)
    return b


def _session_usage(obj: Mapping[str, Any], b: Builder) -> dict[str, Any] | None:
    """Hermes counts tokens per session only (``input_tokens`` apart from the cache):
    the header's ``usage``, in the Pi shape."""
    if not any(isinstance(obj.get(k), int) for k in ("input_tokens", "output_tokens")):
        return None
    raw = {
        "input": obj.get("input_tokens") or 0,
        "output": obj.get("output_tokens") or 0,
        "cacheRead": obj.get("cache_read_tokens") or 0,
        "cacheWrite": obj.get("cache_write_tokens") or 0,
    }
    if obj.get("reasoning_tokens"):
        raw["reasoning"] = obj["reasoning_tokens"]
    return usage_counts(raw, b.dropped)
