"""pytest plugin: the local fake LLM API and the real client libraries pointed at it.

Register it from ``tests/conftest.py`` with ``pytest_plugins = ["fakeapi_fixtures"]``
(``tests/`` is on ``sys.path`` while pytest imports the conftest). Test modules may
also import fixtures from here directly.

Every client is built with ``max_retries=0``, a 5 s timeout and, where offered,
``_strict_response_validation=True``, so a reply the real SDK would reject fails
the test. ``fake_api`` runs under the network guard: any attempt to reach a host
other than the loopback one fails the test at teardown, even if the client
library swallowed the refusal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ststrace.testing import FakeAPI, localhost_only

TIMEOUT = 5.0


def openai_client(api: FakeAPI, **kwargs: Any) -> Any:
    """A sync ``openai.OpenAI`` client for ``api``; keyword arguments override the test defaults."""
    import openai

    options: dict[str, Any] = dict(
        base_url=api.openai_base_url, api_key="test", max_retries=0, timeout=TIMEOUT, _strict_response_validation=True
    )
    return openai.OpenAI(**{**options, **kwargs})


def async_openai_client(api: FakeAPI, **kwargs: Any) -> Any:
    import openai

    options: dict[str, Any] = dict(
        base_url=api.openai_base_url, api_key="test", max_retries=0, timeout=TIMEOUT, _strict_response_validation=True
    )
    return openai.AsyncOpenAI(**{**options, **kwargs})


def anthropic_client(api: FakeAPI, **kwargs: Any) -> Any:
    import anthropic

    options: dict[str, Any] = dict(
        base_url=api.anthropic_base_url,
        api_key="test",
        max_retries=0,
        timeout=TIMEOUT,
        _strict_response_validation=True,
    )
    return anthropic.Anthropic(**{**options, **kwargs})


def async_anthropic_client(api: FakeAPI, **kwargs: Any) -> Any:
    import anthropic

    options: dict[str, Any] = dict(
        base_url=api.anthropic_base_url,
        api_key="test",
        max_retries=0,
        timeout=TIMEOUT,
        _strict_response_validation=True,
    )
    return anthropic.AsyncAnthropic(**{**options, **kwargs})


def quiet_huggingface_hub() -> None:
    """Stop ``huggingface_hub`` fetching its agent registry from huggingface.co.

    Building request headers calls ``detect_agent()``, which downloads
    ``/api/agent-harnesses`` once a day unless telemetry is disabled;
    ``HF_HUB_OFFLINE`` cannot be used instead because it blocks every request,
    including those to the local server.
    """
    import huggingface_hub.constants

    huggingface_hub.constants.HF_HUB_DISABLE_TELEMETRY = True


def hf_client(api: FakeAPI, **kwargs: Any) -> Any:
    from huggingface_hub import InferenceClient

    quiet_huggingface_hub()
    return InferenceClient(**{"base_url": api.hf_base_url, "api_key": "test", "timeout": TIMEOUT, **kwargs})


def async_hf_client(api: FakeAPI, **kwargs: Any) -> Any:
    from huggingface_hub import AsyncInferenceClient

    quiet_huggingface_hub()
    return AsyncInferenceClient(**{"base_url": api.hf_base_url, "api_key": "test", "timeout": TIMEOUT, **kwargs})


#: Environment variables google-genai and google-auth read: a developer's own
#: key, project or credentials must not leak into (or out of) a test.
GOOGLE_ENV = (
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_CLOUD_LOCATION",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
)


def quiet_google(monkeypatch: pytest.MonkeyPatch) -> None:
    """No developer key, project or credentials from the environment, and no
    probe of the GCE metadata server by google-auth."""
    for var in GOOGLE_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_GCE_CHECK", "True")


def gemini_client(api: FakeAPI, *, vertexai: bool = False, **kwargs: Any) -> Any:
    """A ``google.genai.Client`` for ``api`` (Gemini API, or Vertex AI with a
    fixed bearer token), with no retries and a 5 s timeout."""
    from google import genai
    from google.genai import types

    http = types.HttpOptions(
        base_url=api.gemini_base_url,
        timeout=int(TIMEOUT * 1000),
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    if vertexai:
        from google.oauth2.credentials import Credentials

        options: dict[str, Any] = dict(
            vertexai=True, project="test-project", location="us-central1", credentials=Credentials(token="test")
        )
    else:
        options = dict(api_key="test")
    return genai.Client(**{**options, "http_options": http, **kwargs})


@pytest.fixture
def no_external_network() -> Iterator[list[str]]:
    """Refuse non-loopback connections and look-ups; fail at teardown if any was attempted."""
    with localhost_only() as attempts:
        yield attempts
        refused = list(attempts)
    assert not refused, f"code under test tried to reach the network: {refused}"


@pytest.fixture
def fake_api(no_external_network: list[str]) -> Iterator[FakeAPI]:
    """A fresh fake server (default script) for one test."""
    with FakeAPI() as api:
        yield api


@pytest.fixture
def openai_sync(fake_api: FakeAPI) -> Iterator[Any]:
    client = openai_client(fake_api)
    yield client
    client.close()


@pytest.fixture
async def openai_async(fake_api: FakeAPI) -> AsyncIterator[Any]:
    client = async_openai_client(fake_api)
    yield client
    await client.close()


@pytest.fixture
def anthropic_sync(fake_api: FakeAPI) -> Iterator[Any]:
    client = anthropic_client(fake_api)
    yield client
    client.close()


@pytest.fixture
async def anthropic_async(fake_api: FakeAPI) -> AsyncIterator[Any]:
    client = async_anthropic_client(fake_api)
    yield client
    await client.close()


@pytest.fixture
def hf_sync(fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
    client = hf_client(fake_api)
    yield client
    client.close()


@pytest.fixture
async def hf_async(fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
    client = async_hf_client(fake_api)
    yield client
    await client.close()
