"""Mistral's dialect of Chat Completions, as the fake server speaks it.

Same path (``/v1/chat/completions``) and shapes as OpenAI, but reasoning
arrives as a ``thinking`` content chunk (``[{"type": "thinking", "thinking":
[{"type": "text", "text": ...}]}, {"type": "text", "text": ...}]``), in
replies and stream deltas alike, and the OpenAI-only fields are absent. The fake
server serves it under :attr:`FakeAPI.mistral_base_url` (a ``/mistral`` prefix).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

PATH_PREFIX = "/mistral/"
_OPENAI_ONLY = ("refusal", "annotations")
_REASONING_FIELDS = ("reasoning_content", "reasoning")


def _thinking(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": [{"type": "text", "text": text}]}


def _message(message: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in _OPENAI_ONLY and k not in _REASONING_FIELDS}
    reasoning = next((message[k] for k in _REASONING_FIELDS if isinstance(message.get(k), str)), None)
    if reasoning:
        text = message.get("content")
        out["content"] = [_thinking(reasoning)] + ([{"type": "text", "text": text}] if text else [])
    return out


def adapt(payload: Any) -> Any:
    """A Chat Completions reply or stream chunk, in Mistral's words."""
    if not isinstance(payload, dict):
        return payload
    out = {k: v for k, v in payload.items() if k not in ("service_tier", "system_fingerprint")}
    choices = []
    for choice in payload.get("choices") or []:
        choice = {k: v for k, v in choice.items() if k != "logprobs"}
        for key in ("message", "delta"):
            if isinstance(choice.get(key), dict):
                choice[key] = _message(choice[key])
        choices.append(choice)
    out["choices"] = choices
    usage = payload.get("usage")
    if isinstance(usage, dict):
        out["usage"] = {k: v for k, v in usage.items() if not k.endswith("_details")}
    return out


def adapt_stream(items: Iterator[Any]) -> Iterator[Any]:
    """Stream chunks in Mistral's words; a tool call arrives whole in one delta
    (the OpenAI stream splits its arguments over many)."""
    held: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (chunk, its call)
    for item in items:
        if not isinstance(item, dict):
            yield item
            continue
        chunk = adapt(item)
        choices = chunk.get("choices") or [{}]
        calls = (choices[0].get("delta") or {}).get("tool_calls")
        if calls:
            for call in calls:
                if call.get("id"):
                    held.append((chunk, call))
                elif held:
                    held[-1][1]["function"]["arguments"] += call["function"].get("arguments") or ""
            continue
        for start, _ in held:
            yield start
        held.clear()
        yield chunk
