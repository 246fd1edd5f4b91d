"""pytest fixtures for testing agents offline, registered by ststrace's pytest plugin.

``fake_llm``: a :class:`~ststrace.testing.FakeAPI` server on 127.0.0.1 for one
test, with ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``ANTHROPIC_BASE_URL`` /
``ANTHROPIC_API_KEY`` pointing at it for the test's duration, so an agent that
builds its ``openai.OpenAI()`` / ``anthropic.Anthropic()`` client from the
environment talks to the fake server without a code change. Shape its replies
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
        yield api
