"""ollama: ``Client.chat`` / ``AsyncClient.chat``, streamed or not, and the
module-level ``ollama.chat`` (a method bound to a default client when ollama
is imported, so patching the class does not reach it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LIBRARY = "ollama"
MIN_VERSION = (0, 4)

TARGETS = [
    ("ollama._client", "Client.chat"),
    ("ollama._client", "AsyncClient.chat"),
    ("ollama", "chat"),
    # Not recorded here: an empty session's warning names them.
    ("ollama._client", "Client.generate", "unrecorded"),
    ("ollama._client", "AsyncClient.generate", "unrecorded"),
    ("ollama", "generate", "unrecorded"),
]
OPTIONAL = frozenset({"Client.generate", "AsyncClient.generate", "generate"})

_POSITIONAL = ("model", "messages")


def call_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``chat(model, messages, ...)`` takes both positionally too.

    Ollama's protocol has no tool-call ids (each recorded call gets a made-up
    one), so an id on a tool message is a framework's own (langchain-ollama
    sends LangChain's ``tool_call_id``) and answers no recorded call: the input
    reader gets the message without it and pairs the result by order (and by
    ``tool_name`` when there is one). The SDK still gets the caller's messages."""
    named = {**dict(zip(_POSITIONAL, args)), **kwargs}
    messages = named.get("messages")
    if isinstance(messages, (list, tuple)) and any(
        isinstance(m, Mapping) and m.get("role") == "tool" and "tool_call_id" in m for m in messages
    ):
        named["messages"] = [
            {k: v for k, v in m.items() if k != "tool_call_id"}
            if isinstance(m, Mapping) and m.get("role") == "tool"
            else m
            for m in messages
        ]
    return named
