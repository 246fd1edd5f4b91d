"""huggingface_hub: ``InferenceClient.chat_completion`` and its async twin.
``client.chat.completions.create`` is an alias that resolves to the same
method at call time, so it is covered too."""

from __future__ import annotations

LIBRARY = "huggingface_hub"
MIN_VERSION = (0, 24)

TARGETS = [
    ("huggingface_hub.inference._client", "InferenceClient.chat_completion"),
    ("huggingface_hub.inference._generated._async_client", "AsyncInferenceClient.chat_completion"),
]
