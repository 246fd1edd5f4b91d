"""cerebras-cloud-sdk: ``Cerebras`` / ``AsyncCerebras`` ``chat.completions.create``,
streamed or not (a Stainless SDK: recorded by the openai Chat adapter, see
:mod:`._stainless`)."""

from __future__ import annotations

from ._stainless import chat_completions_targets

LIBRARY = "cerebras.cloud.sdk"
DISTRIBUTION = "cerebras-cloud-sdk"
MIN_VERSION = (1, 0)

TARGETS = chat_completions_targets("cerebras.cloud.sdk", "CompletionsResource", "AsyncCompletionsResource")
