"""Model calls seen as HTTP requests: which path speaks which protocol, and the
request body as the keyword arguments the input reader takes.

The transport seam (:mod:`ststrace.integrations._http`) asks :func:`route` of
every POST made in a session, so it is a few string tests; the body is parsed
only for a path that matched. Replies and streams are read by the existing
parsers (:mod:`.raw`, :mod:`.streams`, :mod:`.convert`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._common import arguments_text, get

CHAT = "chat"  # OpenAI-compatible Chat Completions (and Mistral's, Groq's, ...)
RESPONSES = "responses"
ANTHROPIC = "anthropic"
GEMINI = "gemini"
OLLAMA_CHAT = "ollama-chat"
OLLAMA_GENERATE = "ollama-generate"
COHERE_V1 = "cohere-v1"
COHERE_V2 = "cohere-v2"

#: Path endings, tested in order on the path without its query.
_SUFFIXES = (
    ("/chat/completions", CHAT),
    ("/responses", RESPONSES),
    ("/messages", ANTHROPIC),
    ("/api/chat", OLLAMA_CHAT),
    ("/api/generate", OLLAMA_GENERATE),
    ("/v1/chat", COHERE_V1),
    ("/v2/chat", COHERE_V2),
    (":generateContent", GEMINI),
    (":streamGenerateContent", GEMINI),
)

#: The body field each protocol cannot do without: a POST to a matching path
#: without it (OpenAI's ``/threads/{id}/messages``) is not a model call.
_REQUIRED = {
    CHAT: "messages",
    RESPONSES: "input",
    ANTHROPIC: "messages",
    GEMINI: "contents",
    OLLAMA_CHAT: "messages",
    OLLAMA_GENERATE: "prompt",
    COHERE_V1: "message",
    COHERE_V2: "messages",
}


def route(path: str) -> str | None:
    """The protocol of a POST to *path* (query included or not), or ``None``."""
    end = path.find("?")
    if end >= 0:
        path = path[:end]
    path = path.rstrip("/")
    for suffix, kind in _SUFFIXES:
        if path.endswith(suffix):
            return kind
    return None


def streamed(kind: str, body: Mapping[str, Any], path: str) -> bool:
    """Whether the request asks for a streamed reply."""
    if kind == GEMINI:
        return ":streamGenerateContent" in path
    if kind in (OLLAMA_CHAT, OLLAMA_GENERATE):
        return body.get("stream") is not False  # Ollama streams unless told not to
    return body.get("stream") is True


def call_arguments(kind: str, body: Any, path: str) -> dict[str, Any] | None:
    """The request *body* of protocol *kind* as ``@llm``-style keyword arguments
    (``model``, ``messages`` / ``input`` / ``contents``, ``tools``, ...), or
    ``None`` when it is not a model call."""
    if not isinstance(body, dict) or _REQUIRED[kind] not in body:
        return None
    if kind == GEMINI:
        # The model is in the path: .../models/{model}:generateContent.
        name = path.split("?", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
        config = {"systemInstruction": body.get("systemInstruction"), "tools": body.get("tools")}
        return {"model": name or None, "contents": body["contents"], "config": config}
    if kind == OLLAMA_GENERATE:
        messages: list[dict[str, Any]] = []
        if isinstance(body.get("system"), str) and body["system"]:
            messages.append({"role": "system", "content": body["system"]})
        messages.append({"role": "user", "content": body.get("prompt") or ""})
        return {"model": body.get("model"), "messages": messages}
    if kind == COHERE_V1:
        return _cohere_v1(body)
    return body


# -- Cohere v1: ``message`` + ``chat_history`` + ``preamble``, calls without ids --

_V1_ROLES = {"USER": "user", "CHATBOT": "assistant", "SYSTEM": "system"}


def _v1_results(results: Any) -> list[dict[str, Any]]:
    out = []
    for result in results or ():
        call = get(result, "call")
        out.append({"role": "tool", "name": get(call, "name"), "content": arguments_text(get(result, "outputs"))})
    return out


def _v1_turn(turn: Any) -> list[dict[str, Any]]:
    role = get(turn, "role")
    if role == "TOOL":
        return _v1_results(get(turn, "tool_results"))
    mapped = _V1_ROLES.get(role) if isinstance(role, str) else None
    if mapped is None:
        return []
    message: dict[str, Any] = {"role": mapped, "content": get(turn, "message") or ""}
    calls = get(turn, "tool_calls")
    if mapped == "assistant" and calls:
        message["tool_calls"] = [
            {"function": {"name": get(c, "name"), "arguments": arguments_text(get(c, "parameters"))}} for c in calls
        ]
    return [message]


def _v1_tool(tool: Any) -> dict[str, Any]:
    """A v1 tool (``parameter_definitions``) in the Chat Completions shape."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in (get(tool, "parameter_definitions") or {}).items():
        prop = {k: v for k in ("type", "description") if isinstance(v := get(spec, k), str)}
        properties[name] = prop
        if get(spec, "required") is True:
            required.append(name)
    function: dict[str, Any] = {"name": get(tool, "name"), "parameters": {"type": "object", "properties": properties}}
    if required:
        function["parameters"]["required"] = required
    if isinstance(get(tool, "description"), str):
        function["description"] = get(tool, "description")
    return {"type": "function", "function": function}


def _cohere_v1(body: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("preamble"), str) and body["preamble"]:
        messages.append({"role": "system", "content": body["preamble"]})
    for turn in body.get("chat_history") or ():
        messages.extend(_v1_turn(turn))
    messages.extend(_v1_results(body.get("tool_results")))
    if isinstance(body.get("message"), str) and body["message"]:
        messages.append({"role": "user", "content": body["message"]})
    named: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        named["tools"] = [_v1_tool(t) for t in tools]
    return named
