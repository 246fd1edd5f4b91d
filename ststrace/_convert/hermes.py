"""Hermes Agent session exports: one whole session per line, with its
chat-completions ``messages`` and timestamps in epoch seconds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Mapping

from ._common import Builder, Converted, iter_jsonl, str_or_none, to_ms
from .openai import add_messages

HARNESS = "hermes"

_META = ("source", "cwd", "parent_session_id", "billing_provider", "end_reason")


def convert(path: Path, *, all_branches: bool = False) -> list[Converted]:
    dropped: Counter[str] = Counter()
    out: list[Converted] = []
    for n, obj in iter_jsonl(path, dropped):
        if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
            dropped["invalid_line"] += 1
            continue
        sid = str_or_none(obj.get("id")) or f"{path.stem}-{n}"
        b = Builder(HARNESS, sid, dropped if not out else Counter())
        b.name = str_or_none(obj.get("title"))
        model = str_or_none(obj.get("model"))
        b.metadata.update({k: obj[k] for k in _META if isinstance(obj.get(k), str) and obj[k]})
        b.metadata.update(
            model=model,
            timestamp=to_ms(obj.get("started_at")),
            ended_at=to_ms(obj.get("ended_at")),
        )
        prompt = obj.get("system_prompt")
        if isinstance(prompt, str) and prompt.strip():
            b.system(prompt, to_ms(obj.get("started_at")))
        messages = []
        for m in obj["messages"]:
            if isinstance(m, Mapping) and m.get("active") in (0, False):
                # Rewound away: not part of the conversation as it stands.
                b.dropped["inactive_message"] += 1
                continue
            messages.append(m)
        add_messages(b, messages, model=model)
        if b.messages:
            out.append(b.build())
    return out

