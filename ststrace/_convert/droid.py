"""Factory Droid sessions (``~/.factory/sessions/<project>/<id>.jsonl``).

A ``session_start`` line, then ``message`` lines with Anthropic-style content
blocks, in conversation order (the ``parentId`` links are not a reliable tree:
ids repeat). Messages marked ``visibility: "llm_only"`` were injected for the
model (system reminders) and become system messages. The model is the message's
own ``modelId`` when it has one, else the one in the ``<id>.settings.json``
beside the file. A ``compaction_state`` line (the history was summarised) is kept
as a system message holding its summary. Droid counts tokens per session only
(``tokenUsage`` in the settings file): they become the header's ``usage``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from ._anthropic import add_assistant, add_user
from ._common import Builder, Converted, finish, iter_jsonl, str_or_none, to_ms, usage_counts

HARNESS = "droid"


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    lines = [obj for _, obj in iter_jsonl(path, file_dropped) if isinstance(obj, dict)]
    start = next((o for o in lines if o.get("type") == "session_start"), {})
    sid = str_or_none(start.get("id")) or path.stem
    b = Builder(HARNESS, sid)
    b.name = str_or_none(start.get("sessionTitle")) or str_or_none(start.get("title"))
    settings = _settings(path, sid)
    model = str_or_none(settings.get("model"))
    b.metadata.update(
        cwd=str_or_none(start.get("cwd")),
        version=start.get("version") if isinstance(start.get("version"), (int, str)) else None,
        owner=str_or_none(start.get("owner")),
        model=model,
        reasoning_effort=str_or_none(settings.get("reasoningEffort")),
        usage=_session_usage(settings.get("tokenUsage"), b),
    )
    for obj in lines:
        ts = to_ms(obj.get("timestamp"))
        if obj.get("type") == "compaction_state":
            summary = obj.get("summaryText", obj.get("summary"))
            if isinstance(summary, str) and summary.strip():
                b.system(f"[compaction summary]\n{summary}", ts)
            continue
        if obj.get("type") != "message" or not isinstance(obj.get("message"), dict):
            continue
        msg = obj["message"]
        role = msg.get("role")
        if role == "user":
            add_user(b, msg.get("content"), ts, as_system=msg.get("visibility") == "llm_only")
        elif role == "assistant":
            own = str_or_none(msg.get("modelId")) or str_or_none(msg.get("model"))
            add_assistant(b, msg.get("content"), ts, own or model)
        elif role == "system":
            add_user(b, msg.get("content"), ts, as_system=True)
        else:
            b.dropped[f"message:{role}"] += 1
    return finish([b], file_dropped)


def _session_usage(raw: Any, b: Builder) -> dict[str, Any] | None:
    """The session's token counts from ``settings.json`` ``tokenUsage`` (Droid
    keeps totals only, no per-reply counts), in the Pi shape: a header field."""
    if not isinstance(raw, dict):
        return None
    usage = usage_counts(
        {
            "input_tokens": raw.get("inputTokens"),
            "output_tokens": raw.get("outputTokens"),
            "cache_read_input_tokens": raw.get("cacheReadTokens"),
            "cache_creation_input_tokens": raw.get("cacheCreationTokens"),
        },
        b.dropped,
    )
    thinking = raw.get("thinkingTokens")
    if usage is not None and isinstance(thinking, int) and not isinstance(thinking, bool) and thinking >= 0:
        usage["reasoning"] = thinking
    return usage


def _settings(path: Path, sid: str) -> dict[str, Any]:
    for candidate in (path.with_name(f"{sid}.settings.json"), path.with_suffix(".settings.json")):
        try:
            data = orjson.loads(candidate.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if isinstance(data, dict):
            return data
    return {}
