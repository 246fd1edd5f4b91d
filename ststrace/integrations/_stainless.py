"""Targets shared by the SDKs that Stainless generates from an OpenAI-shaped API
(groq, together, cerebras-cloud-sdk, ...).

Their ``chat.completions.create`` takes the openai arguments and returns openai-
shaped ``ChatCompletion`` objects and ``Stream`` s of chunks, and their clients
share openai's ``request()`` plumbing, so the openai Chat adapter and the
``request`` safety net record them unchanged: an integration only says where
its package keeps those classes.
"""

from __future__ import annotations

Target = tuple[str, ...]


def chat_completions_targets(
    package: str,
    sync_class: str = "Completions",
    async_class: str = "AsyncCompletions",
) -> list[Target]:
    """The methods to patch in *package*, a Stainless SDK of an OpenAI-compatible API."""
    resources = f"{package}.resources.chat.completions"
    return [
        (resources, f"{sync_class}.create"),
        (resources, f"{async_class}.create"),
        # The safety net under them, as for openai: a call made through a
        # reference taken before instrument() (a cached with_raw_response).
        (f"{package}._base_client", "SyncAPIClient.request", "request"),
        (f"{package}._base_client", "AsyncAPIClient.request", "request"),
    ]
