"""pytest fixtures for testing agents offline, registered by ststrace's pytest plugin.

``fake_llm``: a :class:`~ststrace.testing.FakeAPI` server on 127.0.0.1 for one
test, with ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``ANTHROPIC_BASE_URL`` /
``ANTHROPIC_API_KEY`` pointing at it for the test's duration, so an agent that
builds its ``openai.OpenAI()`` / ``anthropic.Anthropic()`` client from the
environment talks to the fake server without a code change. Shape its replies
through the FakeAPI attributes (``text_reply``, ``tool_calls``, ``cached_tokens``...).

``ststrace_session``: the test's own :class:`ststrace.Session` (see
:mod:`ststrace.pytest_plugin`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["fake_llm"]


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A scripted OpenAI / Anthropic / HF-compatible server on 127.0.0.1, with the
    client libraries' environment variables pointing at it."""
    from ststrace.testing.fakeapi import FakeAPI

    with FakeAPI() as api:
        monkeypatch.setenv("OPENAI_BASE_URL", api.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "fake-key")
        yield api
