"""Small helpers every protocol of the fake server uses (standard library only).

The protocol modules (``_ollama``, ``_cohere``, ``_bedrock``, ...) import these,
never :mod:`ststrace.testing.fakeapi`, which routes to them: the arrows point one
way. They read the server's settings and the planned reply by attribute:
``api.chunk_size``, ``api.usage``, ``api.cached_tokens``, ``api.cache_write_tokens``,
``reply.text``, ``reply.reasoning``, ``reply.tool_calls`` (``name``,
``arguments``, ``arguments_json``, ``id_suffix``).
"""

from __future__ import annotations

import json
from typing import Any

#: Fixed ``created`` timestamp (2026-01-01T00:00:00Z) so replies are byte-for-byte reproducible.
CREATED = 1767225600
CREATED_ISO = "2026-01-01T00:00:00Z"


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def text_of(content: Any) -> str:
    """Text of a message/tool-result ``content`` in any provider's shape."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and isinstance(part.get("json"), (dict, list)):
                parts.append(dumps(part["json"]))  # Bedrock toolResult content
        return "".join(parts)
    return dumps(content)


def tokens(text: str) -> int:
    # A stable stand-in for a tokenizer: about four characters per token.
    return max(1, (len(text) + 3) // 4)


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else dumps(data)
    return f"{head}data: {payload}\n\n".encode()
def completion_tokens(reply: Any) -> int:
    """Output tokens of a planned reply (reasoning, text and tool arguments)."""
    reasoning = tokens(reply.reasoning) if reply.reasoning else 0
    return reasoning + (tokens(reply.text) if reply.text else 0) + sum(tokens(c.arguments_json) for c in reply.tool_calls)


def results_after_last_user(messages: Any, is_user: Any, results_of: Any) -> list[str] | None:
    """Tool-result texts sent after the last real user turn, or ``None``.

    *is_user(message)* says whether a message is the user's own turn (not one
    that only carries tool results); *results_of(message)* lists the texts of
    the tool results a message carries.
    """
    if not isinstance(messages, list):
        return None
    last_user = -1
    for i, m in enumerate(messages):
        if isinstance(m, dict) and is_user(m):
            last_user = i
    found = [text for m in messages[last_user + 1 :] if isinstance(m, dict) for text in results_of(m)]
    return found or None


def map_sse(events: Any, adapt_stream: Any) -> Any:
    """The SSE *events* (bytes) rewritten by *adapt_stream*, which gets the JSON
    ``data:`` payloads as dicts (other events as their bytes), in order, and
    yields the payloads to send."""

    def payloads() -> Any:
        for event in events:
            _, sep, data = event.partition(b"data: ")
            text = data.strip()
            yield json.loads(text) if sep and text.startswith(b"{") else event

    for item in adapt_stream(payloads()):
        yield f"data: {dumps(item)}\n\n".encode() if isinstance(item, dict) else item


def each(adapt: Any) -> Any:
    """An ``adapt_stream`` for :func:`map_sse` that rewrites each payload alone."""

    def adapt_stream(items: Any) -> Any:
        for item in items:
            yield adapt(item) if isinstance(item, dict) else item

    return adapt_stream
