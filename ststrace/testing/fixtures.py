"""pytest fixtures for testing agents offline, registered by ststrace's pytest plugin.

``fake_llm``: a :class:`~ststrace.testing.FakeAPI` server on 127.0.0.1 for one
test, with ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``ANTHROPIC_BASE_URL`` /
``ANTHROPIC_API_KEY`` pointing at it for the test's duration, and the other
providers' variables the SDKs read (``OLLAMA_HOST``, ``GROQ_BASE_URL``,
``GOOGLE_GEMINI_BASE_URL`` / ``GOOGLE_VERTEX_BASE_URL``, ``CO_API_URL``,
``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` with dummy AWS credentials), so an agent
that builds its client from the environment talks to the fake server without a
code change. Shape its replies
through the FakeAPI attributes (``text_reply``, ``tool_calls``, ``cached_tokens``...).

With ``pytest --ststrace-replay=DIR`` (or ``@pytest.mark.ststrace_replay(path)``)
``fake_llm`` is a :func:`ststrace.testing.replay` of the test's recorded trace
instead; with ``--ststrace-record=DIR`` (and for the tests
``--ststrace-record-missing`` records) it is ``None`` and the environment is
left alone, so the model it names answers and is recorded.

``ststrace_session``: the test's own :class:`ststrace.Session` (see
:mod:`ststrace.pytest_plugin`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

__all__ = ["REPLAY_PLAN", "Plan", "fake_llm"]

#: ``("fake" | "live" | "replay" | "missing", trace path or None)``.
Plan = tuple[Literal["fake", "live", "replay", "missing"], Path | None]
#: Set by the pytest plugin: what ``fake_llm`` serves a test (see ``pytest_plugin._plan``).
REPLAY_PLAN = pytest.StashKey[Callable[[pytest.Item], Plan]]()


@pytest.fixture
def fake_llm(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A scripted OpenAI / Anthropic / HF-compatible server on 127.0.0.1 (or the
    replay of the test's trace), with the client libraries' environment
    variables pointing at it."""
    from ststrace.testing.fakeapi import FakeAPI

    plan = request.config.stash.get(REPLAY_PLAN, None)
    kind, path = plan(request.node) if plan is not None else ("fake", None)
    if kind == "live":
        yield None
        return
    if kind == "missing":
        pytest.fail(
            f"ststrace: no recorded trace to replay for {request.node.nodeid}: looked for {path} "
            "(record it with --ststrace-record=DIR, or add --ststrace-record-missing)",
            pytrace=False,
        )
    if kind == "replay" and path is not None:
        from ststrace.testing._replay import replay

        api: Any = replay(path)
    else:
        api = FakeAPI()
    with api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key")
        for name, value in _provider_environment(api).items():
            monkeypatch.setenv(name, value)
        yield api


def _provider_environment(api: Any) -> dict[str, str]:
    """The other providers' variables, as each SDK reads them (checked in their source).

    Mistral's SDK reads no server URL from the environment (pass
    ``server_url=fake_llm.mistral_base_url``); Cohere reads ``CO_API_URL`` when
    ``cohere`` is imported, so it applies only to a first import after the fixture."""
    return {
        "OLLAMA_HOST": api.ollama_base_url,
        "GROQ_BASE_URL": api.url,  # the client adds /openai/v1
        "GROQ_API_KEY": "fake-key",
        "GOOGLE_GEMINI_BASE_URL": api.gemini_base_url,
        "GOOGLE_VERTEX_BASE_URL": api.gemini_base_url,
        "GOOGLE_API_KEY": "fake-key",
        "CO_API_URL": api.cohere_base_url,
        "CO_API_KEY": "fake-key",
        "MISTRAL_API_KEY": "fake-key",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": api.bedrock_base_url,
        "AWS_ACCESS_KEY_ID": "fake-key",
        "AWS_SECRET_ACCESS_KEY": "fake-key",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
