"""Cursor agent transcripts: ``{"role", "message": {"content": [...]}}`` lines
with Anthropic-style blocks, optionally led by a ``cursor_session_meta`` line
(session id, model) and a ``cursor_available_tools`` line (the tools' schemas, kept
as the first message's ``tools``), and followed by bookkeeping lines (``turn_ended``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .._tools import definitions, merge
from ._anthropic import add_assistant, add_user
from ._common import Builder, Converted, finish, iter_jsonl, str_or_none, to_ms

HARNESS = "cursor"


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    lines = [obj for _, obj in iter_jsonl(path, file_dropped) if isinstance(obj, dict)]
    meta = next((o for o in lines if o.get("type") == "cursor_session_meta"), {})
    sid = str_or_none(meta.get("session_id")) or str_or_none(meta.get("id")) or path.stem
    model = str_or_none(meta.get("model"))
    b = Builder(HARNESS, sid)
    b.name = str_or_none(meta.get("title")) or str_or_none(meta.get("name"))
    b.metadata.update(
        model=model,
        scope=str_or_none(meta.get("cursor_scope")),
        cwd=str_or_none(meta.get("cwd")) or str_or_none(meta.get("workspace")),
    )
    for obj in lines:
        role = obj.get("role")
        if role is None:
            continue  # meta, tool list and turn bookkeeping lines
        msg = obj.get("message")
        content = msg.get("content") if isinstance(msg, dict) else obj.get("content")
        ts = to_ms(obj.get("timestamp"))
        if role == "user":
            add_user(b, content, ts)
        elif role == "assistant":
            add_assistant(b, content, ts, model)
        elif role == "system":
            add_user(b, content, ts, as_system=True)
        else:
            b.dropped[f"message:{role}"] += 1
    tools = merge(definitions(o.get("tools")) for o in lines if o.get("type") == "cursor_available_tools")
    if tools and b.messages:
        b.messages[0]["tools"] = tools
    return finish([b], file_dropped)
