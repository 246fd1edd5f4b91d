"""CrewAI with ``ststrace.instrument()`` against the local fake server.

CrewAI cannot be installed beside the pinned ``openai==3.57.0``: every release
(0.1.0 to 1.15.30) requires ``openai<3`` (1.15.30: ``openai>=2.30.0,<3``), so
it is not in the ``test`` extra and these tests skip in the main environment.
``make test`` runs them first in ``.venv-openai2``, made from the
``test-openai2`` extra (crewai 1.15.30, openai 2.54.0, litellm 1.110.2).

CrewAI's telemetry and tracing are switched off (``tests/frameworks/conftest.py``
and ``OTEL_SDK_DISABLED`` below); the network guard fails a test that tries
to reach anything but 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip(
    "crewai",
    reason=(
        "crewai is not installed: every CrewAI release requires openai<3 and the test extra pins openai==3.57.0; "
        "`make test` runs these in .venv-openai2 (the test-openai2 extra)"
    ),
)

from crewai import LLM, Agent, Crew, Task  # noqa: E402
from crewai.tools import tool  # noqa: E402

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedToolCall  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

Messages = Callable[[Path], list[dict[str, Any]]]

MODEL = "gpt-4o-mini"
TASK = "What's the weather in Paris?"


@tool("get_weather")
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "Sunny, 21 C"


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.setenv("CREWAI_STORAGE_DIR", str(tmp_path / "crewai"))
    import litellm  # noqa: F401  imported now, so instrument() patches it at once

    with instrumented():
        yield


@pytest.fixture
def api(no_external_network: list[str]) -> Iterator[FakeAPI]:
    with FakeAPI(tool_calls=[ScriptedToolCall("get_weather", {"city": "Paris"}, "weather01")]) as fake:
        yield fake


def crew(api: FakeAPI, is_litellm: bool) -> Any:
    llm = LLM(model=f"openai/{MODEL}", base_url=api.openai_base_url, api_key="test", is_litellm=is_litellm)
    agent = Agent(
        role="Weather reporter",
        goal="Report the weather",
        backstory="You know weather.",
        tools=[get_weather],
        llm=llm,
        verbose=False,
    )
    task = Task(description=TASK, expected_output="One line.", agent=agent)
    return Crew(agents=[agent], tasks=[task], verbose=False)


def expected(api: FakeAPI) -> list[dict[str, Any]]:
    sent = api.requests_to("chat")[0].body["messages"]
    return [
        {"role": "system", "content": sent[0]["content"]},
        {"role": "user", "content": sent[1]["content"]},
        {
            "role": "assistant",
            "content": "Let me look that up.",
            "reasoningContent": "I should call get_weather.",
            "toolCalls": [{"id": "call_weather01", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}],
            "model": MODEL,
        },
        {"role": "tool", "content": "Sunny, 21 C", "toolCallId": "call_weather01"},
        {
            "role": "assistant",
            "content": "Here is what I found: Sunny, 21 C",
            "reasoningContent": "The tool results answer the question.",
            "model": MODEL,
        },
    ]


def test_crew_kickoff_through_litellm(api: FakeAPI, trace: Path, messages_of: Messages) -> None:
    """``Crew.kickoff`` with a LiteLLM-backed ``LLM``: role prompt, task, the
    provider's call id, its result, the answer."""
    with ststrace.Session(trace):
        assert str(crew(api, is_litellm=True).kickoff()) == "Here is what I found: Sunny, 21 C"
    assert TASK in expected(api)[1]["content"]
    assert messages_of(trace) == expected(api)


def test_crew_kickoff_through_the_native_openai_provider(api: FakeAPI, trace: Path, messages_of: Messages) -> None:
    """``Crew.kickoff`` with CrewAI's own OpenAI provider (its default for ``openai/...``)."""
    with ststrace.Session(trace):
        assert str(crew(api, is_litellm=False).kickoff()) == "Here is what I found: Sunny, 21 C"
    assert messages_of(trace) == expected(api)
