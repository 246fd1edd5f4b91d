"""together (2.x and later, the Stainless SDK): ``Together`` / ``AsyncTogether``
``chat.completions.create``, streamed or not (recorded by the openai Chat
adapter, see :mod:`._stainless`)."""

from __future__ import annotations

from ._stainless import chat_completions_targets

LIBRARY = "together"
MIN_VERSION = (2, 0)

TARGETS = chat_completions_targets("together", "CompletionsResource", "AsyncCompletionsResource")
