"""Cohere's v2 chat API (``POST /v2/chat``), as the fake server speaks it.

JSON, or with ``"stream": true`` SSE events named by type (``message-start``,
``content-start`` / ``content-delta`` / ``content-end``, ``tool-plan-delta``,
``tool-call-start`` / ``tool-call-delta`` / ``tool-call-end``, ``message-end``
with the usage). Text sent alongside tool calls is Cohere's ``tool_plan``;
thinking content is sent only when the request enables ``thinking``. Usage
has ``billed_units`` and ``tokens``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._wire import completion_tokens, dumps, pieces, results_after_last_user, text_of, tokens

ENDPOINT = "cohere"
STREAM_CONTENT_TYPE = "text/event-stream"


def matches(path: str) -> bool:
    return path == "/v2/chat"


def tools_offered(body: dict[str, Any]) -> bool:
    return bool(body.get("tools")) and body.get("tool_choice") != "NONE"


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        # Tool results as documents: {"type": "document", "document": {"data": "..."}}
        texts = []
        for part in content:
            document = part.get("document") if isinstance(part, dict) else None
            if isinstance(document, dict) and isinstance(document.get("data"), str):
                texts.append(document["data"])
            else:
                texts.append(text_of([part]))
        return "".join(texts)
    return text_of(content)


def results(body: dict[str, Any], path: str, native: Any) -> list[str] | None:
    return results_after_last_user(
        body.get("messages"),
        lambda m: m.get("role") == "user",
        lambda m: [_result_text(m.get("content"))] if m.get("role") == "tool" else [],
    )


def streamed(path: str, body: dict[str, Any]) -> bool:
    return body.get("stream") is True


def error_body(status: int, message: str, n: int) -> Any:
    return {"id": f"cohere-fake{n:04d}", "message": message}


def headers(n: int) -> dict[str, str]:
    return {"x-request-id": f"req_fake{n:04d}"}


def _thinking(body: dict[str, Any], reply: Any) -> str | None:
    thinking = body.get("thinking")
    enabled = isinstance(thinking, dict) and thinking.get("type") == "enabled"
    return reply.reasoning if enabled and reply.reasoning else None


def _usage(api: Any, body: dict[str, Any], reply: Any) -> dict[str, Any]:
    prompt = tokens(dumps(body.get("messages") or ""))
    output = completion_tokens(reply)
    # The model also reads its own prompt template: more tokens than are billed.
    return {
        "billed_units": {"input_tokens": prompt, "output_tokens": output},
        "tokens": {"input_tokens": prompt + 200, "output_tokens": output + 2},
        "cached_tokens": api.cached_tokens,
    }


def _finish(reply: Any) -> str:
    return "TOOL_CALL" if reply.tool_calls else "COMPLETE"


def _call(c: Any, arguments: str) -> dict[str, Any]:
    return {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": arguments}}


def reply_json(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    content: list[dict[str, Any]] = []
    thinking = _thinking(body, reply)
    if thinking:
        content.append({"type": "thinking", "thinking": thinking})
    if reply.tool_calls:
        if reply.text:
            message["tool_plan"] = reply.text
        message["tool_calls"] = [_call(c, c.arguments_json) for c in reply.tool_calls]
    elif reply.text:
        content.append({"type": "text", "text": reply.text})
    if content:
        message["content"] = content
    out: dict[str, Any] = {"id": f"cohere-fake{n:04d}", "finish_reason": _finish(reply), "message": message}
    if api.usage:
        out["usage"] = _usage(api, body, reply)
    return out


def _event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {dumps({'type': kind, **fields})}\n\n".encode()


def reply_stream(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> Iterator[bytes]:
    yield _event(
        "message-start",
        id=f"cohere-fake{n:04d}",
        delta={"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}},
    )
    index = 0
    thinking = _thinking(body, reply)
    blocks: list[tuple[str, str]] = [("thinking", thinking)] if thinking else []
    if reply.text and not reply.tool_calls:
        blocks.append(("text", reply.text))
    for kind, text in blocks:
        yield _event("content-start", index=index, delta={"message": {"content": {"type": kind, kind: ""}}})
        for piece in pieces(text, api.chunk_size):
            yield _event("content-delta", index=index, delta={"message": {"content": {kind: piece}}})
        yield _event("content-end", index=index)
        index += 1
    if reply.tool_calls:
        for piece in pieces(reply.text or "", api.chunk_size):
            yield _event("tool-plan-delta", delta={"message": {"tool_plan": piece}})
        for i, c in enumerate(reply.tool_calls):
            yield _event("tool-call-start", index=i, delta={"message": {"tool_calls": _call(c, "")}})
            for piece in pieces(c.arguments_json, api.chunk_size):
                yield _event(
                    "tool-call-delta", index=i, delta={"message": {"tool_calls": {"function": {"arguments": piece}}}}
                )
            yield _event("tool-call-end", index=i)
    end: dict[str, Any] = {"finish_reason": _finish(reply)}
    if api.usage:
        end["usage"] = _usage(api, body, reply)
    yield _event("message-end", delta=end)
