"""ollama: ``Client.chat`` / ``AsyncClient.chat``, streamed or not, and the
module-level ``ollama.chat`` (a method bound to a default client when ollama
is imported, so patching the class does not reach it)."""

from __future__ import annotations

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
    """``chat(model, messages, ...)`` takes both positionally too."""
    return {**dict(zip(_POSITIONAL, args)), **kwargs}
