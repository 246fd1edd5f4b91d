"""anthropic: Messages ``create`` (streamed or not) and the ``stream()`` helper,
which talks to the API directly rather than through ``create``."""

from __future__ import annotations

LIBRARY = "anthropic"
MIN_VERSION = (0, 40)

TARGETS = [
    ("anthropic.resources.messages.messages", "Messages.create"),
    ("anthropic.resources.messages.messages", "AsyncMessages.create"),
    ("anthropic.resources.messages.messages", "Messages.stream"),
    ("anthropic.resources.messages.messages", "AsyncMessages.stream"),
    # A safety net: model calls the methods above did not see (made through a
    # reference taken before instrument(), e.g. a cached with_raw_response).
    ("anthropic._base_client", "SyncAPIClient.request", "request"),
    ("anthropic._base_client", "AsyncAPIClient.request", "request"),
]
