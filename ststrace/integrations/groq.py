"""groq: ``Groq`` / ``AsyncGroq`` ``chat.completions.create``, streamed or not
(a Stainless SDK: recorded by the openai Chat adapter, see :mod:`._stainless`)."""

from __future__ import annotations

from ._stainless import chat_completions_targets

LIBRARY = "groq"
MIN_VERSION = (0, 9)

TARGETS = chat_completions_targets("groq")
