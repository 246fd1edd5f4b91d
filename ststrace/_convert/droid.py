"""Factory Droid sessions (``~/.factory/sessions/<project>/<id>.jsonl``).

A ``session_start`` line, then ``message`` lines with Anthropic-style content
blocks, in conversation order (the ``parentId`` links are not a reliable tree:
ids repeat). Messages marked ``visibility: "llm_only"`` were injected for the
model (system reminders) and become system messages. The model is not in the
session file; it is read from the ``<id>.settings.json`` beside it when present.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from ._anthropic import add_assistant, add_user
from ._common import Builder, Converted, iter_jsonl, str_or_none, to_ms

HARNESS = "droid"


def convert(path: Path, *, all_branches: bool = False) -> list[Converted]:
    dropped: Counter[str] = Counter()
    lines = [obj for _, obj in iter_jsonl(path, dropped) if isinstance(obj, dict)]
    start = next((o for o in lines if o.get("type") == "session_start"), {})
    sid = str_or_none(start.get("id")) or path.stem
    b = Builder(HARNESS, sid, dropped)
    b.name = str_or_none(start.get("sessionTitle")) or str_or_none(start.get("title"))
    settings = _settings(path, sid)
    model = str_or_none(settings.get("model"))
    b.metadata.update(
        cwd=str_or_none(start.get("cwd")),
        version=start.get("version") if isinstance(start.get("version"), (int, str)) else None,
        owner=str_or_none(start.get("owner")),
        model=model,
        reasoning_effort=str_or_none(settings.get("reasoningEffort")),
    )
    for obj in lines:
        if obj.get("type") != "message" or not isinstance(obj.get("message"), dict):
            continue
        msg = obj["message"]
        ts = to_ms(obj.get("timestamp"))
        role = msg.get("role")
        if role == "user":
            add_user(b, msg.get("content"), ts, as_system=msg.get("visibility") == "llm_only")
        elif role == "assistant":
            add_assistant(b, msg.get("content"), ts, str_or_none(msg.get("model")) or model)
        elif role == "system":
            add_user(b, msg.get("content"), ts, as_system=True)
        else:
            b.dropped[f"message:{role}"] += 1
    return [b.build()] if b.messages else []


def _settings(path: Path, sid: str) -> dict[str, Any]:
    for candidate in (path.with_name(f"{sid}.settings.json"), path.with_suffix(".settings.json")):
        try:
            data = orjson.loads(candidate.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if isinstance(data, dict):
            return data
    return {}
