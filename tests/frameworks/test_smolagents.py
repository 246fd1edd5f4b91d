"""smolagents (``ToolCallingAgent``, ``CodeAgent``) with ``ststrace.instrument()``
against the local fake server: the trace holds what the agent really did.

smolagents sends its own tool calls back to the model as assistant text
("Calling tools: ...") and tool output as a user "Observation:" turn; the
fake server is scripted (``FakeAPI.script``) because it cannot tell from such
a request that the tools have run. Every test asserts the exact message
sequence, ids included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

smolagents = pytest.importorskip("smolagents", reason="smolagents is not installed (pip install 'ststrace[test]')")

# Imported now so instrument() patches it at once (LiteLLMModel imports it lazily).
litellm = pytest.importorskip("litellm")

from smolagents import CodeAgent, LiteLLMModel, OpenAIServerModel, ToolCallingAgent  # noqa: E402
from smolagents import tool  # noqa: E402
from smolagents.monitoring import LogLevel  # noqa: E402

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedReply, ScriptedToolCall  # noqa: E402
from ststrace.integrations import smolagents as integration  # noqa: E402
from ststrace._instrument import instrumented as patched_now  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

Messages = Callable[[Path], list[dict[str, Any]]]


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": arguments}}


# litellm's own pydantic models warn about ReadOnly TypedDict items on first use.
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")

MODEL = "fake-model"
TASK = "What's the weather in Paris, and the time there?"
WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"}, "weather01")
TIME = ScriptedToolCall("get_time", {"tz": "Europe/Paris"}, "time02")
ANSWER = "Sunny, 21 C at 15:00"
FINAL = ScriptedToolCall("final_answer", {"answer": ANSWER}, "final03")
REASONING = "I should call get_weather and get_time."
PREAMBLE = "Let me look that up."

TOOLS_REPLY = ScriptedReply(text=PREAMBLE, tool_calls=(WEATHER, TIME), reasoning=REASONING)
FINAL_REPLY = ScriptedReply(text=None, tool_calls=(FINAL,))


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city's name
    """
    return "Sunny, 21 C"


@tool
def get_time(tz: str) -> str:
    """The time in a time zone.

    Args:
        tz: an IANA time zone
    """
    return "15:00"


@pytest.fixture
def instrumented_all() -> Iterator[None]:
    """``ststrace.instrument()`` with no names: smolagents, openai, litellm, ... all patched."""
    with instrumented():
        assert {"openai", "litellm", "smolagents"} <= set(patched_now())
        yield


def openai_model(api: FakeAPI) -> Any:
    return OpenAIServerModel(
        model_id=MODEL, api_base=api.openai_base_url, api_key="test", client_kwargs={"max_retries": 0, "timeout": 5}
    )


def tool_calling_agent(api: FakeAPI, **kwargs: Any) -> Any:
    options: dict[str, Any] = {"verbosity_level": LogLevel.OFF, "max_steps": 4}
    return ToolCallingAgent(tools=[get_weather, get_time], model=openai_model(api), **{**options, **kwargs})


def system_of(agent: Any) -> dict[str, Any]:
    return {"role": "system", "content": agent.memory.system_prompt.system_prompt}


def tool_calling_trace(agent: Any, reasoning: bool = True) -> list[dict[str, Any]]:
    """The exact trace of TOOLS_REPLY then FINAL_REPLY."""
    first: dict[str, Any] = {"role": "assistant", "content": PREAMBLE}
    if reasoning:
        first["reasoningContent"] = REASONING
    first["toolCalls"] = [
        call("call_weather01", "get_weather", '{"city":"Paris"}'),
        call("call_time02", "get_time", '{"tz":"Europe/Paris"}'),
    ]
    first["model"] = MODEL
    return [
        system_of(agent),
        {"role": "user", "content": TASK},
        first,
        {"role": "tool", "content": "Sunny, 21 C", "toolCallId": "call_weather01"},
        {"role": "tool", "content": "15:00", "toolCallId": "call_time02"},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [call("call_final03", "final_answer", FINAL.arguments_json)],
            "model": MODEL,
        },
        {"role": "tool", "content": ANSWER, "toolCallId": "call_final03"},
        {"role": "assistant", "content": ANSWER, "model": MODEL},
    ]


def by_call_order(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parallel tool results in the order of their calls (they finish in any order)."""
    out = list(messages)
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and out[j]["role"] == "tool":
            j += 1
        if j - i > 1:
            order = [c["id"] for m in out[:i] for c in m.get("toolCalls", ())]
            out[i:j] = sorted(out[i:j], key=lambda m: order.index(m["toolCallId"]))
        i = j + 1 if j == i else j
    return out


def observation_turns(api: FakeAPI) -> list[str]:
    """The user turns smolagents sent back to the model holding tool output."""
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for r in api.requests_to("chat")
        for m in r.body["messages"]
        if m["role"] == "user" and "Observation:" in json.dumps(m["content"])
    ]


# --------------------------------------------------------------------------- ToolCallingAgent


def test_tool_calling_agent_records_calls_results_and_final_answer(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """Parallel calls each answered by id, final_answer answered, the answer last;
    no "Calling tools" text and no "Observation" user turn in the trace."""
    fake_api.script(TOOLS_REPLY, FINAL_REPLY)
    agent = tool_calling_agent(fake_api)
    with ststrace.Session(trace):
        assert agent.run(TASK) == ANSWER
    assert observation_turns(fake_api), "smolagents sent no Observation turn: the test proves nothing"
    assert by_call_order(messages_of(trace)) == tool_calling_trace(agent)


@pytest.mark.parametrize("how", ["stream_outputs", "run_stream", "both"])
def test_tool_calling_agent_streamed(messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None, how: str) -> None:
    """``stream_outputs=True`` (the model streams) and ``run(stream=True)`` (the
    caller iterates the steps) record the same trace (smolagents' stream
    deltas carry no reasoning, so there is none)."""
    fake_api.script(TOOLS_REPLY, FINAL_REPLY)
    agent = tool_calling_agent(fake_api, stream_outputs=how != "run_stream")
    with ststrace.Session(trace):
        if how == "stream_outputs":
            assert agent.run(TASK) == ANSWER
        else:
            steps = list(agent.run(TASK, stream=True))
            assert steps[-1].output == ANSWER
    assert all(r.stream == (how != "run_stream") for r in fake_api.requests_to("chat"))
    assert by_call_order(messages_of(trace)) == tool_calling_trace(agent, reasoning=how == "run_stream")


def test_litellm_model_records_the_same_trace(messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None) -> None:
    """smolagents' LiteLLMModel goes through litellm and its openai client, all
    instrumented: still each reply once, with its reasoning."""
    fake_api.script(TOOLS_REPLY, FINAL_REPLY)
    model = LiteLLMModel(model_id=f"openai/{MODEL}", api_base=fake_api.openai_base_url, api_key="test", timeout=5)
    agent = ToolCallingAgent(tools=[get_weather, get_time], model=model, verbosity_level=LogLevel.OFF, max_steps=4)
    with ststrace.Session(trace):
        assert agent.run(TASK) == ANSWER
    assert by_call_order(messages_of(trace)) == tool_calling_trace(agent)


@pytest.mark.filterwarnings("ignore:Function 'get_weather' has decorators other than @tool")
def test_ststrace_tool_on_the_tool_function_records_each_result_once(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """With ``@ststrace.tool`` under ``@smolagents.tool`` the decorated function
    answers its own call: one call and one result per tool use, the provider's id."""

    @tool
    @ststrace.tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city's name
        """
        # The trailing newline tells the two recorders apart: @tool records the
        # return value as it is, smolagents' observation is stripped.
        return "Sunny, 21 C (from @tool)\n"

    fake_api.script(TOOLS_REPLY, FINAL_REPLY)
    agent = ToolCallingAgent(
        tools=[get_weather, get_time], model=openai_model(fake_api), verbosity_level=LogLevel.OFF, max_steps=4
    )
    with ststrace.Session(trace):
        assert agent.run(TASK) == ANSWER
    expected = tool_calling_trace(agent)
    expected[3] = {"role": "tool", "content": "Sunny, 21 C (from @tool)\n", "toolCallId": "call_weather01"}
    assert by_call_order(messages_of(trace)) == expected


def test_a_failing_tool_is_answered_with_its_error(messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None) -> None:
    """A tool that raises: its call is answered with the error smolagents
    reports, and the run goes on to the final answer."""

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city's name
        """
        raise ValueError("weather service down")

    fake_api.script(ScriptedReply(text=None, tool_calls=(WEATHER,)), FINAL_REPLY)
    agent = ToolCallingAgent(tools=[get_weather], model=openai_model(fake_api), verbosity_level=LogLevel.OFF)
    with ststrace.Session(trace):
        assert agent.run(TASK) == ANSWER
    messages = messages_of(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    error = messages[3]
    assert error["toolCallId"] == "call_weather01"
    assert error["content"].startswith("Error: AgentToolExecutionError: Error executing tool 'get_weather'")
    assert "weather service down" in error["content"]
    assert messages[-1] == {"role": "assistant", "content": ANSWER, "model": MODEL}


def test_a_reply_without_tool_calls_is_recorded_with_the_error_smolagents_sends(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """A step whose reply holds no tool call: the reply is recorded as it came,
    then the error smolagents gives the model (a user turn: there is no call
    to answer)."""
    fake_api.script(ScriptedReply(text="I am not sure what to do."), FINAL_REPLY)
    agent = tool_calling_agent(fake_api)
    with ststrace.Session(trace):
        assert agent.run(TASK) == ANSWER
    messages = messages_of(trace)
    assert messages[2] == {"role": "assistant", "content": "I am not sure what to do.", "model": MODEL}
    assert messages[3]["role"] == "user" and messages[3]["content"].startswith("Error:\n")
    assert messages[4]["toolCalls"] == [call("call_final03", "final_answer", FINAL.arguments_json)]
    assert len(messages) == 7


def test_a_second_run_records_its_task_but_not_the_system_prompt_again(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """Two runs of one agent in one session: the system prompt once, each task once."""
    again = ScriptedToolCall("final_answer", {"answer": "Rain"}, "final06")
    fake_api.script(FINAL_REPLY, ScriptedReply(text=None, tool_calls=(again,)))
    agent = tool_calling_agent(fake_api)
    with ststrace.Session(trace):
        agent.run(TASK)
        agent.run("And tomorrow?")
    messages = messages_of(trace)
    assert [(m["role"], m["content"]) for m in messages if m["role"] in ("system", "user")] == [
        ("system", agent.memory.system_prompt.system_prompt),
        ("user", TASK),
        ("user", "And tomorrow?"),
    ]
    assert [m["role"] for m in messages].count("assistant") == 4
    assert messages[-1] == {"role": "assistant", "content": "Rain", "model": MODEL}


def test_code_action_ids_stay_unique_across_runs_in_one_session(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """smolagents numbers code actions per run ("call_1", ...): a second run in
    the same session gets ids of its own, so the trace still validates."""
    fake_api.script(*code_replies(), *code_replies())
    agent = CodeAgent(tools=[get_weather], model=openai_model(fake_api), verbosity_level=LogLevel.OFF)
    with ststrace.Session(trace):
        agent.run(TASK)
        agent.run(TASK)
    ids = [c["id"] for m in messages_of(trace) for c in m.get("toolCalls", ())]
    assert ids[:2] == ["call_1", "call_2"]
    assert len(ids) == 4 and len(set(ids)) == 4


def test_max_steps_ends_with_the_answer_smolagents_asks_for(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """When ``max_steps`` runs out smolagents asks the model for an answer in
    one more call: that answer is the last assistant message, every call answered."""
    fake_api.script(ScriptedReply(text=None, tool_calls=(WEATHER,)), ScriptedReply(text="Probably sunny."))
    agent = tool_calling_agent(fake_api, max_steps=1)
    with ststrace.Session(trace):
        assert agent.run(TASK) == "Probably sunny."
    messages = messages_of(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[-1] == {"role": "assistant", "content": "Probably sunny.", "model": MODEL}


def test_planning_steps_are_assistant_messages(messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None) -> None:
    """``planning_interval=1``: the plan is an assistant message before the step it plans."""
    fake_api.script(ScriptedReply(text="1. Call get_weather.\n2. Answer."), FINAL_REPLY)
    agent = tool_calling_agent(fake_api, planning_interval=5)
    with ststrace.Session(trace):
        assert agent.run(TASK) == ANSWER
    messages = messages_of(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "assistant", "tool", "assistant"]
    plan = messages[2]
    assert plan["content"] == agent.memory.steps[1].plan
    assert "1. Call get_weather.\n2. Answer." in plan["content"] and "toolCalls" not in plan


def test_outside_a_session_nothing_is_recorded_and_the_agent_works(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path
) -> None:
    """No session: the patched agent runs as usual."""
    fake_api.script(TOOLS_REPLY, FINAL_REPLY)
    assert tool_calling_agent(fake_api).run(TASK) == ANSWER
    assert not list(tmp_path.rglob("*.jsonl"))


def test_instrument_smolagents_by_name(messages_of: Messages, fake_api: FakeAPI, trace: Path) -> None:
    """``instrument("smolagents")`` alone: the run is recorded from smolagents'
    objects, the openai client being left alone; uninstrument restores it."""
    with instrumented("smolagents"):
        assert patched_now() == ["smolagents"]
        fake_api.script(TOOLS_REPLY, FINAL_REPLY)
        agent = tool_calling_agent(fake_api)
        with ststrace.Session(trace):
            assert agent.run(TASK) == ANSWER
    assert by_call_order(messages_of(trace)) == tool_calling_trace(agent)


def test_without_the_smolagents_integration_the_client_level_trace_is_wrong(
    fake_api: FakeAPI, trace: Path
) -> None:
    """The bug this integration fixes, shown with only ``openai`` instrumented:
    an Observation user turn and a final_answer call left unanswered."""
    with instrumented("openai"):
        fake_api.script(TOOLS_REPLY, FINAL_REPLY)
        agent = tool_calling_agent(fake_api)
        with ststrace.Session(trace):
            agent.run(TASK)
    messages = [json.loads(line)["message"] for line in trace.read_text().splitlines()[1:]]
    assert any(m["role"] == "user" and m["content"].startswith("Observation:") for m in messages)
    assert not any(m["role"] == "tool" for m in messages)


# --------------------------------------------------------------------------- CodeAgent

CODE_1 = 'weather = get_weather(city="Paris")\nprint(weather)'
CODE_2 = "final_answer(weather)"


def code_replies() -> tuple[ScriptedReply, ScriptedReply]:
    # Like the API, the reply stops before the "</code>" stop sequence; smolagents adds it back.
    return (
        ScriptedReply(text=f"Thought: I will look it up.\n<code>\n{CODE_1}\n", reasoning="Use the tool."),
        ScriptedReply(text=f"Thought: I have it.\n<code>\n{CODE_2}\n"),
    )


def code_trace(agent: Any, reasoning: bool = True) -> list[dict[str, Any]]:
    first: dict[str, Any] = {"role": "assistant", "content": f"Thought: I will look it up.\n<code>\n{CODE_1}\n</code>"}
    if reasoning:
        first["reasoningContent"] = "Use the tool."
    first["toolCalls"] = [call("call_1", "python_interpreter", json.dumps({"code": CODE_1}, separators=(",", ":")))]
    first["model"] = MODEL
    return [
        system_of(agent),
        {"role": "user", "content": TASK},
        first,
        {
            "role": "tool",
            "content": "Execution logs:\nSunny, 21 C\nLast output from code snippet:\nNone",
            "toolCallId": "call_1",
        },
        {
            "role": "assistant",
            "content": f"Thought: I have it.\n<code>\n{CODE_2}\n</code>",
            "toolCalls": [call("call_2", "python_interpreter", json.dumps({"code": CODE_2}, separators=(",", ":")))],
            "model": MODEL,
        },
        {
            "role": "tool",
            "content": "Execution logs:\nLast output from code snippet:\nSunny, 21 C",
            "toolCallId": "call_2",
        },
        {"role": "assistant", "content": "Sunny, 21 C", "model": MODEL},
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_code_agent_records_each_code_action_as_a_python_call(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None, stream: bool
) -> None:
    """Each code action is a ``python_interpreter`` call with the code as its
    argument, answered by its execution logs and output; streamed or not."""
    fake_api.script(*code_replies())
    agent = CodeAgent(
        tools=[get_weather], model=openai_model(fake_api), verbosity_level=LogLevel.OFF, stream_outputs=stream
    )
    with ststrace.Session(trace):
        assert agent.run(TASK) == "Sunny, 21 C"
    assert observation_turns(fake_api)
    assert messages_of(trace) == code_trace(agent, reasoning=not stream)


def test_code_agent_execution_error_answers_the_call(messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None) -> None:
    """Code that fails: its call is answered with the logs so far and the error."""
    fake_api.script(
        ScriptedReply(text='<code>\nprint("before")\n1 / 0\n'),
        ScriptedReply(text='<code>\nfinal_answer("done")\n'),
    )
    agent = CodeAgent(tools=[], model=openai_model(fake_api), verbosity_level=LogLevel.OFF)
    with ststrace.Session(trace):
        assert agent.run(TASK) == "done"
    messages = messages_of(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    failed = messages[3]
    assert failed["toolCallId"] == "call_1"
    assert failed["content"].startswith("Execution logs:\nbefore\n\nError: AgentExecutionError: ")
    assert "division by zero" in failed["content"]


# --------------------------------------------------------------------------- managed agents


def managed_setup(api: FakeAPI) -> tuple[Any, Any]:
    worker = ToolCallingAgent(
        tools=[get_weather],
        model=openai_model(api),
        name="weather_agent",
        description="Finds the weather.",
        verbosity_level=LogLevel.OFF,
    )
    manager = ToolCallingAgent(
        tools=[], model=openai_model(api), managed_agents=[worker], verbosity_level=LogLevel.OFF
    )
    delegate = ScriptedToolCall("weather_agent", {"task": "Weather in Paris?"}, "delegate04")
    api.script(
        ScriptedReply(text=None, tool_calls=(delegate,)),  # manager
        ScriptedReply(text=None, tool_calls=(WEATHER,)),  # worker
        ScriptedReply(text=None, tool_calls=(ScriptedToolCall("final_answer", {"answer": "Sunny"}, "wfinal05"),)),
        FINAL_REPLY,  # manager
    )
    return manager, worker


def test_a_managed_agent_run_is_not_mixed_into_the_managers_session(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """The manager's call to its managed agent is answered by the agent's report;
    the managed agent's own steps do not appear in the manager's trace."""
    manager, worker = managed_setup(fake_api)
    with ststrace.Session(trace):
        assert manager.run(TASK) == ANSWER
    messages = messages_of(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[2]["toolCalls"] == [call("call_delegate04", "weather_agent", '{"task":"Weather in Paris?"}')]
    report = messages[3]
    assert report["toolCallId"] == "call_delegate04" and "Sunny" in report["content"]
    assert not any(c["id"] == "call_weather01" for m in messages for c in m.get("toolCalls", ()))


def test_the_child_session_hook_records_a_managed_agents_run(
    messages_of: Messages, fake_api: FakeAPI, tmp_path: Path, trace: Path, instrumented_all: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``child_session`` returning a session: the managed agent's run records there."""
    child_path = tmp_path / "child.jsonl"
    seen: list[tuple[Any, Any, Any]] = []
    child_sessions: list[ststrace.Session] = []

    def child_session(parent: Any, agent: Any, task: Any) -> Any:
        seen.append((parent, agent, task))
        child_sessions.append(ststrace.Session(child_path))
        return child_sessions[-1]

    monkeypatch.setattr(integration, "child_session", child_session)
    manager, worker = managed_setup(fake_api)
    with ststrace.Session(trace) as parent:
        assert manager.run(TASK) == ANSWER
    for child_session_ in child_sessions:
        child_session_.close()  # the hook's caller closes what it opened
    assert len(seen) == 1 and seen[0][0] is parent and seen[0][1] is worker
    # Opened by ststrace inside the manager's call: linked like a default child.
    header = json.loads(child_path.read_text(encoding="utf-8").splitlines()[0])
    assert header["parentSessionId"] == parent.id and header["parentToolCallId"] == "call_delegate04"
    seen_task = seen[0][2]
    assert "Weather in Paris?" in seen_task
    child = messages_of(child_path)
    assert [m["role"] for m in child] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert child[1] == {"role": "user", "content": seen_task}
    assert child[2]["toolCalls"] == [call("call_weather01", "get_weather", '{"city":"Paris"}')]
    assert child[-1] == {"role": "assistant", "content": "Sunny", "model": MODEL}
    assert len(messages_of(trace)) == 7


def header_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


def children_of(path: Path) -> list[Path]:
    """The trace files beside *path*: its sub-agents' sessions."""
    return sorted(p for p in path.parent.glob("*.jsonl") if p != path)


def worker_trace(worker: Any, task: str, final_id: str = "call_wfinal05", answer: str = "Sunny") -> list[dict[str, Any]]:
    return [
        system_of(worker),
        {"role": "user", "content": task},
        {"role": "assistant", "content": "", "toolCalls": [call("call_weather01", "get_weather", '{"city":"Paris"}')], "model": MODEL},
        {"role": "tool", "content": "Sunny, 21 C", "toolCallId": "call_weather01"},
        {"role": "assistant", "content": "", "toolCalls": [call(final_id, "final_answer", json.dumps({"answer": answer}, separators=(",", ":")))], "model": MODEL},
        {"role": "tool", "content": answer, "toolCallId": final_id},
        {"role": "assistant", "content": answer, "model": MODEL},
    ]


def test_a_managed_agents_run_is_a_linked_child_session_by_default(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """No hook set: the managed agent's run records into a child session beside
    the manager's file, named after the agent, linked to the manager's call
    for it; the manager's trace keeps the call and the agent's report."""
    manager, worker = managed_setup(fake_api)
    with ststrace.Session(trace, harness="manager-app") as parent:
        assert manager.run(TASK) == ANSWER
    report = worker.prompt_templates["managed_agent"]["report"].replace("{{name}}", "weather_agent").replace(
        "{{final_answer}}", "Sunny"
    )
    assert messages_of(trace) == [
        system_of(manager),
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": "", "toolCalls": [call("call_delegate04", "weather_agent", '{"task":"Weather in Paris?"}')], "model": MODEL},
        {"role": "tool", "content": report.strip(), "toolCallId": "call_delegate04"},
        {"role": "assistant", "content": "", "toolCalls": [call("call_final03", "final_answer", FINAL.arguments_json)], "model": MODEL},
        {"role": "tool", "content": ANSWER, "toolCallId": "call_final03"},
        {"role": "assistant", "content": ANSWER, "model": MODEL},
    ]
    [child_path] = children_of(trace)
    header = header_of(child_path)
    assert child_path.name == f"trace.{header['id']}.jsonl"
    assert header["harness"] == "manager-app" and header["name"] == "weather_agent"
    assert header["parentSessionId"] == parent.id and header["parentToolCallId"] == "call_delegate04"
    child = messages_of(child_path)
    assert "Weather in Paris?" in child[1]["content"]
    assert child == worker_trace(worker, child[1]["content"])
    assert "parentSessionId" not in header_of(trace)


def test_parallel_managed_agent_calls_each_link_to_their_own_call(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """Two managed-agent calls in one step run on smolagents' tool threads; each
    run is its own child session, linked to the call that ran it."""
    worker = ToolCallingAgent(
        tools=[get_weather], model=openai_model(fake_api), name="weather_agent", description="Finds the weather.",
        verbosity_level=LogLevel.OFF,
    )
    manager = ToolCallingAgent(
        tools=[], model=openai_model(fake_api), managed_agents=[worker], verbosity_level=LogLevel.OFF,
        max_tool_threads=1,  # the thread pool runs them in order, so the script is deterministic
    )
    first = ScriptedToolCall("weather_agent", {"task": "Weather in Paris?"}, "delegate04")
    second = ScriptedToolCall("weather_agent", {"task": "Weather in Lyon?"}, "delegate06")
    fake_api.script(
        ScriptedReply(text=None, tool_calls=(first, second)),
        ScriptedReply(text=None, tool_calls=(WEATHER,)),
        ScriptedReply(text=None, tool_calls=(ScriptedToolCall("final_answer", {"answer": "Sunny"}, "wfinal05"),)),
        ScriptedReply(text=None, tool_calls=(WEATHER,)),
        ScriptedReply(text=None, tool_calls=(ScriptedToolCall("final_answer", {"answer": "Cloudy"}, "wfinal07"),)),
        FINAL_REPLY,
    )
    with ststrace.Session(trace) as parent:
        assert manager.run(TASK) == ANSWER
    manager_messages = messages_of(trace)
    reports = {m["toolCallId"]: m["content"] for m in manager_messages if m["role"] == "tool"}
    assert "Sunny" in reports["call_delegate04"] and "Cloudy" in reports["call_delegate06"]
    children = {header_of(p)["parentToolCallId"]: p for p in children_of(trace)}
    assert sorted(children) == ["call_delegate04", "call_delegate06"]
    for call_id, (city, answer, final_id) in {
        "call_delegate04": ("Paris", "Sunny", "call_wfinal05"),
        "call_delegate06": ("Lyon", "Cloudy", "call_wfinal07"),
    }.items():
        assert header_of(children[call_id])["parentSessionId"] == parent.id
        child = messages_of(children[call_id])
        assert f"Weather in {city}?" in child[1]["content"]
        assert child == worker_trace(worker, child[1]["content"], final_id, answer)


def test_a_managed_agent_called_from_code_agent_code_links_to_the_code_action(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """A ``CodeAgent`` manager calls its managed agent from the code it writes,
    which smolagents runs in an executor thread: the agent's run is still a
    child session, linked to the code action's ``python_interpreter`` call."""
    worker = ToolCallingAgent(
        tools=[get_weather], model=openai_model(fake_api), name="weather_agent", description="Finds the weather.",
        verbosity_level=LogLevel.OFF,
    )
    manager = CodeAgent(tools=[], model=openai_model(fake_api), managed_agents=[worker], verbosity_level=LogLevel.OFF)
    code = 'report = weather_agent(task="Weather in Paris?")\nfinal_answer("Sunny")'
    fake_api.script(
        ScriptedReply(text=f"<code>\n{code}\n</code>"),
        ScriptedReply(text=None, tool_calls=(WEATHER,)),
        ScriptedReply(text=None, tool_calls=(ScriptedToolCall("final_answer", {"answer": "Sunny"}, "wfinal05"),)),
    )
    with ststrace.Session(trace) as parent:
        assert manager.run(TASK) == "Sunny"
    manager_messages = messages_of(trace)
    assert [m["role"] for m in manager_messages] == ["system", "user", "assistant", "tool", "assistant"]
    [action] = manager_messages[2]["toolCalls"]
    assert action["id"] == "call_1" and action["function"]["name"] == "python_interpreter"
    assert json.loads(action["function"]["arguments"]) == {"code": code}
    [child_path] = children_of(trace)
    header = header_of(child_path)
    assert header["parentSessionId"] == parent.id and header["parentToolCallId"] == "call_1"
    assert header["name"] == "weather_agent"
    child = messages_of(child_path)
    assert child == worker_trace(worker, child[1]["content"])


def test_a_managed_agent_whose_run_fails_leaves_a_closed_linked_child(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """The managed agent's model cannot be reached: its child session holds its
    prompt, is closed and validates; the manager's call is answered with the
    error smolagents reports to the manager, which goes on."""
    dead = OpenAIServerModel(
        model_id=MODEL, api_base="http://127.0.0.1:9/v1", api_key="test", client_kwargs={"max_retries": 0, "timeout": 5}
    )
    worker = ToolCallingAgent(
        tools=[get_weather], model=dead, name="weather_agent", description="Finds the weather.", verbosity_level=LogLevel.OFF
    )
    manager = ToolCallingAgent(tools=[], model=openai_model(fake_api), managed_agents=[worker], verbosity_level=LogLevel.OFF)
    delegate = ScriptedToolCall("weather_agent", {"task": "Weather in Paris?"}, "delegate04")
    fake_api.script(ScriptedReply(text=None, tool_calls=(delegate,)), FINAL_REPLY)
    with ststrace.Session(trace) as parent:
        assert manager.run(TASK) == ANSWER
    manager_messages = messages_of(trace)
    failed = next(m for m in manager_messages if m.get("toolCallId") == "call_delegate04")
    assert "weather_agent" in failed["content"] and "Error" in failed["content"]
    [child_path] = children_of(trace)
    header = header_of(child_path)
    assert header["parentSessionId"] == parent.id and header["parentToolCallId"] == "call_delegate04"
    child = messages_of(child_path)
    assert [m["role"] for m in child] == ["system", "user"]
    assert "Weather in Paris?" in child[1]["content"]


def test_the_child_session_hook_returning_none_mutes_the_managed_run(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``child_session`` replaced by one returning ``None``: no child file, and
    the manager's trace is the same (the run records nowhere)."""
    monkeypatch.setattr(integration, "child_session", lambda parent, agent, task: None)
    manager, _ = managed_setup(fake_api)
    with ststrace.Session(trace):
        assert manager.run(TASK) == ANSWER
    assert children_of(trace) == []
    assert [m["role"] for m in messages_of(trace)] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]


# --------------------------------------------------------------------------- the user's program is unchanged


def test_a_model_error_reaches_the_caller_unchanged(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """An API error ends the run with smolagents' own exception, as without
    ststrace; the trace holds the prompt and nothing made up."""
    from smolagents.utils import AgentGenerationError

    fake_api.fail_next(400, "scripted failure")
    agent = tool_calling_agent(fake_api)
    with ststrace.Session(trace):
        with pytest.raises(AgentGenerationError, match="scripted failure") as caught:
            agent.run(TASK)
    assert isinstance(caught.value.__cause__, __import__("openai").BadRequestError)
    assert messages_of(trace) == [system_of(agent), {"role": "user", "content": TASK}]


def test_a_step_stream_closed_early_answers_the_calls_it_left(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """``run(stream=True)`` abandoned after the model asked for tools: the calls
    that never ran are answered as cancelled, and closing behaves as without
    ststrace (smolagents' generator yields from a ``finally`` and so raises)."""
    fake_api.script(TOOLS_REPLY, FINAL_REPLY)
    agent = tool_calling_agent(fake_api)
    with ststrace.Session(trace):
        steps = agent.run(TASK, stream=True)
        for item in steps:
            if type(item).__name__ == "ToolCall":
                break
        with pytest.raises(RuntimeError, match="generator ignored GeneratorExit"):
            steps.close()
        with pytest.raises(StopIteration):
            next(steps)
    messages = messages_of(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert {m["toolCallId"]: m["content"] for m in messages[3:]} == {
        "call_weather01": "Error: the call was cancelled (GeneratorExit)",
        "call_time02": "Error: the call was cancelled (GeneratorExit)",
    }


def test_inference_client_model_records_the_same_trace(
    messages_of: Messages,
    no_external_network: list[str],
    trace: Path,
    instrumented_all: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """smolagents' InferenceClientModel (huggingface_hub, also instrumented):
    each reply once, with the reasoning huggingface_hub reads (``reasoning``)."""
    import huggingface_hub.constants
    from smolagents import InferenceClientModel

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
    with FakeAPI(chat_reasoning_field="reasoning") as api:
        api.script(TOOLS_REPLY, FINAL_REPLY)
        # A URL as the model: huggingface_hub then sends the model name "dummy".
        model = InferenceClientModel(model_id=api.hf_base_url, api_key="test", timeout=5)
        agent = ToolCallingAgent(tools=[get_weather, get_time], model=model, verbosity_level=LogLevel.OFF, max_steps=4)
        with ststrace.Session(trace):
            assert agent.run(TASK) == ANSWER
    expected = [
        {**m, "model": "dummy"} if m["role"] == "assistant" else m for m in tool_calling_trace(agent)
    ]
    assert by_call_order(messages_of(trace)) == expected


@pytest.mark.filterwarnings("ignore:Function 'get_weather' has decorators other than @tool")
def test_code_agent_with_ststrace_tool_records_one_call_and_one_result(
    messages_of: Messages, fake_api: FakeAPI, trace: Path, instrumented_all: None
) -> None:
    """In a CodeAgent the model calls no tool itself, its code does, in
    smolagents' executor thread (which does not carry the caller's context):
    an ``@ststrace.tool`` function there records nothing, and the trace is the
    plain one: one ``python_interpreter`` call, one result."""
    calls: list[str] = []

    @tool
    @ststrace.tool
    def get_weather(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city's name
        """
        calls.append(city)
        return "Sunny, 21 C"

    fake_api.script(*code_replies())
    agent = CodeAgent(tools=[get_weather], model=openai_model(fake_api), verbosity_level=LogLevel.OFF)
    with ststrace.Session(trace):
        assert agent.run(TASK) == "Sunny, 21 C"
    assert calls == ["Paris"]
    assert messages_of(trace) == code_trace(agent)
