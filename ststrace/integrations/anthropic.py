"""anthropic: Messages ``create`` (streamed or not) and the ``stream()`` helper,
which talks to the API directly rather than through ``create``."""

from __future__ import annotations

LIBRARY = "anthropic"
MIN_VERSION = (0, 40)

#: ``resources/messages`` became a package in anthropic 0.41.
_MESSAGES = ("anthropic.resources.messages.messages", "anthropic.resources.messages")

TARGETS = [
    (_MESSAGES, "Messages.create"),
    (_MESSAGES, "AsyncMessages.create"),
    (_MESSAGES, "Messages.stream"),
    (_MESSAGES, "AsyncMessages.stream"),
    # A safety net: model calls the methods above did not see (made through a
    # reference taken before instrument(), e.g. a cached with_raw_response).
    ("anthropic._base_client", "SyncAPIClient.request", "request"),
    ("anthropic._base_client", "AsyncAPIClient.request", "request"),
]
