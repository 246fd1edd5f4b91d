"""OpenAI-style ``messages`` lists: a JSON file (one conversation, or a list of
them) or a JSONL file (one ``{"messages": [...]}`` conversation per line, or one
message per line). Also the message converter used by other formats whose
sessions store chat-completions messages (Hermes)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

import orjson

from ._common import Builder, ConvertError, Converted, blocks_text, finish, iter_jsonl, str_or_none, to_ms

HARNESS = "openai"


def add_messages(b: Builder, messages: Iterable[Any], *, model: str | None = None) -> None:
    """Append chat-completions messages to *b*."""
    for msg in messages:
        if not isinstance(msg, Mapping):
            b.dropped["invalid_message"] += 1
            continue
        role = msg.get("role")
        ts = to_ms(msg.get("timestamp", msg.get("created_at")))
        content = blocks_text(msg.get("content"), b.dropped)
        if role in ("system", "developer"):
            b.system(content, ts)
        elif role == "user":
            b.user(content, ts)
        elif role == "assistant":
            if not content and isinstance(msg.get("refusal"), str):
                content = msg["refusal"]
            reasoning = msg.get("reasoning_content") or msg.get("reasoning")
            calls: list[tuple[str | None, str, Any]] = []
            raw_calls = msg.get("tool_calls")
            if raw_calls is not None and not isinstance(raw_calls, list):
                b.dropped["invalid_tool_calls"] += 1
                raw_calls = None
            for call in raw_calls or []:
                if not isinstance(call, Mapping):
                    b.dropped["invalid_tool_call"] += 1
                    continue
                fn_field = call.get("function")
                fn: Mapping[str, Any] = fn_field if isinstance(fn_field, Mapping) else call
                call_name = fn.get("name")
                calls.append(
                    (
                        str_or_none(call.get("id")) or str_or_none(call.get("call_id")),
                        call_name if isinstance(call_name, str) else "",
                        fn.get("arguments"),
                    )
                )
            legacy = msg.get("function_call")
            if isinstance(legacy, Mapping):
                # Pre-tools API: no id; the "function" message that follows answers it by name.
                legacy_name = legacy.get("name")
                fname = legacy_name if isinstance(legacy_name, str) else ""
                calls.append((f"function:{fname}", fname, legacy.get("arguments")))
            b.assistant(
                content,
                reasoning=reasoning if isinstance(reasoning, str) else None,
                tool_calls=calls,
                model=str_or_none(msg.get("model")) or model,
                timestamp=ts,
            )
        elif role == "tool":
            b.tool_result(str_or_none(msg.get("tool_call_id")), content, is_error=msg.get("is_error") is True, timestamp=ts)
        elif role == "function":
            result_name = msg.get("name")
            b.tool_result(f"function:{result_name if isinstance(result_name, str) else ''}", content, timestamp=ts)
        else:
            b.dropped[f"message:{role}"] += 1


def _is_message(obj: Any) -> bool:
    return isinstance(obj, Mapping) and isinstance(obj.get("role"), str)


def _conversation(obj: Any) -> list[Any] | None:
    if isinstance(obj, Mapping):
        messages = obj.get("messages")
        return messages if isinstance(messages, list) else None
    # A list of objects, some of them messages (the others are counted when added).
    if isinstance(obj, list) and obj and all(isinstance(m, Mapping) for m in obj) and any(_is_message(m) for m in obj):
        return obj
    return None


def load(path: Path, dropped: Counter[str]) -> list[tuple[Mapping[str, Any], list[Any]]]:
    """(record, messages) pairs in the file; the record holds id/model/title if any."""
    data = path.read_bytes()
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        whole = None
    if whole is not None:
        conv = _conversation(whole)
        if conv is not None:
            return [(whole if isinstance(whole, Mapping) else {}, conv)]
        if isinstance(whole, list) and whole and all(_conversation(x) is not None for x in whole):
            return [(x if isinstance(x, Mapping) else {}, _conversation(x) or []) for x in whole]
        raise ConvertError(f"{path}: JSON is neither a messages list nor a {{\"messages\": [...]}} object")
    rows = [obj for _, obj in iter_jsonl(path, dropped)]
    if rows and all(_conversation(r) is not None for r in rows):
        return [(r if isinstance(r, Mapping) else {}, _conversation(r) or []) for r in rows]
    if rows and all(_is_message(r) for r in rows):
        return [({}, rows)]
    raise ConvertError(f"{path}: lines are neither OpenAI messages nor {{\"messages\": [...]}} objects")


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    convs = load(path, file_dropped)
    builders: list[Builder] = []
    for i, (record, messages) in enumerate(convs):
        sid = (
            str_or_none(record.get("id"))
            or str_or_none(record.get("session_id"))
            or (path.stem if len(convs) == 1 else f"{path.stem}-{i + 1}")
        )
        b = Builder(HARNESS, sid)
        b.name = str_or_none(record.get("title")) or str_or_none(record.get("name"))
        model = str_or_none(record.get("model"))
        b.metadata.update(model=model, timestamp=to_ms(record.get("created_at", record.get("timestamp"))))
        add_messages(b, messages, model=model)
        builders.append(b)
    return finish(builders, file_dropped)
