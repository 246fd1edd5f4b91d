"""Amazon Bedrock Runtime, as the fake server speaks it (``rest-json``, as botocore
sends and parses it).

* ``POST /model/{modelId}/converse``: the Converse JSON reply (``output.message``
  content blocks ``reasoningContent`` / ``text`` / ``toolUse``, ``stopReason``,
  ``usage`` with ``cacheReadInputTokens`` / ``cacheWriteInputTokens``).
* ``POST /model/{modelId}/converse-stream``: the same as AWS event-stream
  frames (``messageStart``, ``contentBlockStart`` / ``Delta`` / ``Stop``,
  ``messageStop``, ``metadata``).
* ``POST /model/{modelId}/invoke`` and ``/invoke-with-response-stream`` with an
  Anthropic Messages body: the Anthropic reply, whole or as ``chunk`` frames
  whose ``bytes`` hold each Anthropic stream event.

Reasoning is sent only when the request asks for it (Converse:
``additionalModelRequestFields.thinking``; Anthropic bodies: ``thinking``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import struct
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from ._wire import completion_tokens, dumps, pieces, results_after_last_user, text_of, tokens

ENDPOINT = "bedrock"
STREAM_CONTENT_TYPE = "application/vnd.amazon.eventstream"
_SUFFIXES = ("/converse", "/converse-stream", "/invoke", "/invoke-with-response-stream")
_ERRORS = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def matches(path: str) -> bool:
    return path.startswith("/model/") and path.endswith(_SUFFIXES)


def _operation(path: str) -> str:
    return path.rsplit("/", 1)[1]


def model_id(path: str) -> str:
    return unquote(path[len("/model/") :].rsplit("/", 1)[0])


def _is_invoke(path: str) -> bool:
    return _operation(path).startswith("invoke")


def tools_offered(body: dict[str, Any]) -> bool:
    config = body.get("toolConfig")
    if isinstance(config, dict):
        return bool(config.get("tools"))
    return bool(body.get("tools"))  # an Anthropic body


def _user_turn(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if message.get("role") != "user":
        return False
    return not (isinstance(content, list) and any(isinstance(b, dict) and "toolResult" in b for b in content))


def _tool_results(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return []
    return [text_of(b["toolResult"].get("content")) for b in content if isinstance(b, dict) and "toolResult" in b]


def results(body: dict[str, Any], path: str, native: Any) -> list[str] | None:
    if _is_invoke(path):
        found: list[str] | None = native["anthropic_results"](body)
        return found
    return results_after_last_user(body.get("messages"), _user_turn, _tool_results)


def streamed(path: str, body: dict[str, Any]) -> bool:
    return _operation(path) in ("converse-stream", "invoke-with-response-stream")


def error_body(status: int, message: str, n: int) -> Any:
    # botocore reads the error code from ``__type`` when no header names it.
    return {"__type": _ERRORS.get(status, "InternalServerException"), "message": message}


def headers(n: int) -> dict[str, str]:
    return {"x-amzn-requestid": f"req-fake{n:04d}"}


def tool_use_id(call: Any) -> str:
    return call.id or f"tooluse_{call.id_suffix}"


def _signature(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _reasoning(body: dict[str, Any], reply: Any) -> str | None:
    fields = body.get("additionalModelRequestFields")
    wanted = reply.recorded or (isinstance(fields, dict) and ("thinking" in fields or "reasoning_config" in fields))
    return reply.reasoning if wanted and reply.reasoning else None


def _usage(api: Any, body: dict[str, Any], reply: Any) -> dict[str, Any]:
    if reply.recorded:
        # Converse always reports usage: zeros when the trace has none.
        u = reply.usage or {}
        read, write = u.get("cacheRead", 0), u.get("cacheWrite", 0)
        recorded = {"inputTokens": u.get("input", 0), "outputTokens": u.get("output", 0)}
        recorded["totalTokens"] = recorded["inputTokens"] + recorded["outputTokens"] + read + write
        if read or write:
            recorded["cacheReadInputTokens"] = read
            recorded["cacheWriteInputTokens"] = write
        return recorded
    inputs = tokens(dumps(body.get("messages") or ""))
    output = completion_tokens(reply)
    total = inputs + output + api.cached_tokens + api.cache_write_tokens
    usage = {"inputTokens": inputs, "outputTokens": output, "totalTokens": total}
    if api.cached_tokens or api.cache_write_tokens:
        usage["cacheReadInputTokens"] = api.cached_tokens
        usage["cacheWriteInputTokens"] = api.cache_write_tokens
    return usage


def _blocks(body: dict[str, Any], reply: Any) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    reasoning = _reasoning(body, reply)
    if reasoning:
        blocks.append({"reasoningContent": {"reasoningText": {"text": reasoning, "signature": _signature(reasoning)}}})
    if reply.text:
        blocks.append({"text": reply.text})
    for c in reply.tool_calls:
        blocks.append({"toolUse": {"toolUseId": tool_use_id(c), "name": c.name, "input": dict(c.arguments)}})
    return blocks


def _anthropic_body(body: dict[str, Any], reply: Any, path: str) -> tuple[dict[str, Any], Any]:
    """The Anthropic request as the native builders take it: the model is in
    the path, and reasoning only when the body asks for thinking."""
    if body.get("thinking") is None and reply.reasoning is not None and not reply.recorded:
        reply = dataclasses.replace(reply, reasoning=None)
    return {**body, "model": model_id(path)}, reply


def reply_json(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> Any:
    if _is_invoke(path):
        inner, reply = _anthropic_body(body, reply, path)
        return native["anthropic_json"](api, inner, reply, n)
    out: dict[str, Any] = {
        "output": {"message": {"role": "assistant", "content": _blocks(body, reply)}},
        "stopReason": "tool_use" if reply.tool_calls else "end_turn",
        "usage": _usage(api, body, reply),
        "metrics": {"latencyMs": 1},
    }
    return out


# -- AWS event-stream framing ----------------------------------------------------


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", 7, len(raw_value)) + raw_value


def frame(event_type: str, payload: dict[str, Any]) -> bytes:
    """One event-stream message: prelude (lengths and their CRC32), string
    headers, the JSON payload, and the CRC32 of all of it."""
    headers = (
        _header(":event-type", event_type)
        + _header(":content-type", "application/json")
        + _header(":message-type", "event")
    )
    body = json.dumps(payload, separators=(",", ":")).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack("!II", total, len(headers))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    message = prelude + headers + body
    return message + struct.pack("!I", binascii.crc32(message))


def _converse_events(api: Any, body: dict[str, Any], reply: Any) -> Iterator[bytes]:
    yield frame("messageStart", {"role": "assistant"})
    for index, block in enumerate(_blocks(body, reply)):
        if "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            yield frame("contentBlockStart", {"start": start, "contentBlockIndex": index})
            for piece in pieces(dumps(use["input"]), api.chunk_size):
                yield frame("contentBlockDelta", {"delta": {"toolUse": {"input": piece}}, "contentBlockIndex": index})
        elif "reasoningContent" in block:
            text = block["reasoningContent"]["reasoningText"]
            for piece in pieces(text["text"], api.chunk_size):
                delta = {"reasoningContent": {"text": piece}}
                yield frame("contentBlockDelta", {"delta": delta, "contentBlockIndex": index})
            delta = {"reasoningContent": {"signature": text["signature"]}}
            yield frame("contentBlockDelta", {"delta": delta, "contentBlockIndex": index})
        else:
            for piece in pieces(block["text"], api.chunk_size):
                yield frame("contentBlockDelta", {"delta": {"text": piece}, "contentBlockIndex": index})
        yield frame("contentBlockStop", {"contentBlockIndex": index})
    yield frame("messageStop", {"stopReason": "tool_use" if reply.tool_calls else "end_turn"})
    yield frame("metadata", {"usage": _usage(api, body, reply), "metrics": {"latencyMs": 1}})


def _invoke_events(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> Iterator[bytes]:
    inner, reply = _anthropic_body(body, reply, path)
    for event in native["anthropic_sse"](api, inner, reply, n):
        data = event.split(b"data: ", 1)[1].strip()
        if json.loads(data).get("type") == "ping":
            continue  # Bedrock does not pass Anthropic's pings on
        yield frame("chunk", {"bytes": base64.b64encode(data).decode()})


def reply_stream(api: Any, body: dict[str, Any], reply: Any, n: int, path: str, native: Any) -> Iterator[bytes]:
    if _is_invoke(path):
        return _invoke_events(api, body, reply, n, path, native)
    return _converse_events(api, body, reply)
