"""LlamaIndex agents with ``ststrace.instrument()`` against the local fake server.

Each agent test runs twice, once per LlamaIndex LLM:

* ``openai``: LlamaIndex's default, ``llama_index.llms.openai.OpenAI``, recorded
  by the openai instrumentation. Every ``llama-index-llms-openai`` release
  (0.8.3 the latest) requires ``openai<3`` while the ``test`` extra pins
  ``openai==3.57.0``, so these variants skip in the main environment and run in
  ``.venv-openai2`` (the ``test-openai2`` extra: openai 2.54.0,
  llama-index-llms-openai 0.8.3), which ``make test`` runs first.
* ``litellm``: ``llama_index.llms.litellm.LiteLLM``, recorded by the litellm
  instrumentation; installed in both environments.

``FunctionAgent`` (LlamaIndex's default agent) is recorded by the client
instrumentation alone; ``ReActAgent`` (a text protocol with ``Observation:``
user turns) by ststrace's LlamaIndex integration. Every test asserts the exact
message sequence, ids included.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install 'ststrace[test]')")

from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent  # noqa: E402
from llama_index.core.llms import ChatMessage  # noqa: E402
from llama_index.core.memory import ChatMemoryBuffer  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402

import ststrace  # noqa: E402
from ststrace._instrument import instrumented as patched_now  # noqa: E402
from ststrace.testing import FakeAPI, RecordedRequest, ScriptedReply, ScriptedToolCall  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
    # LlamaIndex's own pydantic models (its workflows inspect every attribute of an agent).
    pytest.mark.filterwarnings("ignore:The `__fields__` attribute is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:The `__fields_set__` attribute is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance:DeprecationWarning"
    ),
    pytest.mark.filterwarnings("ignore:is_running called from within a step:DeprecationWarning"),
]

Messages = Callable[[Path], list[dict[str, Any]]]
LLMFactory = Callable[[FakeAPI], Any]

#: A model litellm knows to support tool calls (FunctionAgent checks); the fake server echoes it.
MODEL = "gpt-4o-mini"
SYSTEM = "Answer briefly; use the tools for facts."
PROMPT = "What's the weather in Paris, and the time there?"
ANSWER = "Here is what I found: Sunny, 21 C; 15:00"


def get_weather(city: str) -> str:
    """The weather in a city."""
    return "Sunny, 21 C"


def get_time(tz: str) -> str:
    """The time in a time zone."""
    return "15:00"


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": arguments}}


@pytest.fixture(autouse=True)
def _instrumented(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # LlamaIndex's chat memory counts tokens with tiktoken, from the encodings
    # llama-index-core ships, unless TIKTOKEN_CACHE_DIR points elsewhere (then
    # tiktoken would download them).
    import litellm  # imported now, so instrument() patches it at once
    import tiktoken

    # litellm's stream_chunk_builder counts with o200k_base, which litellm ships:
    # load it now from that copy, so that it never depends on whether a test
    # run earlier in this process (another xdist worker's share) loaded it.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"))
    tiktoken.get_encoding("o200k_base")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)

    with instrumented():
        assert {"litellm", "llama_index", "openai"} <= set(patched_now())
        yield


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # the parent package is missing
        return False


HAS_OPENAI_LLM = _installed("llama_index.llms.openai")
HAS_LITELLM_LLM = _installed("llama_index.llms.litellm")


def litellm_llm(api: FakeAPI) -> Any:
    from llama_index.llms.litellm import LiteLLM

    return LiteLLM(model=f"openai/{MODEL}", api_base=api.openai_base_url, api_key="test", max_retries=0, timeout=5)


def openai_llm(api: FakeAPI) -> Any:
    from llama_index.llms.openai import OpenAI

    return OpenAI(model=MODEL, api_base=api.openai_base_url, api_key="test", max_retries=0, timeout=5)


def openai_responses_llm(api: FakeAPI) -> Any:
    from llama_index.llms.openai import OpenAIResponses

    return OpenAIResponses(model=MODEL, api_base=api.openai_base_url, api_key="test", max_retries=0, timeout=5)


NO_OPENAI_LLM = (
    "llama-index-llms-openai is not installed: every release (0.8.3 the latest) requires openai<3 and the "
    "test extra pins openai==3.57.0; `make test` runs these in .venv-openai2 (the test-openai2 extra)"
)
OPENAI = pytest.param(openai_llm, id="openai", marks=pytest.mark.skipif(not HAS_OPENAI_LLM, reason=NO_OPENAI_LLM))
OPENAI_RESPONSES = pytest.param(
    openai_responses_llm, id="openai-responses", marks=pytest.mark.skipif(not HAS_OPENAI_LLM, reason=NO_OPENAI_LLM)
)
LITELLM = pytest.param(
    litellm_llm,
    id="litellm",
    marks=pytest.mark.skipif(not HAS_LITELLM_LLM, reason="llama-index-llms-litellm is not installed"),
)


@pytest.fixture(params=[OPENAI, OPENAI_RESPONSES, LITELLM])
def llm(request: pytest.FixtureRequest) -> LLMFactory:
    """Makes the LlamaIndex LLM under test, talking to the fake server."""
    factory: LLMFactory = request.param
    return factory


def sent_messages(request: RecordedRequest) -> list[dict[str, Any]]:
    """The conversation a request sent: Chat Completions ``messages`` or Responses ``input`` items."""
    items: list[dict[str, Any]] = request.body["messages" if request.endpoint == "chat" else "input"]
    return items


async def run(agent: Any, prompt: str = PROMPT, stream_events: bool = False, **kwargs: Any) -> str:
    handler = agent.run(prompt, **kwargs)
    if stream_events:
        async for _ in handler.stream_events():
            pass
    return str(await handler)


# --------------------------------------------------------------------------- FunctionAgent

FUNCTION_AGENT_TRACE = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": PROMPT},
    {
        "role": "assistant",
        "content": "Let me look that up.",
        "reasoningContent": "I should call get_weather and get_time.",
        "toolCalls": [
            call("call_weather01", "get_weather", '{"city":"Paris"}'),
            call("call_time02", "get_time", '{"tz":"Europe/Paris"}'),
        ],
        "model": MODEL,
    },
    {"role": "tool", "content": "Sunny, 21 C", "toolCallId": "call_weather01"},
    {"role": "tool", "content": "15:00", "toolCallId": "call_time02"},
    {
        "role": "assistant",
        "content": ANSWER,
        "reasoningContent": "The tool results answer the question.",
        "model": MODEL,
    },
]


@pytest.mark.parametrize("streaming", [True, False])
@pytest.mark.parametrize("stream_events", [False, True])
async def test_function_agent(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory, streaming: bool, stream_events: bool
) -> None:
    """``FunctionAgent.run`` (streaming the model or not, the caller streaming
    events or not): the provider's call ids, each result paired, the answer."""
    agent = FunctionAgent(tools=[get_weather, get_time], llm=llm(fake_api), system_prompt=SYSTEM, streaming=streaming)
    async with ststrace.Session(trace):
        assert await run(agent, stream_events=stream_events) == ANSWER
    assert fake_api.requests and all(r.stream == streaming for r in fake_api.requests)
    assert messages_of(trace) == FUNCTION_AGENT_TRACE


async def test_function_agent_follow_up_turn_records_only_what_is_new(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory
) -> None:
    """A second ``run`` with the same memory resends the conversation: only
    the new prompt and reply are recorded."""
    model = llm(fake_api)
    agent = FunctionAgent(tools=[get_weather, get_time], llm=model, system_prompt=SYSTEM)
    memory = ChatMemoryBuffer.from_defaults(llm=model)
    async with ststrace.Session(trace):
        await run(agent, memory=memory)
        fake_api.script(ScriptedReply(text="Rain tomorrow."))
        assert await run(agent, "And tomorrow?", memory=memory) == "Rain tomorrow."
    assert len(sent_messages(fake_api.requests[-1])) >= 6
    assert messages_of(trace) == [
        *FUNCTION_AGENT_TRACE,
        {"role": "user", "content": "And tomorrow?"},
        {"role": "assistant", "content": "Rain tomorrow.", "model": MODEL},
    ]


async def test_function_agent_with_ststrace_tool_records_each_result_once(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory
) -> None:
    """``@ststrace.tool`` on a tool function: one call and one result per use."""

    @ststrace.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny, 21 C"

    agent = FunctionAgent(tools=[get_weather, get_time], llm=llm(fake_api), system_prompt=SYSTEM)
    async with ststrace.Session(trace):
        assert await run(agent) == ANSWER
    assert messages_of(trace) == FUNCTION_AGENT_TRACE


def test_function_agent_run_from_sync_code(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory
) -> None:
    """A synchronous ``Session`` around ``asyncio.run(agent.run(...))``: the
    event loop inherits the session, the trace is the same."""
    agent = FunctionAgent(tools=[get_weather, get_time], llm=llm(fake_api), system_prompt=SYSTEM)
    with ststrace.Session(trace):
        assert asyncio.run(run(agent, stream_events=True)) == ANSWER
    assert messages_of(trace) == FUNCTION_AGENT_TRACE


async def test_agent_workflow_handoff(fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory) -> None:
    """``AgentWorkflow``: the root agent hands off to another agent, which
    uses a tool. One session holds the whole run; the second agent's system
    prompt appears where it takes over; every call is answered by its id."""
    fake_api.script(
        ScriptedReply(
            tool_calls=(ScriptedToolCall("handoff", {"to_agent": "weather", "reason": "weather"}, "hand01"),)
        ),
        ScriptedReply(tool_calls=(ScriptedToolCall("get_weather", {"city": "Paris"}, "weather01"),)),
        ScriptedReply(text="Sunny in Paris."),
    )
    router = FunctionAgent(
        name="router",
        description="Routes questions.",
        system_prompt="You route.",
        llm=llm(fake_api),
        can_handoff_to=["weather"],
    )
    weather = FunctionAgent(
        name="weather", description="Knows the weather.", system_prompt=SYSTEM, llm=llm(fake_api), tools=[get_weather]
    )
    workflow = AgentWorkflow(agents=[router, weather], root_agent="router")
    async with ststrace.Session(trace):
        assert await run(workflow) == "Sunny in Paris."
    handed_off = [
        m
        for m in sent_messages(fake_api.requests[1])
        if m.get("role") == "tool" or m.get("type") == "function_call_output"
    ]
    assert len(handed_off) == 1
    handoff_output = handed_off[0].get("content", handed_off[0].get("output"))
    assert handoff_output.startswith("Agent weather is now handling the request")
    assert messages_of(trace) == [
        {"role": "system", "content": "You route."},
        {"role": "user", "content": PROMPT},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [call("call_hand01", "handoff", '{"to_agent":"weather","reason":"weather"}')],
            "model": MODEL,
        },
        {"role": "tool", "content": handoff_output, "toolCallId": "call_hand01"},
        {"role": "system", "content": SYSTEM},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [call("call_weather01", "get_weather", '{"city":"Paris"}')],
            "model": MODEL,
        },
        {"role": "tool", "content": "Sunny, 21 C", "toolCallId": "call_weather01"},
        {"role": "assistant", "content": "Sunny in Paris.", "model": MODEL},
    ]


async def _ask(model: Any, method: str, history: list[Any], tools: list[Any] | None = None) -> Any:
    """One LLM call through *method*; streams are drained, their last chunk returned."""
    kwargs: dict[str, Any] = (
        {"tools": tools, "chat_history": history, "allow_parallel_tool_calls": True} if tools else {"messages": history}
    )
    name = method + ("_with_tools" if tools else "")
    if not name.startswith("a"):  # chat, stream_chat: synchronous
        result = getattr(model, name)(**kwargs)
    else:
        result = await getattr(model, name)(**kwargs)
    if not method.endswith("stream_chat"):
        return result
    last = None
    if method == "astream_chat":
        async for last in result:
            pass
    else:
        for last in result:
            pass
    return last


@pytest.mark.parametrize("method", ["chat", "stream_chat", "achat", "astream_chat"])
async def test_llm_tool_loop_by_hand(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory, method: str
) -> None:
    """The LLM used directly, sync or async, streamed or not: ``*_with_tools``,
    LlamaIndex's parsed tool calls answered by ``tool`` messages, then the
    answer; the trace holds the provider's ids, each result once."""
    model = llm(fake_api)
    tools = [FunctionTool.from_defaults(get_weather), FunctionTool.from_defaults(get_time)]
    history = [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content=PROMPT)]
    async with ststrace.Session(trace):
        reply = await _ask(model, method, history, tools)
        selections = model.get_tool_calls_from_response(reply, error_on_no_tool_call=True)
        history.append(reply.message)
        for sel in selections:
            output = {"get_weather": get_weather, "get_time": get_time}[sel.tool_name](**sel.tool_kwargs)
            history.append(ChatMessage(role="tool", content=output, additional_kwargs={"tool_call_id": sel.tool_id}))
        final = await _ask(model, method, history)
    assert [s.tool_id for s in selections] == ["call_weather01", "call_time02"]
    assert final.message.content == ANSWER
    assert len(fake_api.requests) == 2
    assert all(r.stream == method.endswith("stream_chat") for r in fake_api.requests)
    assert messages_of(trace) == FUNCTION_AGENT_TRACE


async def test_llm_complete(fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory) -> None:
    """``complete``, ``stream_complete`` and ``acomplete`` (a chat model
    answers them through chat): each prompt as a user turn, each reply once."""
    model = llm(fake_api)
    async with ststrace.Session(trace):
        assert model.complete("one").text == "Hello from the fake API."
        assert [r.text for r in model.stream_complete("two")][-1] == "Hello from the fake API."
        assert (await model.acomplete("three")).text == "Hello from the fake API."
    reply = {
        "role": "assistant",
        "content": "Hello from the fake API.",
        "reasoningContent": "A short greeting is enough here.",
        "model": MODEL,
    }
    assert messages_of(trace) == [
        {"role": "user", "content": "one"},
        reply,
        {"role": "user", "content": "two"},
        reply,
        {"role": "user", "content": "three"},
        reply,
    ]


# --------------------------------------------------------------------------- ReActAgent

ACTION = 'Thought: I need the weather first.\nAction: get_weather\nAction Input: {"city": "Paris"}'
FINAL = "Thought: I can answer without more tools.\nAnswer: Sunny, 21 C"


def react_agent(llm: LLMFactory, api: FakeAPI, **kwargs: Any) -> Any:
    return ReActAgent(tools=[get_weather, get_time], llm=llm(api), system_prompt=SYSTEM, **kwargs)


def react_trace(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The expected ReAct trace, with LlamaIndex's generated tool id taken from *messages*."""
    call_id = messages[2]["toolCalls"][0]["id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", call_id), call_id  # LlamaIndex's uuid4
    return [
        {"role": "system", "content": messages[0]["content"]},
        {"role": "user", "content": PROMPT},
        {
            "role": "assistant",
            "content": "",
            "reasoningContent": "I need the weather first.",
            "toolCalls": [call(call_id, "get_weather", '{"city":"Paris"}')],
            "model": MODEL,
        },
        {"role": "tool", "content": "Sunny, 21 C", "toolCallId": call_id},
        {
            "role": "assistant",
            "content": "Sunny, 21 C",
            "reasoningContent": "I can answer without more tools.",
            "model": MODEL,
        },
    ]


def sent_observations(api: FakeAPI) -> list[str]:
    return [
        m["content"]
        for r in api.requests
        for m in sent_messages(r)
        if m.get("role") == "user" and str(m["content"]).startswith("Observation:")
    ]


@pytest.mark.parametrize("streaming", [True, False])
async def test_react_agent_records_actions_as_tool_calls(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory, streaming: bool
) -> None:
    """The thought as reasoning, the action as a tool call answered by its
    observation, the answer last; no ``Observation:`` user turn."""
    fake_api.script(ScriptedReply(text=ACTION), ScriptedReply(text=FINAL))
    async with ststrace.Session(trace):
        assert await run(react_agent(llm, fake_api, streaming=streaming)) == "Sunny, 21 C"
    assert sent_observations(fake_api) == ["Observation: Sunny, 21 C"]
    messages = messages_of(trace)
    assert messages == react_trace(messages)
    assert SYSTEM in messages[0]["content"] and "get_weather" in messages[0]["content"]


async def test_react_agent_with_ststrace_tool_records_each_result_once(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory
) -> None:
    """``@ststrace.tool`` on a ReAct tool answers LlamaIndex's call id itself."""

    @ststrace.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Sunny, 21 C"

    fake_api.script(ScriptedReply(text=ACTION), ScriptedReply(text=FINAL))
    agent = ReActAgent(tools=[get_weather, get_time], llm=llm(fake_api), system_prompt=SYSTEM)
    async with ststrace.Session(trace):
        await run(agent)
    messages = messages_of(trace)
    assert messages == react_trace(messages)


async def test_react_agent_unparsable_reply_and_correction(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory
) -> None:
    """A reply LlamaIndex cannot parse is recorded as it came, then the
    correction LlamaIndex sends as a user turn, once."""
    unparsable = "Thought: I will call it.\nAction: get_weather"  # no Action Input
    fake_api.script(ScriptedReply(text=unparsable), ScriptedReply(text=ACTION), ScriptedReply(text=FINAL))
    async with ststrace.Session(trace):
        assert await run(react_agent(llm, fake_api)) == "Sunny, 21 C"
    messages = messages_of(trace)
    assert messages[2] == {"role": "assistant", "content": unparsable, "model": MODEL}
    assert messages[3]["role"] == "user" and messages[3]["content"].startswith("Error while parsing the output")
    rest = [messages[0], messages[1], *messages[4:]]
    assert rest == react_trace(rest)
    assert [m["content"] for m in messages].count(PROMPT) == 1


async def test_instrument_llama_index_by_name(
    fake_api: FakeAPI, trace: Path, messages_of: Messages, llm: LLMFactory
) -> None:
    """``instrument("llama_index")`` alone records a ReActAgent run (the model
    calls themselves are not recorded: neither openai nor litellm is instrumented)."""
    ststrace.uninstrument()
    with instrumented("llama-index"):
        assert patched_now() == ["llama_index"]
        fake_api.script(ScriptedReply(text=ACTION), ScriptedReply(text=FINAL))
        async with ststrace.Session(trace):
            await run(react_agent(llm, fake_api))
    messages = messages_of(trace)
    assert messages == react_trace(messages)
    assert not any(m["role"] == "user" and m["content"].startswith("Observation") for m in messages)
