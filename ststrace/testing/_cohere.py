"""Cohere's v2 chat API (``POST /v2/chat``), as the fake server speaks it, and
the v1 API (``POST /v1/chat``: ``message`` + ``chat_history`` in, ``text`` and
id-less ``tool_calls`` out; with ``"stream": true`` one JSON event per line,
``stream-start``, ``text-generation``, ``tool-calls-generation``, ``stream-end``).

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


V1 = "/v1/chat"


def _v1(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/") == V1


def matches(path: str) -> bool:
    return path in ("/v2/chat", V1)


def stream_content_type(path: str) -> str:
    return "application/stream+json" if _v1(path) else STREAM_CONTENT_TYPE


def tools_offered(body: dict[str, Any]) -> bool:
    return bool(body.get("tools")) and body.get("tool_choice") != "NONE" and not body.get("tool_results")


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
    if _v1(path):
        # v1 sends the results of the last calls beside the (empty) message.
        given = body.get("tool_results")
        if not isinstance(given, list) or not given:
            return None
        return [dumps(r.get("outputs")) if isinstance(r, dict) else text_of(r) for r in given]
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


def _enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") == "enabled"


def _thinking(body: dict[str, Any], reply: Any) -> str | None:
    if reply.recorded and reply.tool_calls and not _enabled(body):
        return None  # sent as the tool plan (see _plan)
    return reply.reasoning if (reply.recorded or _enabled(body)) and reply.reasoning else None


def _plan(body: dict[str, Any], reply: Any) -> str | None:
    """The ``tool_plan``: a recorded reply's reasoning (the recorder reads the plan
    as reasoning), else the text said alongside the calls."""
    if not reply.tool_calls:
        return None
    if reply.recorded:
        return reply.reasoning or None if not _enabled(body) else None
    return reply.text or None


def _text(reply: Any) -> str | None:
    # A recorded reply keeps text said beside its calls as content.
    return reply.text or None if reply.recorded or not reply.tool_calls else None


def _reports_usage(api: Any, reply: Any) -> bool:
    return reply.usage is not None if reply.recorded else bool(api.usage)


def _usage(api: Any, body: dict[str, Any], reply: Any) -> dict[str, Any]:
    if reply.recorded:
        u = reply.usage or {}
        # Cohere counts cached tokens inside the input.
        inputs = u.get("input", 0) + u.get("cacheRead", 0) + u.get("cacheWrite", 0)
        counts = {"input_tokens": inputs, "output_tokens": u.get("output", 0)}
        return {"billed_units": counts, "tokens": dict(counts), "cached_tokens": u.get("cacheRead", 0)}
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


def _v1_calls(reply: Any) -> list[dict[str, Any]]:
    return [{"name": c.name, "parameters": c.arguments} for c in reply.tool_calls]


def _v1_json(api: Any, body: dict[str, Any], reply: Any, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "response_id": f"cohere-fake{n:04d}",
        "generation_id": f"gen-fake{n:04d}",
        "text": reply.text or "",
        "finish_reason": "COMPLETE",
        "chat_history": [],
    }
    if reply.tool_calls:
        out["tool_calls"] = _v1_calls(reply)
    if _reports_usage(api, reply):
        u = _usage(api, body, reply)
        out["meta"] = {"billed_units": u["billed_units"], "tokens": u["tokens"]}
    return out


def _v1_stream(api: Any, body: dict[str, Any], reply: Any, n: int) -> Iterator[bytes]:
    def line(kind: str, **fields: Any) -> bytes:
        return (dumps({"is_finished": kind == "stream-end", "event_type": kind, **fields}) + "\n").encode()

    yield line("stream-start", generation_id=f"gen-fake{n:04d}")
    for piece in pieces(reply.text or "", api.chunk_size):
        yield line("text-generation", text=piece)
    if reply.tool_calls:
        yield line("tool-calls-generation", text=reply.text or "", tool_calls=_v1_calls(reply))
    yield line("stream-end", finish_reason="COMPLETE", response=_v1_json(api, body, reply, n))


def reply_json(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> dict[str, Any]:
    if _v1(path):
        return _v1_json(api, body, reply, n)
    message: dict[str, Any] = {"role": "assistant"}
    content: list[dict[str, Any]] = []
    thinking = _thinking(body, reply)
    if thinking:
        content.append({"type": "thinking", "thinking": thinking})
    text, plan = _text(reply), _plan(body, reply)
    if text:
        content.append({"type": "text", "text": text})
    if reply.tool_calls:
        if plan:
            message["tool_plan"] = plan
        message["tool_calls"] = [_call(c, c.arguments_json) for c in reply.tool_calls]
    if content:
        message["content"] = content
    out: dict[str, Any] = {"id": f"cohere-fake{n:04d}", "finish_reason": _finish(reply), "message": message}
    if _reports_usage(api, reply):
        out["usage"] = _usage(api, body, reply)
    return out


def _event(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {dumps({'type': kind, **fields})}\n\n".encode()


def reply_stream(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> Iterator[bytes]:
    if _v1(path):
        yield from _v1_stream(api, body, reply, n)
        return
    yield _event(
        "message-start",
        id=f"cohere-fake{n:04d}",
        delta={"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}},
    )
    index = 0
    thinking = _thinking(body, reply)
    blocks: list[tuple[str, str]] = [("thinking", thinking)] if thinking else []
    text = _text(reply)
    if text:
        blocks.append(("text", text))
    for kind, text in blocks:
        yield _event("content-start", index=index, delta={"message": {"content": {"type": kind, kind: ""}}})
        for piece in pieces(text, api.chunk_size):
            yield _event("content-delta", index=index, delta={"message": {"content": {kind: piece}}})
        yield _event("content-end", index=index)
        index += 1
    if reply.tool_calls:
        for piece in pieces(_plan(body, reply) or "", api.chunk_size):
            yield _event("tool-plan-delta", delta={"message": {"tool_plan": piece}})
        for i, c in enumerate(reply.tool_calls):
            yield _event("tool-call-start", index=i, delta={"message": {"tool_calls": _call(c, "")}})
            for piece in pieces(c.arguments_json, api.chunk_size):
                yield _event(
                    "tool-call-delta", index=i, delta={"message": {"tool_calls": {"function": {"arguments": piece}}}}
                )
            yield _event("tool-call-end", index=i)
    end: dict[str, Any] = {"finish_reason": _finish(reply)}
    if _reports_usage(api, reply):
        end["usage"] = _usage(api, body, reply)
    yield _event("message-end", delta=end)
