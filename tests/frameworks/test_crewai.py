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

import asyncio
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

# CrewAI's own deprecated fields, which it reads itself on every run.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crewai")

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


def crew(fake: FakeAPI, is_litellm: bool, **llm_kwargs: Any) -> Any:
    llm = LLM(
        model=f"openai/{MODEL}", base_url=fake.openai_base_url, api_key="test", is_litellm=is_litellm, **llm_kwargs
    )
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
    body = api.requests[0].body
    if "input" in body:  # Responses: the role prompt goes in `instructions`
        system, user = body["instructions"], body["input"][0]["content"]
    else:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
        {
            "role": "assistant",
            "content": api.tool_preamble or "",
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


def kickoff(crew: Any, mode: str) -> str:
    """Runs *crew* synchronously, or its async *mode* in a new event loop (CrewAI
    refuses a synchronous kickoff inside a running loop)."""
    if mode == "kickoff":
        return str(crew.kickoff())
    return str(asyncio.run(getattr(crew, mode)()))


#: (LLM keyword arguments, streamed). CrewAI 1.15.30 cannot run tools through a
#: streamed Responses call (its streaming Responses handler returns the text
#: and drops the function calls when it does not execute them itself), so that
#: combination is left out.
LLMS = [
    pytest.param({"is_litellm": True}, False, id="litellm"),
    pytest.param({"is_litellm": True}, True, id="litellm-stream"),
    pytest.param({"is_litellm": False}, False, id="native-chat"),
    pytest.param({"is_litellm": False}, True, id="native-chat-stream"),
    pytest.param({"is_litellm": False, "api": "responses"}, False, id="native-responses"),
]


@pytest.mark.parametrize("mode", ["kickoff", "akickoff", "kickoff_async"])
@pytest.mark.parametrize(("provider", "stream"), LLMS)
def test_crew_kickoff(
    api: FakeAPI, trace: Path, messages_of: Messages, provider: dict[str, Any], stream: bool, mode: str
) -> None:
    """``Crew.kickoff`` / ``akickoff`` / ``kickoff_async`` through LiteLLM or
    CrewAI's own OpenAI provider (its default for ``openai/...``: Chat
    Completions through ``with_raw_response``, or the Responses API), the
    model streamed or not: role prompt, task, the provider's call id, its
    result, the answer."""
    with ststrace.Session(trace):
        assert kickoff(crew(api, stream=stream, **provider), mode) == "Here is what I found: Sunny, 21 C"
    assert api.requests and all(r.stream == stream for r in api.requests)
    assert TASK in expected(api)[1]["content"]
    assert messages_of(trace) == expected(api)


def test_streamed_litellm_result_without_id_answers_its_call(api: FakeAPI, trace: Path, messages_of: Messages) -> None:
    """CrewAI's streamed LiteLLM path sends the tool call back with ``id: null``
    and its result without ``tool_call_id``; the result still answers the
    provider's call recorded from the stream (the oldest waiting call of that
    tool), instead of being dropped."""
    with ststrace.Session(trace):
        kickoff(crew(api, is_litellm=True, stream=True), "kickoff")
    resent = api.requests[1].body["messages"]
    assert resent[2]["tool_calls"][0]["id"] is None
    assert resent[3]["role"] == "tool" and "tool_call_id" not in resent[3]
    assert messages_of(trace)[3] == {"role": "tool", "content": "Sunny, 21 C", "toolCallId": "call_weather01"}
