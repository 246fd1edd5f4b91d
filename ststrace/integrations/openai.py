"""openai: Chat Completions (``create``, ``parse``) and the Responses API
(``create``, ``parse``). The ``stream()`` helpers of both call ``create`` (the
sync ones when their manager is entered), so they are covered too, and so are
the ``with_raw_response`` / ``with_streaming_response`` wrappers, which call
them with a header asking for the HTTP response."""

from __future__ import annotations

LIBRARY = "openai"
MIN_VERSION = (1, 40)

TARGETS = [
    ("openai.resources.chat.completions.completions", "Completions.create"),
    ("openai.resources.chat.completions.completions", "AsyncCompletions.create"),
    ("openai.resources.chat.completions.completions", "Completions.parse"),
    ("openai.resources.chat.completions.completions", "AsyncCompletions.parse"),
    ("openai.resources.responses.responses", "Responses.create"),
    ("openai.resources.responses.responses", "AsyncResponses.create"),
    ("openai.resources.responses.responses", "Responses.parse"),
    ("openai.resources.responses.responses", "AsyncResponses.parse"),
    # A safety net: model calls the methods above did not see (made through a
    # reference taken before instrument(), e.g. a cached with_raw_response).
    # Patched on the client classes, not their base: other instrumentations
    # (OpenInference) set ``OpenAI.request`` and leave it there after
    # uninstrumenting, which would shadow a patch on the base class.
    ("openai._client", "OpenAI.request", "request"),
    ("openai._client", "AsyncOpenAI.request", "request"),
]
