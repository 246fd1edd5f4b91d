"""PydanticAI (``pydantic-ai-slim[openai]``) with ``ststrace.instrument()`` against
the local fake server: ``run_sync``, ``run`` and ``run_stream``, on the Chat
Completions and the Responses model. PydanticAI sends tool results back as
real tool messages, so the openai client instrumentation alone records the
run; these tests lock the exact message sequence in, ids included.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim is not installed (pip install 'ststrace[test]')")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedReply, ScriptedToolCall  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

Messages = Callable[[Path], list[dict[str, Any]]]

MODEL = "fake-model"
INSTRUCTIONS = "Answer briefly; use the tools for facts."
PROMPT = "What's the weather in Paris, and the time there?"
REASONING_TOOLS = "I should call get_weather and get_time."
REASONING_ANSWER = "The tool results answer the question."
ANSWER = "Here is what I found: Sunny, 21 C; 15:00"


def get_weather(city: str) -> str:
    """The weather in a city."""
    return "Sunny, 21 C"


def get_time(tz: str) -> str:
    """The time in a time zone."""
    return "15:00"


@pytest.fixture
def api(no_external_network: list[str]) -> Iterator[FakeAPI]:
    # No text beside the tool calls: run_stream ends at the first reply that
    # holds text (PydanticAI's documented behaviour), before any tool runs.
    with FakeAPI(tool_preamble=None) as fake:
        yield fake


@pytest.fixture(autouse=True)
def _instrumented() -> Iterator[None]:
    with instrumented():
        yield


def agent(api: FakeAPI, kind: str, tools: list[Any] | None = None) -> Any:
    provider = OpenAIProvider(base_url=api.openai_base_url, api_key="test")
    model_cls = OpenAIResponsesModel if kind == "responses" else OpenAIChatModel
    return Agent(model_cls(MODEL, provider=provider), tools=tools or [get_weather, get_time], instructions=INSTRUCTIONS)


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": arguments}}


EXPECTED = [
    {"role": "system", "content": INSTRUCTIONS},
    {"role": "user", "content": PROMPT},
    {
        "role": "assistant",
        "content": "",
        "reasoningContent": REASONING_TOOLS,
        "toolCalls": [
            call("call_weather01", "get_weather", '{"city":"Paris"}'),
            call("call_time02", "get_time", '{"tz":"Europe/Paris"}'),
        ],
        "model": MODEL,
    },
    {"role": "tool", "content": "Sunny, 21 C", "toolCallId": "call_weather01"},
    {"role": "tool", "content": "15:00", "toolCallId": "call_time02"},
    {"role": "assistant", "content": ANSWER, "reasoningContent": REASONING_ANSWER, "model": MODEL},
]


async def run_entry(a: Any, entry: str, prompt: str = PROMPT, **kwargs: Any) -> Any:
    if entry == "run":
        return await a.run(prompt, **kwargs)
    async with a.run_stream(prompt, **kwargs) as result:
        await result.get_output()
        return result


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_run_sync(api: FakeAPI, trace: Path, messages_of: Messages, kind: str) -> None:
    """``Agent.run_sync``: instructions, prompt, the calls with the provider's
    ids, each result paired, the answer; one request per model turn."""
    with ststrace.Session(trace):
        result = agent(api, kind).run_sync(PROMPT)
    assert result.output == ANSWER
    assert len(api.requests) == 2
    assert messages_of(trace) == EXPECTED


@pytest.mark.parametrize("entry", ["run", "run_stream"])
@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_async_entry_points(api: FakeAPI, trace: Path, messages_of: Messages, kind: str, entry: str) -> None:
    """``await Agent.run`` and ``async with Agent.run_stream``: the same trace."""
    async with ststrace.Session(trace):
        result = await run_entry(agent(api, kind), entry)
    assert all(r.stream == (entry == "run_stream") for r in api.requests)
    assert (result.output if entry == "run" else await result.get_output()) == ANSWER
    assert messages_of(trace) == EXPECTED


@pytest.mark.parametrize("entry", ["run", "run_stream"])
async def test_a_follow_up_turn_records_only_what_is_new(
    api: FakeAPI, trace: Path, messages_of: Messages, entry: str
) -> None:
    """A second turn with ``message_history``: the new prompt and reply only."""
    a = agent(api, "chat")
    async with ststrace.Session(trace):
        first = await run_entry(a, entry)
        api.script(ScriptedReply(text="Rain tomorrow.", reasoning="No tool needed."))
        await run_entry(a, entry, "Thanks! And tomorrow?", message_history=first.all_messages())
    # The whole history went out again with the second request ...
    assert len(api.requests[-1].body.get("messages") or api.requests[-1].body.get("input")) >= 5
    # ... and only the new turn was recorded.
    assert messages_of(trace) == [
        *EXPECTED,
        {"role": "user", "content": "Thanks! And tomorrow?"},
        {"role": "assistant", "content": "Rain tomorrow.", "reasoningContent": "No tool needed.", "model": MODEL},
    ]


def test_ststrace_tool_on_a_tool_function_records_each_result_once(
    api: FakeAPI, trace: Path, messages_of: Messages
) -> None:
    """``@ststrace.tool`` on a PydanticAI tool: still one call and one result per
    tool use, with the provider's id."""

    @ststrace.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny, 21 C"

    with ststrace.Session(trace):
        assert agent(api, "chat", [get_weather, get_time]).run_sync(PROMPT).output == ANSWER
    assert messages_of(trace) == EXPECTED


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_a_tool_that_raises_out_of_the_run_answers_its_call_with_the_error(
    api: FakeAPI, trace: Path, messages_of: Messages, kind: str
) -> None:
    """A tool raising a plain exception ends ``run_sync`` with it (PydanticAI
    retries only on ``ModelRetry``): the trace answers the call with that error
    rather than leaving it unanswered, and the caller gets the same exception."""
    boom = RuntimeError("time service down")

    def get_time(tz: str) -> str:
        """The time in a time zone."""
        raise boom

    api.tool_calls = (ScriptedToolCall("get_time", {"tz": "Europe/Paris"}, "time09"),)
    with pytest.raises(RuntimeError) as raised:
        with ststrace.Session(trace):
            agent(api, kind, tools=[get_time]).run_sync(PROMPT)
    assert raised.value is boom
    messages = messages_of(trace)  # validates, every call answered exactly once
    assert messages[-1] == {"role": "tool", "content": "Error: RuntimeError: time service down", "toolCallId": "call_time09"}
    assert [c["id"] for c in messages[-2]["toolCalls"]] == ["call_time09"]
