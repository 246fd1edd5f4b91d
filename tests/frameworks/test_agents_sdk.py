"""The OpenAI Agents SDK (``openai-agents``) under ``ststrace.instrument()``
alone, against the local fake server: ``Runner.run``, ``run_sync`` and
``run_streamed`` with the default Responses model (and the Chat Completions
one), handoffs, ``max_turns``, guardrail tripwires, a tool that ends the run,
and ststrace's ``@tool`` under ``@function_tool``.

The SDK's own tracing is switched off (``OPENAI_AGENTS_DISABLE_TRACING`` before
import, ``set_tracing_disabled(True)``), so nothing is exported anywhere; the
network guard would fail the test otherwise."""

from __future__ import annotations

import inspect

import json
import os
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
from ststrace.testing import DEFAULT_TOOL_CALLS, FakeAPI, ScriptedReply, ScriptedToolCall  # noqa: E402
from test_decorators_helpers import assert_paired, valid_messages  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    INPUTS,
    instrumented,
    MODEL,
    PREAMBLE,
    REASONING_ANSWER,
    SYSTEM,
    TIME_RESULT,
    USER,
    WEATHER_ARGS,
    WEATHER_RESULT,
    new_trace,
    recorded,
    tool_reply,
)

set_tracing_disabled(True)


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


def _no_weather(ctx: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info={"reason": "weather is off topic"}, tripwire_triggered=True)


_no_weather.__name__ = "no_weather"
#: Blocking input guardrails (``run_in_parallel=False``) came in openai-agents
#: 0.4; the version matrix runs this file at 0.2 and 0.3 too.
BLOCKING_GUARDRAILS = "run_in_parallel" in inspect.signature(input_guardrail).parameters
no_weather = input_guardrail(run_in_parallel=False)(_no_weather) if BLOCKING_GUARDRAILS else input_guardrail(_no_weather)


@output_guardrail
def no_answers(ctx: Any, agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="answers are not allowed", tripwire_triggered=True)


@pytest.mark.skipif(not BLOCKING_GUARDRAILS, reason="this openai-agents has no blocking input guardrails")
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


# --------------------------------------------------------------------------- agents as tools


ASK = ScriptedToolCall("ask_weather", {"input": "Paris"}, "ask01")
INNER_ANSWER = "Sunny, 21 C in Paris."
OUTER_ANSWER = "It is sunny in Paris."
INNER_SYSTEM = "Report the weather of the city you are given."


def agent_tool_setup(api: FakeAPI, stream_inner: bool = False, inner_max_turns: int | None = None) -> tuple[Any, list[Any]]:
    """A planner whose tool ``ask_weather`` is the weather agent run as a tool."""
    inner = Agent(name="weather reporter", instructions=INNER_SYSTEM, tools=[get_weather], model=responses_model(api))
    events: list[Any] = []
    options: dict[str, Any] = {}
    if stream_inner:
        options["on_stream"] = events.append
    if inner_max_turns is not None:
        options["max_turns"] = inner_max_turns
    ask = inner.as_tool(tool_name="ask_weather", tool_description="Ask the weather agent.", **options)
    outer = Agent(name="planner", instructions=SYSTEM, tools=[ask], model=responses_model(api))
    return outer, events


def header_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


def children_of(path: Path) -> list[Path]:
    """The other trace files beside *path* (its sub-agents' sessions)."""
    return sorted(p for p in path.parent.glob("*.jsonl") if p != path)


def parent_trace(inner_result: str) -> list[dict[str, Any]]:
    return [
        *INPUTS,
        {"role": "assistant", "content": "", "toolCalls": [call("call_ask01", "ask_weather", ASK.arguments_json)], "model": MODEL},
        result("call_ask01", inner_result),
        {"role": "assistant", "content": OUTER_ANSWER, "model": MODEL},
    ]


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize("mode", ["run", "run_streamed", "inner_on_stream"])
async def test_an_agent_run_as_a_tool_records_a_linked_child_session(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, messages_of: Any, mode: str
) -> None:
    """``agent.as_tool()``: the inner agent's run is a child session beside the
    parent's file, named after the inner agent and linked to the parent's call
    (the provider's id); the parent holds the call and the inner agent's answer
    as the SDK returned it, and nothing of the inner run."""
    outer, events = agent_tool_setup(fake_api, stream_inner=mode == "inner_on_stream")
    fake_api.script(
        ScriptedReply(text=None, tool_calls=(ASK,)),  # planner
        ScriptedReply(text=None, tool_calls=(DEFAULT_TOOL_CALLS[0],)),  # weather reporter
        ScriptedReply(text=INNER_ANSWER),  # weather reporter
        ScriptedReply(text=OUTER_ANSWER),  # planner
    )
    path = new_trace(tmp_path)
    async with Session(path, harness="planner-app") as parent:
        if mode == "run_streamed":
            run: Any = Runner.run_streamed(outer, USER)
            async for _ in run.stream_events():
                pass
        else:
            run = await Runner.run(outer, USER)
    assert run.final_output == OUTER_ANSWER
    assert (len(events) > 0) == (mode == "inner_on_stream")
    assert messages_of(path) == parent_trace(INNER_ANSWER)
    assert "parentSessionId" not in header_of(path)
    [child_path] = children_of(path)
    header = header_of(child_path)
    assert child_path == path.parent / f"{path.stem}.{header['id']}.jsonl"
    assert header["harness"] == "planner-app"
    assert header["name"] == "weather reporter"
    assert header["parentSessionId"] == parent.id
    assert header["parentToolCallId"] == "call_ask01"
    assert messages_of(child_path) == [
        {"role": "system", "content": INNER_SYSTEM},
        {"role": "user", "content": "Paris"},
        {"role": "assistant", "content": "", "toolCalls": [call("call_weather01", "get_weather", WEATHER_ARGS)], "model": MODEL},
        result("call_weather01", WEATHER_RESULT),
        {"role": "assistant", "content": INNER_ANSWER, "model": MODEL},
    ]


async def test_an_agent_tool_that_stops_ends_its_child_session_with_the_reason(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, messages_of: Any
) -> None:
    """The inner run hits its ``max_turns``: the child session answers its open
    call and ends saying why; the parent's call gets the SDK's error text as
    its result, unchanged, and the planner goes on."""
    outer, _ = agent_tool_setup(fake_api, inner_max_turns=1)
    fake_api.script(
        ScriptedReply(text=None, tool_calls=(ASK,)),
        ScriptedReply(text=None, tool_calls=(DEFAULT_TOOL_CALLS[0],)),
        ScriptedReply(text=OUTER_ANSWER),
    )
    path = new_trace(tmp_path)
    async with Session(path) as parent:
        await Runner.run(outer, USER)
    parent_messages = messages_of(path)
    sent_back = fake_api.requests[-1].body["input"]
    error_output = next(i["output"] for i in sent_back if i.get("type") == "function_call_output")
    assert error_output == "An error occurred while running the tool. Please try again."  # the SDK's default
    assert parent_messages == parent_trace(error_output)
    [child_path] = children_of(path)
    assert header_of(child_path)["parentSessionId"] == parent.id
    assert header_of(child_path)["parentToolCallId"] == "call_ask01"
    assert messages_of(child_path) == [
        {"role": "system", "content": INNER_SYSTEM},
        {"role": "user", "content": "Paris"},
        {"role": "assistant", "content": "", "toolCalls": [call("call_weather01", "get_weather", WEATHER_ARGS)], "model": MODEL},
        result("call_weather01", WEATHER_RESULT),
        {"role": "system", "content": "The agent run stopped: Max turns (1) exceeded"},
    ]


async def test_a_run_inside_a_plain_function_tool_without_its_context_stays_in_the_session(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, messages_of: Any
) -> None:
    """Only a run given the tool's ``ToolContext`` (what ``as_tool`` does) is a
    sub-agent run: one started without it records into the current session, as before."""
    inner = Agent(name="weather reporter", instructions=INNER_SYSTEM, tools=[], model=responses_model(fake_api))

    @function_tool
    async def ask_weather(input: str) -> str:
        """Ask the weather agent."""
        return str((await Runner.run(inner, input)).final_output)

    outer = Agent(name="planner", instructions=SYSTEM, tools=[ask_weather], model=responses_model(fake_api))
    fake_api.script(
        ScriptedReply(text=None, tool_calls=(ASK,)),
        ScriptedReply(text=INNER_ANSWER),
        ScriptedReply(text=OUTER_ANSWER),
    )
    path = new_trace(tmp_path)
    async with Session(path):
        await Runner.run(outer, USER)
    assert children_of(path) == []
    messages = messages_of(path)
    assert {"role": "user", "content": "Paris"} in messages
    assert messages[-1] == {"role": "assistant", "content": OUTER_ANSWER, "model": MODEL}


@pytest.mark.parametrize("usage", [True, False])
async def test_an_agent_tools_child_session_keeps_its_parents_settings(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, usage: bool
) -> None:
    """The child records under the parent's settings: ``usage=False`` on the
    parent leaves token usage out of the child too (and in when it is on)."""
    outer, _ = agent_tool_setup(fake_api)
    fake_api.script(
        ScriptedReply(text=None, tool_calls=(ASK,)),
        ScriptedReply(text=None, tool_calls=(DEFAULT_TOOL_CALLS[0],)),
        ScriptedReply(text=INNER_ANSWER),
        ScriptedReply(text=OUTER_ANSWER),
    )
    path = new_trace(tmp_path)
    async with Session(path, usage=usage):
        await Runner.run(outer, USER)
    [child_path] = children_of(path)
    for trace_path in (path, child_path):
        lines = [json.loads(line) for line in trace_path.read_text(encoding="utf-8").splitlines()[1:]]
        with_usage = [entry["message"] for entry in lines if "usage" in entry["message"]]
        assert bool(with_usage) == usage, trace_path


@pytest.mark.parametrize("model", ["responses", "chat"])
async def test_parallel_agent_tools_each_record_their_own_linked_child(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, messages_of: Any, model: str
) -> None:
    """Two agents run as tools in one turn (concurrently, in the SDK's tool
    tasks): each run is its own child session linked to its own call, holding
    only its own conversation; the parent holds both calls and both outputs."""
    make = responses_model if model == "responses" else chat_model
    reporters = [
        Agent(name=f"reporter {n}", instructions=SYSTEM, tools=[get_weather, get_time], model=make(fake_api))
        for n in ("a", "b")
    ]
    asks = [r.as_tool(tool_name=f"ask_{n}", tool_description="Ask a reporter.") for r, n in zip(reporters, "ab")]
    outer = Agent(name="planner", instructions=SYSTEM, tools=asks, model=make(fake_api))
    calls = (
        ScriptedToolCall("ask_a", {"input": "Paris, please"}, "ask01"),
        ScriptedToolCall("ask_b", {"input": "Paris, now"}, "ask02"),
    )
    fake_api.script(ScriptedReply(text=None, tool_calls=calls))  # then the fake server's default planning
    path = new_trace(tmp_path)
    async with Session(path) as parent:
        run = await Runner.run(outer, USER)
    inner_answer = fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert messages_of(path) == [
        *INPUTS,
        {"role": "assistant", "content": "", "toolCalls": [call(c.call_id, c.name, c.arguments_json) for c in calls], "model": MODEL},
        result("call_ask01", inner_answer),
        result("call_ask02", inner_answer),
        answer(fake_api, inner_answer, inner_answer),
    ]
    assert run.final_output == fake_api.answer_for([inner_answer, inner_answer])
    children = {header_of(p)["parentToolCallId"]: p for p in children_of(path)}
    assert sorted(children) == ["call_ask01", "call_ask02"]
    for call_id, name, prompt in (("call_ask01", "reporter a", "Paris, please"), ("call_ask02", "reporter b", "Paris, now")):
        header = header_of(children[call_id])
        assert header["parentSessionId"] == parent.id and header["name"] == name
        assert messages_of(children[call_id]) == [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": prompt},
            *full_run(fake_api)[2:],
        ]


async def test_runner_run_streamed_records_the_usage_the_sdk_counts(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path
) -> None:
    """A streamed run reads its replies through ``with_streaming_response``: each
    recorded reply carries its token usage, and the session's totals equal the
    run's own ``context_wrapper.usage`` (the raw path used to record none)."""
    path = new_trace(tmp_path)
    async with Session(path) as s:
        run = Runner.run_streamed(weather_agent(fake_api), USER)
        async for _ in run.stream_events():
            pass
        totals = s.stats()["usage"]
    sdk = run.context_wrapper.usage
    assert sdk.requests == 2 and sdk.total_tokens > 0
    prompt = totals.get("input", 0) + totals.get("cacheRead", 0) + totals.get("cacheWrite", 0)
    assert (prompt, totals.get("output"), totals.get("totalTokens")) == (
        sdk.input_tokens,
        sdk.output_tokens,
        sdk.total_tokens,
    )


@pytest.mark.parametrize("model", ["responses", "chat"])
async def test_run_streamed_cancelled_mid_turn_answers_its_calls(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, model: str
) -> None:
    """``cancel()`` (immediate) while the reply asking for tools streams: the
    calls that reply holds are answered with the cancellation and the trace
    ends saying the run was cancelled (they used to stay unanswered)."""
    path = new_trace(tmp_path)
    agent = weather_agent(fake_api, model=chat_model(fake_api) if model == "chat" else None)
    async with Session(path):
        run = Runner.run_streamed(agent, USER)
        async for event in run.stream_events():
            if event.type == "raw_response_event" and "arguments" in type(event.data).__name__.lower():
                run.cancel()
            elif event.type == "raw_response_event" and model == "chat":
                choices = getattr(event.data, "choices", None) or []
                if choices and choices[0].delta.tool_calls:
                    run.cancel()
    messages = valid_messages(path)  # no error
    assert_paired(messages)
    calls = [c["id"] for m in messages for c in m.get("toolCalls", [])]
    assert calls and calls[0] == "call_weather01"
    results = {m["toolCallId"]: m["content"] for m in messages if m["role"] == "tool"}
    assert set(results) == set(calls)
    assert all("cancelled" in text for text in results.values())
    assert messages[-1]["role"] == "system" and "cancelled" in messages[-1]["content"]
