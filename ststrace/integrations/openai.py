"""openai: Chat Completions (``create``, ``parse``) and the Responses API
(``create``, ``parse``). The ``stream()`` helpers of both call ``create`` (the
sync ones when their manager is entered), so they are covered too, and so are
the ``with_raw_response`` / ``with_streaming_response`` wrappers, which call
them with a header asking for the HTTP response."""

from __future__ import annotations

LIBRARY = "openai"
MIN_VERSION = (1, 40)

#: ``chat/completions`` became a package in openai 1.66 (``completions.completions``);
#: before, the module was ``chat/completions``.
_CHAT = ("openai.resources.chat.completions.completions", "openai.resources.chat.completions")

TARGETS = [
    (_CHAT, "Completions.create"),
    (_CHAT, "AsyncCompletions.create"),
    (_CHAT, "Completions.parse"),
    (_CHAT, "AsyncCompletions.parse"),
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

#: Methods only some supported versions have: ``chat.completions.parse`` came
#: in 1.92 (before, ``beta.chat.completions.parse`` posted through ``request``,
#: which the safety net records), the Responses API in 1.66.
OPTIONAL = frozenset(
    {
        "Completions.parse",
        "AsyncCompletions.parse",
        "Responses.create",
        "AsyncResponses.create",
        "Responses.parse",
        "AsyncResponses.parse",
    }
)
