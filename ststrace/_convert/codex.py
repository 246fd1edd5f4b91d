"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Lines are ``{timestamp, type, payload}``. The conversation is in
``response_item`` payloads (what the model saw and said); ``event_msg`` lines
mostly repeat it for the UI, except ``user_message``, which is the prompt as
the user typed it. A prompt appears both ways and is recorded once. User-role
``response_item`` messages that the user did not type (environment context,
AGENTS.md) become system messages when the rollout has ``user_message`` events
to tell them apart. ``token_count`` events give each reply its ``usage``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from .._text import content_text, json_text
from ._common import (
    Builder,
    Converted,
    add_usage,
    blocks_text,
    finish,
    image_mime,
    iter_jsonl,
    placeholder,
    shorten,
    str_or_none,
    to_ms,
    usage_counts,
)

HARNESS = "codex"

_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output"})


def convert(path: Path, *, all_branches: bool = False, dropped: Counter[str] | None = None) -> list[Converted]:
    file_dropped = dropped if dropped is not None else Counter()
    lines = [obj for _, obj in iter_jsonl(path, file_dropped) if isinstance(obj, dict)]
    items = [_normalize(obj, i == 0) for i, obj in enumerate(lines)]

    meta_payload: Mapping[str, Any] = next((p for t, p, _ in items if t == "session_meta"), {})
    session_id = str_or_none(meta_payload.get("id")) or path.stem
    b = Builder(HARNESS, session_id)
    git = meta_payload.get("git")
    b.metadata.update(
        cwd=str_or_none(meta_payload.get("cwd")),
        version=str_or_none(meta_payload.get("cli_version")),
        originator=str_or_none(meta_payload.get("originator")),
        source=meta_payload.get("source") if isinstance(meta_payload.get("source"), str) else None,
        model_provider=str_or_none(meta_payload.get("model_provider")),
        timestamp=to_ms(meta_payload.get("timestamp")),
        git={k: v for k, v in git.items() if v is not None} if isinstance(git, dict) and git else None,
    )

    typed = [_event_text(p).strip() for t, p, _ in items if t == "event_msg" and p.get("type") == "user_message"]
    has_events = bool(typed)
    pending_from_events: Counter[str] = Counter(typed)  # prompts not yet recorded
    recorded_by_event: Counter[str] = Counter()  # recorded from event_msg, response_item still to come
    recorded_by_item: Counter[str] = Counter()  # recorded from response_item, event_msg still to come

    base = meta_payload.get("base_instructions") or meta_payload.get("instructions")
    base_text = base.get("text") if isinstance(base, dict) else base
    if isinstance(base_text, str) and base_text.strip():
        b.system(base_text, to_ms(meta_payload.get("timestamp")))

    model: str | None = str_or_none(meta_payload.get("model"))
    current: dict[str, Any] | None = None  # the assistant message being assembled
    last_reply: dict[str, Any] | None = None  # the latest assistant message, for token_count
    last_total: Any = None  # the previous token_count's running total

    def assistant_msg(ts: int | None) -> dict[str, Any]:
        nonlocal current, last_reply
        if current is None:
            current = last_reply = b.assistant("", model=model, timestamp=ts)
        return current

    for kind, p, ts in items:
        ptype = p.get("type") if isinstance(p.get("type"), str) else None
        if kind == "turn_context":
            model = str_or_none(p.get("model")) or model
            current = None
        elif kind == "event_msg":
            if ptype == "user_message":
                text = _event_text(p)
                key = text.strip()
                if recorded_by_item[key] > 0:
                    recorded_by_item[key] -= 1
                    continue
                current = None
                images = _images(p.get("images")) + _images(p.get("local_images"))
                if images:
                    b.dropped["image"] += len(images)
                    text = "\n".join([text, *images])
                b.user(text, ts)
                pending_from_events[key] -= 1
                recorded_by_event[key] += 1
            elif ptype in ("task_started", "task_complete", "turn_aborted"):
                current = None
            elif ptype == "token_count":
                last_total = _token_count(b, p, last_reply, last_total)
            # agent_message, agent_reasoning, exec/patch events repeat
            # response items or carry no conversation content.
        elif kind == "response_item":
            if ptype == "message":
                role = p.get("role")
                # Counted only once the message is kept: a prompt's copy that
                # is skipped must not count its images a second time.
                seen: Counter[str] = Counter()
                content = _unwrap_images(p.get("content"))
                text = blocks_text(content, seen)
                if role == "assistant":
                    b.extend_assistant(assistant_msg(ts), text=text)
                elif role == "user":
                    # The typed prompt (event_msg) holds the text blocks only.
                    key = _prompt_key(content)
                    current = None
                    if recorded_by_event[key] > 0:
                        recorded_by_event[key] -= 1
                        continue
                    if pending_from_events[key] > 0:
                        b.user(text, ts)
                        pending_from_events[key] -= 1
                        recorded_by_item[key] += 1
                    elif has_events:
                        b.system(text, ts)
                    else:
                        b.user(text, ts)
                elif role in ("developer", "system"):
                    current = None
                    b.system(text, ts)
                else:
                    b.dropped[f"message:{role}"] += 1
                    continue
                b.dropped.update(seen)
            elif ptype == "reasoning":
                summary = p.get("summary")
                text = blocks_text(summary, b.dropped, sep="\n\n") if summary else ""
                if not text and isinstance(p.get("content"), list):
                    text = blocks_text(p["content"], b.dropped, sep="\n\n")
                if text:
                    b.extend_assistant(assistant_msg(ts), reasoning=text)
            elif ptype in _CALLS:
                name, args = _call(p)
                call_id = str_or_none(p.get("call_id")) or str_or_none(p.get("id"))
                b.add_tool_call(assistant_msg(ts), call_id, name, args)
            elif ptype in _OUTPUTS:
                current = None
                text, is_error = _output(p.get("output"), b)
                b.tool_result(str_or_none(p.get("call_id")), text, is_error=is_error, timestamp=ts)
            else:
                b.dropped[f"item:{ptype}"] += 1
        elif kind == "compacted":
            current = None
            summary = p.get("message")
            if isinstance(summary, str) and summary.strip():
                b.system(f"[compaction summary]\n{summary}", ts)
    # Codex keeps no title: the first prompt names the session, as Claude Code's
    # and Gemini CLI's converters do.
    first = next((m["content"] for m in b.messages if m["role"] == "user" and m["content"].strip()), None)
    b.name = shorten(first) if first is not None else None
    return finish([b], file_dropped)


def _token_count(b: Builder, p: Mapping[str, Any], reply: dict[str, Any] | None, last_total: Any) -> Any:
    """Attach a ``token_count`` event's counts to the reply they are for; returns the running total.

    Codex repeats the event (after the reply, and again after its tool outputs)
    with the same running total: only a changed total is a new model call.
    ``last_token_usage`` is that call's own counts (OpenAI style: ``input_tokens``
    includes ``cached_input_tokens``, ``output_tokens`` includes the reasoning);
    early rollouts put the counts in the payload itself, with no total.
    """
    info = p.get("info")
    if isinstance(info, Mapping):
        total = info.get("total_token_usage")
        last = info.get("last_token_usage")
    elif "input_tokens" in p or "output_tokens" in p:
        total, last = None, p
    else:
        return last_total  # the rate-limit-only event before the first reply
    if not isinstance(last, Mapping):
        return last_total
    key = total if total is not None else last
    if key == last_total:
        return last_total
    raw = {
        "input_tokens": last.get("input_tokens"),
        "input_tokens_details": {"cached_tokens": last.get("cached_input_tokens")},
        "output_tokens": last.get("output_tokens"),
        "output_tokens_details": {"reasoning_tokens": last.get("reasoning_output_tokens")},
        "total_tokens": last.get("total_tokens"),
    }
    usage = usage_counts(raw, b.dropped)
    if usage is None:
        return key
    if reply is None:
        b.dropped["usage_without_reply"] += 1
    elif "usage" in reply:
        add_usage(reply, usage)  # two model calls written as one message
    else:
        reply["usage"] = usage
    return key


def _normalize(obj: Mapping[str, Any], first: bool) -> tuple[str, Mapping[str, Any], int | None]:
    """(line type, payload, ms) for both the current shape and the early
    rollouts that wrote bare items after a meta line (a first line of ``id``
    and ``timestamp``, with ``instructions`` in some versions)."""
    ts = to_ms(obj.get("timestamp"))
    payload = obj.get("payload")
    if isinstance(obj.get("type"), str) and isinstance(payload, dict):
        return obj["type"], payload, ts
    if obj.get("record_type") == "state":
        return "state", obj, ts
    if "type" not in obj and "id" in obj and ("instructions" in obj or (first and "timestamp" in obj)):
        return "session_meta", obj, ts
    return "response_item", obj, ts


def _images(value: Any) -> list[str]:
    """Placeholders for the images of a ``user_message`` event (data URLs give their type)."""
    if not isinstance(value, list):
        return []
    return [placeholder("image", image_mime({"image_url": v}) if isinstance(v, str) else None) for v in value]


def _event_text(p: Mapping[str, Any]) -> str:
    text = p.get("message", "")
    return text if isinstance(text, str) else content_text(text)


_IMAGE_TAG = re.compile(r"^\s*</?image\b[^>]*>\s*$")


def _unwrap_images(content: Any) -> Any:
    """Content without the ``<image ...>`` / ``</image>`` text blocks Codex puts
    around each attached image (the image itself stays, as a placeholder)."""
    if not isinstance(content, list):
        return content
    out = [
        block
        for block in content
        if not (isinstance(block, Mapping) and isinstance(block.get("text"), str) and _IMAGE_TAG.match(block["text"]))
    ]
    return out if len(out) != len(content) else content


def _prompt_key(content: Any) -> str:
    """What the ``user_message`` event of this prompt says: its text blocks, no images."""
    if not isinstance(content, list):
        return blocks_text(content, Counter()).strip()
    texts = [b for b in content if not (isinstance(b, Mapping) and b.get("type") in ("input_image", "image"))]
    return blocks_text(texts, Counter()).strip()


def _call(p: Mapping[str, Any]) -> tuple[str, Any]:
    ptype = p.get("type")
    if ptype == "function_call":
        return str(p.get("name") or ""), p.get("arguments")
    if ptype == "custom_tool_call":
        # Free-form input (apply_patch): not JSON, so kept as {"input": ...}.
        raw = p.get("input")
        return str(p.get("name") or ""), {"input": raw} if isinstance(raw, str) else raw
    if ptype == "local_shell_call":
        return "local_shell", p.get("action")
    if ptype == "web_search_call":
        return "web_search", p.get("action")
    return str(p.get("name") or ptype or ""), p.get("arguments") or p.get("action")


def _output(output: Any, b: Builder) -> tuple[str, bool]:
    if isinstance(output, str):
        return output, False
    if isinstance(output, dict):
        success = output.get("success")
        content = output.get("content", output.get("output"))
        text = blocks_text(content, b.dropped) if content is not None else json_text(output)
        return text, success is False
    if isinstance(output, list):
        return blocks_text(output, b.dropped), False
    return blocks_text(output, b.dropped), False
