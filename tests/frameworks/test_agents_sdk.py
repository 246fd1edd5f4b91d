"""The OpenAI Agents SDK (``openai-agents``) under ``ststrace.instrument()``
alone, against the local fake server: ``Runner.run``, ``run_sync`` and
``run_streamed`` with the default Responses model (and the Chat Completions
one), handoffs, ``max_turns``, guardrail tripwires, a tool that ends the run,
and ststrace's ``@tool`` under ``@function_tool``.

The SDK's own tracing is switched off (``OPENAI_AGENTS_DISABLE_TRACING`` before
import, ``set_tracing_disabled(True)``), so nothing is exported anywhere; the
network guard would fail the test otherwise."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
agents = pytest.importorskip("agents", reason="openai-agents is not installed (pip install 'ststrace[test]')")
openai = pytest.importorskip("openai")

from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    OutputGuardrailTripwireTriggered,
    Runner,
    function_tool,
    input_guardrail,
    output_guardrail,
    set_tracing_disabled,
)

import ststrace  # noqa: E402
from ststrace import Session  # noqa: E402
from ststrace._instrument import instrumented as patched_now  # noqa: E402
from ststrace.testing import DEFAULT_TOOL_CALLS, FakeAPI, ScriptedToolCall  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    INPUTS,
    instrumented,
    MODEL,
    PREAMBLE,
    REASONING_ANSWER,
    SYSTEM,
    TIME_RESULT,
    USER,
    WEATHER_RESULT,
    new_trace,
    recorded,
    tool_reply,
)

set_tracing_disabled(True)


@pytest.fixture
def instrumented_all() -> Iterator[None]:
    """``ststrace.instrument()`` with no names, as a user writes it."""
    ststrace.instrument()
    try:
        yield
    finally:
        ststrace.uninstrument()


@function_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return WEATHER_RESULT if city == "Paris" else "unknown"


@function_tool
def get_time(tz: str) -> str:
    """Local time in an IANA time zone."""
    return TIME_RESULT if tz == "Europe/Paris" else "unknown"


def _traced_weather() -> Any:
    @function_tool
    @ststrace.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return WEATHER_RESULT if city == "Paris" else "unknown"

    return get_weather


#: ``get_weather`` with ststrace's ``@tool`` under ``@function_tool``.
get_weather_traced = _traced_weather()


def responses_model(api: FakeAPI) -> Any:
    # A client per test: the SDK's run_sync reuses the thread's event loop,
    # an async client must not outlive the loop it first ran on.
    client = openai.AsyncOpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0, timeout=5)
    return OpenAIResponsesModel(model=MODEL, openai_client=client)


def chat_model(api: FakeAPI) -> Any:
    client = openai.AsyncOpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0, timeout=5)
    return OpenAIChatCompletionsModel(model=MODEL, openai_client=client)


def weather_agent(api: FakeAPI, tools: list[Any] | None = None, model: Any = None, **kwargs: Any) -> Any:
    return Agent(
        name="weather",
        instructions=SYSTEM,
        tools=[get_weather, get_time] if tools is None else tools,
        model=model or responses_model(api),
        **kwargs,
    )


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "toolCallId": call_id, "content": content}


def answer(api: FakeAPI, *results: str) -> dict[str, Any]:
    return {"role": "assistant", "content": api.answer_for(list(results)), "reasoningContent": REASONING_ANSWER, "model": MODEL}


def full_run(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        *INPUTS,
        tool_reply(),
        result("call_weather01", WEATHER_RESULT),
        result("call_time02", TIME_RESULT),
        answer(api, WEATHER_RESULT, TIME_RESULT),
    ]


def weather_call(api: FakeAPI) -> dict[str, Any]:
    api.tool_calls = (DEFAULT_TOOL_CALLS[0],)
    reply = tool_reply()
    reply["toolCalls"] = reply["toolCalls"][:1]
    reply["reasoningContent"] = "I should call get_weather."
    return reply


# --------------------------------------------------------------------------- Runner modes


async def test_runner_run(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """``Runner.run``: instructions and input once, the reply with the provider's
    call ids, both tool results paired, the final answer."""
    path = new_trace(tmp_path)
    async with Session(path):
        run = await Runner.run(weather_agent(fake_api), USER)
    assert run.final_output == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == full_run(fake_api)


def test_runner_run_sync(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """``Runner.run_sync``: the same trace."""
    path = new_trace(tmp_path)
    with Session(path):
        Runner.run_sync(weather_agent(fake_api), USER)
    assert recorded(path) == full_run(fake_api)


async def test_runner_run_streamed(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """``Runner.run_streamed`` (``responses.with_streaming_response``): the same
    trace, and every request really was streamed."""
    path = new_trace(tmp_path)
    async with Session(path):
        run = Runner.run_streamed(weather_agent(fake_api), USER)
        kinds = {event.type async for event in run.stream_events()}
    assert "raw_response_event" in kinds
    assert all(r.stream for r in fake_api.requests_to("responses"))
    assert recorded(path) == full_run(fake_api)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_chat_completions_model(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, streamed: bool) -> None:
    """With ``OpenAIChatCompletionsModel`` instead of the Responses model."""
    path = new_trace(tmp_path)
    agent = weather_agent(fake_api, model=chat_model(fake_api))
    async with Session(path):
        if streamed:
            run = Runner.run_streamed(agent, USER)
            async for _ in run.stream_events():
                pass
        else:
            await Runner.run(agent, USER)
    assert len(fake_api.requests_to("chat")) == 2
    assert recorded(path) == full_run(fake_api)


def test_second_run_with_history_records_only_what_is_new(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path
) -> None:
    """``to_input_list()`` of the first run plus a new question: only the new
    user message and its reply are added."""
    agent = weather_agent(fake_api)
    path = new_trace(tmp_path)
    with Session(path):
        first = Runner.run_sync(agent, USER)
        fake_api.tool_calls = ()
        Runner.run_sync(weather_agent(fake_api), [*first.to_input_list(), {"role": "user", "content": "Thanks!"}])
    text = {
        "role": "assistant",
        "content": "Hello from the fake API.",
        "reasoningContent": "A short greeting is enough here.",
        "model": MODEL,
    }
    assert recorded(path) == [*full_run(fake_api), {"role": "user", "content": "Thanks!"}, text]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_traced_tool_records_one_call_and_one_result(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, streamed: bool
) -> None:
    """ststrace's ``@tool`` under ``@function_tool``: the result is recorded
    when the tool runs, with the provider's id; nothing is duplicated."""
    reply = weather_call(fake_api)
    path = new_trace(tmp_path)
    agent = weather_agent(fake_api, [get_weather_traced])
    async with Session(path):
        if streamed:
            async for _ in Runner.run_streamed(agent, USER).stream_events():
                pass
        else:
            await Runner.run(agent, USER)
    assert recorded(path) == [*INPUTS, reply, result("call_weather01", WEATHER_RESULT), answer(fake_api, WEATHER_RESULT)]


def test_tool_that_ends_the_run_is_answered(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """``tool_use_behavior="stop_on_first_tool"``: the tool's output is the final
    output and never goes back to the model; it is recorded from the run."""
    reply = weather_call(fake_api)
    path = new_trace(tmp_path)
    with Session(path):
        run = Runner.run_sync(weather_agent(fake_api, [get_weather], tool_use_behavior="stop_on_first_tool"), USER)
    assert run.final_output == WEATHER_RESULT
    assert recorded(path) == [*INPUTS, reply, result("call_weather01", WEATHER_RESULT)]


# --------------------------------------------------------------------------- handoffs


def handoff_agents(api: FakeAPI) -> Any:
    weather = weather_agent(api)
    triage = Agent(name="triage", instructions="Hand weather questions to the weather agent.", handoffs=[weather], model=responses_model(api))
    api.tool_calls = (ScriptedToolCall("transfer_to_weather", {}, "handoff01"),)
    return triage


def handoff_trace(api: FakeAPI) -> list[dict[str, Any]]:
    transfer = {
        "role": "assistant",
        "content": PREAMBLE,
        "reasoningContent": "I should call transfer_to_weather.",
        "toolCalls": [{"id": "call_handoff01", "function": {"name": "transfer_to_weather", "arguments": "{}"}}],
        "model": MODEL,
    }
    handed = '{"assistant": "weather"}'
    return [
        {"role": "system", "content": "Hand weather questions to the weather agent."},
        {"role": "user", "content": USER},
        transfer,
        result("call_handoff01", handed),
        {"role": "system", "content": SYSTEM},  # the weather agent's instructions from here on
        answer(api, handed),
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_handoff_is_one_session(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, streamed: bool) -> None:
    """A handoff: the transfer is a tool call answered by the SDK's handoff
    output, then the new agent's instructions as a system message, then its
    reply; one session holds the whole run."""
    triage = handoff_agents(fake_api)
    path = new_trace(tmp_path)
    async with Session(path):
        if streamed:
            run: Any = Runner.run_streamed(triage, USER)
            async for _ in run.stream_events():
                pass
        else:
            run = await Runner.run(triage, USER)
    assert run.last_agent.name == "weather"
    assert recorded(path) == handoff_trace(fake_api)


# --------------------------------------------------------------------------- runs that stop


def max_turns_trace(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        *INPUTS,
        tool_reply(),
        result("call_weather01", WEATHER_RESULT),
        result("call_time02", TIME_RESULT),
        {"role": "system", "content": "The agent run stopped: Max turns (1) exceeded"},
    ]


def test_max_turns_exceeded(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """``max_turns=1``: the tools of the last turn ran but their outputs never
    reached a model; they are recorded from the error's run data, and the
    trace ends saying why the run stopped."""
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(MaxTurnsExceeded):
            Runner.run_sync(weather_agent(fake_api), USER, max_turns=1)
    assert recorded(path) == max_turns_trace(fake_api)


async def test_max_turns_exceeded_streamed(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """The same with ``run_streamed``: the error surfaces from ``stream_events()``."""
    path = new_trace(tmp_path)
    async with Session(path):
        run = Runner.run_streamed(weather_agent(fake_api), USER, max_turns=1)
        with pytest.raises(MaxTurnsExceeded):
            async for _ in run.stream_events():
                pass
    assert recorded(path) == max_turns_trace(fake_api)


@input_guardrail(run_in_parallel=False)
def no_weather(ctx: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info={"reason": "weather is off topic"}, tripwire_triggered=True)


@output_guardrail
def no_answers(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="answers are not allowed", tripwire_triggered=True)


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_input_guardrail_tripwire(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, streamed: bool) -> None:
    """A blocking input guardrail trips before any model call: the trace still
    holds the prompt, then says which guardrail stopped the run and why."""
    path = new_trace(tmp_path)
    agent = weather_agent(fake_api, input_guardrails=[no_weather])
    async with Session(path):
        with pytest.raises(InputGuardrailTripwireTriggered):
            if streamed:
                async for _ in Runner.run_streamed(agent, USER).stream_events():
                    pass
            else:
                await Runner.run(agent, USER)
    assert fake_api.requests == []
    assert recorded(path) == [
        *INPUTS,
        {"role": "system", "content": 'The agent run stopped: input guardrail \'no_weather\' tripped: {"reason":"weather is off topic"}'},
    ]


def test_output_guardrail_tripwire(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """An output guardrail trips on the final answer: the answer, then the note."""
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(OutputGuardrailTripwireTriggered):
            Runner.run_sync(weather_agent(fake_api, output_guardrails=[no_answers]), USER)
    assert recorded(path) == [
        *full_run(fake_api),
        {"role": "system", "content": "The agent run stopped: output guardrail 'no_answers' tripped: answers are not allowed"},
    ]


def test_failed_model_call_ends_the_trace(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """The model call after a tool turn fails (HTTP 500): the tool's output is
    recorded, then what stopped the run."""
    reply = weather_call(fake_api)

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        fake_api.fail_next(500, "boom")  # the next model call
        return WEATHER_RESULT

    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(openai.InternalServerError):
            Runner.run_sync(weather_agent(fake_api, [get_weather]), USER)
    assert recorded(path) == [
        *INPUTS,
        reply,
        result("call_weather01", WEATHER_RESULT),
        {"role": "system", "content": "The agent run failed: InternalServerError: Error code: 500 - boom"},
    ]


def test_tool_error_that_stops_the_run_answers_the_call(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path
) -> None:
    """A tool whose error stops the run (``failure_error_function=None``): its
    call is answered with an error result, then the run's failure is noted."""
    reply = weather_call(fake_api)

    @function_tool(failure_error_function=None)
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise RuntimeError("weather service down")

    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(Exception, match="weather service down") as caught:
            Runner.run_sync(weather_agent(fake_api, [get_weather]), USER)
    messages = recorded(path)
    assert messages[:3] == [*INPUTS, reply]
    note = messages[4]["content"]
    assert note.startswith(f"The agent run failed: {type(caught.value).__name__}: ") and "weather service down" in note
    assert messages[3:] == [result("call_weather01", f"Error: {note}"), {"role": "system", "content": note}]


def test_instrument_by_name_and_undo(fake_api: FakeAPI, tmp_path: Path) -> None:
    """``instrument("openai-agents")`` patches the runner (and ``uninstrument``
    restores it); with only that, the model calls themselves are not recorded,
    but the run's end still is."""
    assert ststrace.instrument("agents") == ["openai_agents"]
    ststrace.uninstrument()
    path = new_trace(tmp_path)
    with instrumented("openai_agents"):
        assert patched_now() == ["openai_agents"]
        with Session(path):
            with pytest.raises(MaxTurnsExceeded):
                Runner.run_sync(weather_agent(fake_api), USER, max_turns=1)
    assert recorded(path) == [
        *INPUTS,
        {"role": "system", "content": "The agent run stopped: Max turns (1) exceeded"},
    ]
