"""Ollama's chat API (``POST /api/chat``) and generate API (``POST /api/generate``:
a ``prompt`` in, ``response`` text out, no tools), as the fake server speaks them.

JSON, or with ``"stream": true`` (the client's default) newline-delimited JSON:
``thinking`` and ``content`` fragments, the tool calls whole in one chunk (the
protocol has no call ids, and arguments are objects), then a last chunk with
``done: true``, ``done_reason`` and the token counts (``prompt_eval_count``,
``eval_count``). Thinking is sent only when the request asks with ``think``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._wire import CREATED_ISO, completion_tokens, dumps, pieces, results_after_last_user, text_of, tokens

ENDPOINT = "ollama"
STREAM_CONTENT_TYPE = "application/x-ndjson"


GENERATE = "/api/generate"


def matches(path: str) -> bool:
    return path in ("/api/chat", GENERATE)


def tools_offered(body: dict[str, Any]) -> bool:
    return bool(body.get("tools"))


def results(body: dict[str, Any], path: str, native: Any) -> list[str] | None:
    return results_after_last_user(
        body.get("messages"),
        lambda m: m.get("role") == "user",
        lambda m: [text_of(m.get("content"))] if m.get("role") == "tool" else [],
    )


def streamed(path: str, body: dict[str, Any]) -> bool:
    return body.get("stream") is not False


def error_body(status: int, message: str, n: int) -> Any:
    return {"error": message}


def headers(n: int) -> dict[str, str]:
    return {}


def _thinking(body: dict[str, Any], reply: Any) -> str | None:
    # A recorded reply's thinking is sent as recorded (the run asked for it).
    asked = reply.recorded or body.get("think") not in (None, False)
    return reply.reasoning if asked and reply.reasoning else None


def _model(body: dict[str, Any], reply: Any) -> str:
    return str(reply.model or body.get("model") or "")


def _tool_calls(reply: Any) -> list[dict[str, Any]]:
    return [{"function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]


def _final(api: Any, body: dict[str, Any], reply: Any) -> dict[str, Any]:
    final: dict[str, Any] = {
        "done": True,
        "done_reason": "stop",
        "total_duration": 1_000_000,
        "load_duration": 1_000,
        "prompt_eval_duration": 1_000,
        "eval_duration": 1_000,
    }
    if reply.recorded:
        if reply.usage is not None:
            # Ollama has no prompt cache: every prompt token is evaluated.
            u = reply.usage
            final["prompt_eval_count"] = u.get("input", 0) + u.get("cacheRead", 0) + u.get("cacheWrite", 0)
            final["eval_count"] = u.get("output", 0)
    elif api.usage:
        final["prompt_eval_count"] = tokens(dumps(body.get("messages") or body.get("prompt") or ""))
        final["eval_count"] = completion_tokens(reply)
    return final


def _generate_json(api: Any, body: dict[str, Any], reply: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"model": _model(body, reply), "created_at": CREATED_ISO, "response": reply.text or ""}
    thinking = _thinking(body, reply)
    if thinking:
        out["thinking"] = thinking
    return {**out, **_final(api, body, reply)}


def _generate_stream(api: Any, body: dict[str, Any], reply: Any) -> Iterator[bytes]:
    model = _model(body, reply)

    def line(fields: dict[str, Any], **extra: Any) -> bytes:
        chunk = {"model": model, "created_at": CREATED_ISO, **fields}
        return (dumps({**chunk, **(extra or {"done": False})}) + "\n").encode()

    for piece in pieces(_thinking(body, reply) or "", api.chunk_size):
        yield line({"response": "", "thinking": piece})
    for piece in pieces(reply.text or "", api.chunk_size):
        yield line({"response": piece})
    yield line({"response": ""}, **_final(api, body, reply))


def reply_json(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> dict[str, Any]:
    if path.split("?", 1)[0].rstrip("/") == GENERATE:
        return _generate_json(api, body, reply)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or ""}
    thinking = _thinking(body, reply)
    if thinking:
        message["thinking"] = thinking
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {"model": _model(body, reply), "created_at": CREATED_ISO, "message": message, **_final(api, body, reply)}


def reply_stream(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> Iterator[bytes]:
    if path.split("?", 1)[0].rstrip("/") == GENERATE:
        yield from _generate_stream(api, body, reply)
        return
    model = _model(body, reply)

    def line(message: dict[str, Any], **extra: Any) -> bytes:
        chunk = {"model": model, "created_at": CREATED_ISO, "message": {"role": "assistant", **message}}
        return (dumps({**chunk, **(extra or {"done": False})}) + "\n").encode()

    for piece in pieces(_thinking(body, reply) or "", api.chunk_size):
        yield line({"content": "", "thinking": piece})
    for piece in pieces(reply.text or "", api.chunk_size):
        yield line({"content": piece})
    if reply.tool_calls:
        yield line({"content": "", "tool_calls": _tool_calls(reply)})
    yield line({"content": ""}, **_final(api, body, reply))
