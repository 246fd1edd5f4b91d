"""httpx 0.x, the transport seam (see :mod:`ststrace.integrations._http`):
every model call made through ``httpx.Client`` / ``AsyncClient``, whatever
their transport, and seen by no SDK-level integration (groq, ollama, cohere,
cerebras, langchain-mistralai and litellm's own handlers post through it)."""

from __future__ import annotations

from ._http import make_wrapper

LIBRARY = "httpx"
MIN_VERSION = (0, 23)

TARGETS = [
    ("httpx", "Client.send"),
    ("httpx", "AsyncClient.send"),
]

__all__ = ["LIBRARY", "MIN_VERSION", "TARGETS", "make_wrapper"]
