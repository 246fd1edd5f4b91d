"""The Gemini wire protocol of :class:`~ststrace.testing.FakeAPI`.

``POST …/models/{model}:generateContent`` answers one ``GenerateContentResponse``
JSON; ``…:streamGenerateContent?alt=sse`` the same reply as SSE ``data:``
events (text and thought summaries split into deltas, each function call
whole, usage and ``finishReason`` on the last event, no terminator), as the
Gemini API and Vertex AI send them. Vertex AI paths
(``…/projects/{p}/locations/{l}/publishers/google/models/{model}:…``) are
answered alike, with Vertex's ``createTime``.

Thought summaries are sent only when the request asks for them
(``generationConfig.thinkingConfig.includeThoughts``), as by the real API;
``thoughtsTokenCount`` is reported whenever the reply has reasoning. Like the
Gemini API, function calls carry no ``id`` unless :attr:`FakeAPI.gemini_call_ids`
is set (then ``call_<suffix>``, as the other protocols' ids).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ._wire import dumps, pieces, sse, tokens

#: Fixed ``createTime`` (2026-01-01T00:00:00Z) so Vertex replies are reproducible.
CREATE_TIME = "2026-01-01T00:00:00.000000Z"


class _Call(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> dict[str, Any]: ...

    @property
    def call_id(self) -> str: ...

    @property
    def arguments_json(self) -> str: ...

    @property
    def id(self) -> str | None: ...

    @property
    def generated_id(self) -> bool: ...


class _Reply(Protocol):
    @property
    def reasoning(self) -> str | None: ...

    @property
    def text(self) -> str | None: ...

    @property
    def tool_calls(self) -> Sequence[_Call]: ...

    @property
    def recorded(self) -> bool: ...

    @property
    def usage(self) -> dict[str, int] | None: ...

    @property
    def model(self) -> str | None: ...


class _Api(Protocol):
    chunk_size: int
    usage: bool
    cached_tokens: int
    gemini_call_ids: bool


def is_path(path: str) -> bool:
    route = path.split("?", 1)[0]
    return route.endswith((":generateContent", ":streamGenerateContent"))


def is_stream(path: str) -> bool:
    return path.split("?", 1)[0].endswith(":streamGenerateContent")


def _vertex(path: str) -> bool:
    return "/publishers/" in path or "/projects/" in path


def _model(path: str) -> str:
    route = path.split("?", 1)[0].rsplit(":", 1)[0]
    return route.rsplit("/models/", 1)[-1] or "fake-model"


def _key(part: dict[str, Any], camel: str, snake: str) -> Any:
    return part.get(camel, part.get(snake))


def tools_offered(body: dict[str, Any]) -> bool:
    config = _key(body.get("toolConfig") or {}, "functionCallingConfig", "function_calling_config") or {}
    if isinstance(config, dict) and config.get("mode") == "NONE":
        return False
    tools = body.get("tools") or []
    return any(isinstance(t, dict) and _key(t, "functionDeclarations", "function_declarations") for t in tools)


def _result_text(response: Any) -> str:
    if isinstance(response, dict) and len(response) == 1:
        value = next(iter(response.values()))
        return value if isinstance(value, str) else dumps(value)
    return response if isinstance(response, str) else dumps(response)


def results(body: dict[str, Any]) -> list[str] | None:
    """The texts of the function responses sent after the last user prompt."""
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    last_user = -1
    for i, content in enumerate(contents):
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        if content.get("role", "user") == "user" and any(
            _key(p, "functionResponse", "function_response") is None for p in parts
        ):
            last_user = i
    found = [
        _result_text(response.get("response"))
        for content in contents[last_user + 1 :]
        for part in content.get("parts") or []
        if isinstance(part, dict)
        for response in [_key(part, "functionResponse", "function_response")]
        if isinstance(response, dict)
    ]
    return found or None


def _thoughts_asked(body: dict[str, Any]) -> bool:
    generation = body.get("generationConfig") or {}
    thinking = _key(generation, "thinkingConfig", "thinking_config") or {}
    return isinstance(thinking, dict) and _key(thinking, "includeThoughts", "include_thoughts") is True


def _signature(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _call_part(api: _Api, call: _Call) -> dict[str, Any]:
    function: dict[str, Any] = {"name": call.name, "args": dict(call.arguments)}
    # A recorded call keeps its id, unless ststrace made it (the API sent none).
    if api.gemini_call_ids or (call.id is not None and not call.generated_id):
        function["id"] = call.call_id
    return {"functionCall": function}


def _parts(api: _Api, body: dict[str, Any], reply: _Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.reasoning is not None and (reply.recorded or _thoughts_asked(body)):
        parts.append({"text": reply.reasoning, "thought": True})
    if reply.text is not None:
        parts.append({"text": reply.text})
    parts.extend(_call_part(api, call) for call in reply.tool_calls)
    if parts and reply.reasoning is not None:
        # Thinking models sign their turn: the first part carries the signature.
        parts[0] = {**parts[0], "thoughtSignature": _signature(reply.reasoning)}
    return parts


def _recorded_usage(u: dict[str, int]) -> dict[str, Any]:
    prompt = u.get("input", 0) + u.get("cacheRead", 0) + u.get("cacheWrite", 0)
    thoughts = u.get("reasoning")
    usage: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": u.get("output", 0) - (thoughts or 0)}
    if u.get("cacheRead"):
        usage["cachedContentTokenCount"] = u["cacheRead"]
    if thoughts is not None:
        usage["thoughtsTokenCount"] = thoughts
    usage["totalTokenCount"] = prompt + u.get("output", 0)
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
    return usage


def _usage(api: _Api, body: dict[str, Any], reply: _Reply) -> dict[str, Any]:
    # promptTokenCount includes the cached tokens; thoughts are counted beside candidates.
    prompt = tokens(dumps(body.get("contents") or "")) + api.cached_tokens
    candidates = (tokens(reply.text) if reply.text else 0) + sum(tokens(c.arguments_json) for c in reply.tool_calls)
    usage: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": candidates}
    total = prompt + candidates
    if api.cached_tokens:
        usage["cachedContentTokenCount"] = api.cached_tokens
    if reply.reasoning is not None:
        thoughts = tokens(reply.reasoning)
        usage["thoughtsTokenCount"] = thoughts
        total += thoughts
    usage["totalTokenCount"] = total
    usage["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": prompt}]
    return usage


def _response(
    api: _Api, path: str, body: dict[str, Any], reply: _Reply, n: int, parts: list[dict[str, Any]], last: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}}
    if last:
        candidate["finishReason"] = "STOP"
    candidate["index"] = 0
    out: dict[str, Any] = {"candidates": [candidate]}
    if last and reply.recorded:
        if reply.usage is not None:
            out["usageMetadata"] = _recorded_usage(reply.usage)
    elif last and api.usage:
        out["usageMetadata"] = _usage(api, body, reply)
    out["modelVersion"] = reply.model or _model(path)
    if _vertex(path):
        out["createTime"] = CREATE_TIME
    out["responseId"] = f"fake-gemini-{n:04d}"
    return out


def json_reply(api: _Api, path: str, body: dict[str, Any], reply: _Reply, n: int) -> dict[str, Any]:
    return _response(api, path, body, reply, n, _parts(api, body, reply), True)


def sse_reply(api: _Api, path: str, body: dict[str, Any], reply: _Reply, n: int) -> Iterator[bytes]:
    deltas: list[dict[str, Any]] = []
    for part in _parts(api, body, reply):
        text = part.get("text")
        if isinstance(text, str):
            first = True
            for piece in pieces(text, api.chunk_size):
                delta = {**part, "text": piece}
                if not first:
                    delta.pop("thoughtSignature", None)
                deltas.append(delta)
                first = False
        else:
            deltas.append(part)
    for index, delta in enumerate(deltas):
        yield sse(_response(api, path, body, reply, n, [delta], index == len(deltas) - 1))
    if not deltas:
        yield sse(_response(api, path, body, reply, n, [], True))


_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(status: int, message: str, error_type: str | None) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": error_type or _STATUSES.get(status, "UNKNOWN")}}
