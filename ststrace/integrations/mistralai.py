"""mistralai (the 3.x SDK, ``mistralai.client.Mistral``): ``chat.complete`` /
``complete_async`` and ``chat.stream`` / ``stream_async``. Replies are Chat
Completions-shaped (reasoning as ``thinking`` content chunks), recorded by the
openai Chat adapter; stream events wrap each chunk in ``data``."""

from __future__ import annotations

LIBRARY = "mistralai.client"
DISTRIBUTION = "mistralai"
MIN_VERSION = (3, 0)

TARGETS = [
    ("mistralai.client.chat", "Chat.complete"),
    ("mistralai.client.chat", "Chat.complete_async"),
    ("mistralai.client.chat", "Chat.stream"),
    ("mistralai.client.chat", "Chat.stream_async"),
]
