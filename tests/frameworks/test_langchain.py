"""LangChain ``ChatOpenAI`` and LangGraph ``create_react_agent`` under
``ststrace.instrument()`` alone, against the local fake server.

``ChatOpenAI.invoke`` / ``ainvoke`` call ``with_raw_response.create`` (Chat
Completions) or ``responses.with_raw_response.create`` (Responses API); the
trace must hold the whole conversation with the provider's tool-call ids, each
tool result paired by id, and, with ststrace's ``@tool`` also on the tool, still
exactly one call and one result per tool use."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai", reason="langchain-openai is not installed (pip install 'ststrace[test]')")
pytest.importorskip("langgraph", reason="langgraph is not installed (pip install 'ststrace[test]')")

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool as lc_tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session  # noqa: E402
from ststrace.testing import DEFAULT_TOOL_CALLS, FakeAPI  # noqa: E402
from test_decorators_helpers import valid_messages  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    INPUTS,
    MODEL,
    PREAMBLE,
    REASONING_ANSWER,
    SYSTEM,
    TIME_ARGS,
    TIME_RESULT,
    USER,
    WEATHER_ARGS,
    WEATHER_RESULT,
    new_trace,
    recorded,
    tool_reply,
)

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # moved to langchain.agents in LangGraph 1.0, still shipped
    from langgraph.prebuilt import create_react_agent  # noqa: E402


@lc_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return WEATHER_RESULT if city == "Paris" else "unknown"


@lc_tool
def get_time(tz: str) -> str:
    """Local time in an IANA time zone."""
    return TIME_RESULT if tz == "Europe/Paris" else "unknown"


def _traced_weather() -> Any:
    @lc_tool
    @ststrace.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return WEATHER_RESULT if city == "Paris" else "unknown"

    return get_weather


#: ``get_weather`` with ststrace's ``@tool`` under LangChain's.
get_weather_traced = _traced_weather()


TOOLS = [get_weather, get_time]


def model(api: FakeAPI, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(model=MODEL, base_url=api.openai_base_url, api_key="test", max_retries=0, timeout=5, **kwargs)


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "toolCallId": call_id, "content": content}


def answer(api: FakeAPI, *results: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": api.answer_for(list(results)),
        "reasoningContent": REASONING_ANSWER,
        "model": MODEL,
    }


def full_loop(api: FakeAPI) -> list[dict[str, Any]]:
    """The trace of the two-tool conversation, parallel calls answered in order."""
    return [
        *INPUTS,
        tool_reply(),
        result("call_weather01", WEATHER_RESULT),
        result("call_time02", TIME_RESULT),
        answer(api, WEATHER_RESULT, TIME_RESULT),
    ]


def single_tool(api: FakeAPI) -> None:
    """The fake model asks for get_weather only (so tool results arrive in one order)."""
    api.tool_calls = (DEFAULT_TOOL_CALLS[0],)


def weather_only_loop(api: FakeAPI) -> list[dict[str, Any]]:
    reply = tool_reply()
    reply["toolCalls"] = reply["toolCalls"][:1]
    reply["reasoningContent"] = "I should call get_weather."
    return [*INPUTS, reply, result("call_weather01", WEATHER_RESULT), answer(api, WEATHER_RESULT)]


# --------------------------------------------------------------------------- ChatOpenAI, by hand


def run_loop(llm: Any, tools: list[Any]) -> Any:
    """The textbook tool loop: invoke, run the asked tools, invoke again."""
    by_name = {t.name: t for t in tools}
    conversation: list[Any] = [SystemMessage(SYSTEM), HumanMessage(USER)]
    reply = llm.invoke(conversation)
    conversation.append(reply)
    for call in reply.tool_calls:
        output = by_name[call["name"]].invoke(call["args"])
        conversation.append(ToolMessage(output, tool_call_id=call["id"]))
    return llm.invoke(conversation)


async def arun_loop(llm: Any, tools: list[Any]) -> Any:
    by_name = {t.name: t for t in tools}
    conversation: list[Any] = [SystemMessage(SYSTEM), HumanMessage(USER)]
    reply = await llm.ainvoke(conversation)
    conversation.append(reply)
    for call in reply.tool_calls:
        output = await by_name[call["name"]].ainvoke(call["args"])
        conversation.append(ToolMessage(output, tool_call_id=call["id"]))
    return await llm.ainvoke(conversation)


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_chat_openai_invoke_with_bind_tools(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, responses_api: bool
) -> None:
    """``bind_tools(...).invoke`` twice around two undecorated tools: system and
    user once, the reply with reasoning and the provider's ids, both results
    paired, the answer; nothing repeated from the first turn."""
    llm = model(fake_api, use_responses_api=responses_api).bind_tools(TOOLS)
    path = new_trace(tmp_path)
    with Session(path):
        final = run_loop(llm, TOOLS)
    assert fake_api.answer_for([WEATHER_RESULT, TIME_RESULT]) in str(final.content)
    assert recorded(path) == full_loop(fake_api)
    endpoint = "responses" if responses_api else "chat"
    assert len(fake_api.requests_to(endpoint)) == 2


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
async def test_chat_openai_ainvoke_with_bind_tools(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, responses_api: bool
) -> None:
    """The same loop with ``ainvoke`` (``async_client.with_raw_response``)."""
    llm = model(fake_api, use_responses_api=responses_api).bind_tools(TOOLS)
    path = new_trace(tmp_path)
    async with Session(path):
        await arun_loop(llm, TOOLS)
    assert recorded(path) == full_loop(fake_api)


def test_chat_openai_invoke_with_traced_tool(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """ststrace's ``@tool`` under LangChain's: the result is recorded when the
    tool runs, paired with the provider's id; the next call's copy of it is
    not recorded again, and no call is made up."""
    single_tool(fake_api)
    llm = model(fake_api).bind_tools([get_weather_traced])
    path = new_trace(tmp_path)
    with Session(path):
        run_loop(llm, [get_weather_traced])
    messages = recorded(path)
    assert messages == weather_only_loop(fake_api)


def test_chat_openai_stream_still_records_once(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """``.stream()`` (plain ``create(stream=True)``) next to ``invoke``: one reply each."""
    llm = model(fake_api)
    path = new_trace(tmp_path)
    with Session(path):
        text = "".join(str(chunk.content) for chunk in llm.stream([SystemMessage(SYSTEM), HumanMessage(USER)]))
        llm.invoke([SystemMessage(SYSTEM), HumanMessage(USER)])
    reply = {
        "role": "assistant",
        "content": text,
        "reasoningContent": "A short greeting is enough here.",
        "model": MODEL,
    }
    assert recorded(path) == [*INPUTS, reply, reply]


# --------------------------------------------------------------------------- LangGraph


def agent(api: FakeAPI, tools: list[Any], **kwargs: Any) -> Any:
    return create_react_agent(model(api, **kwargs), tools, prompt=SYSTEM)


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_langgraph_react_agent_invoke(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, responses_api: bool
) -> None:
    """``create_react_agent(...).invoke``: the ToolNode runs both calls (in
    worker threads); the trace is the whole conversation, ids included."""
    graph = agent(fake_api, TOOLS, use_responses_api=responses_api)
    path = new_trace(tmp_path)
    with Session(path):
        out = graph.invoke({"messages": [("user", USER)]})
    assert fake_api.answer_for([WEATHER_RESULT, TIME_RESULT]) in str(out["messages"][-1].content)
    assert recorded(path) == full_loop(fake_api)


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
async def test_langgraph_react_agent_ainvoke(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, responses_api: bool
) -> None:
    """``ainvoke``: tools run as tasks; same trace."""
    graph = agent(fake_api, TOOLS, use_responses_api=responses_api)
    path = new_trace(tmp_path)
    async with Session(path):
        await graph.ainvoke({"messages": [("user", USER)]})
    assert recorded(path) == full_loop(fake_api)


def test_langgraph_react_agent_with_traced_tool(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """``@tool`` on the graph's tool too: exactly one call and one result, with
    the provider's id."""
    single_tool(fake_api)
    graph = agent(fake_api, [get_weather_traced])
    path = new_trace(tmp_path)
    with Session(path):
        graph.invoke({"messages": [("user", USER)]})
    assert recorded(path) == weather_only_loop(fake_api)


def test_langgraph_second_turn_records_only_what_is_new(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path
) -> None:
    """A checkpointed thread invoked twice: the second turn adds its user
    message and the replies, nothing from the first turn again."""
    from langgraph.checkpoint.memory import InMemorySaver

    single_tool(fake_api)
    graph = create_react_agent(model(fake_api), [get_weather], prompt=SYSTEM, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    path = new_trace(tmp_path)
    with Session(path):
        graph.invoke({"messages": [("user", USER)]}, config)
        fake_api.tool_calls = ()
        graph.invoke({"messages": [("user", "Thanks!")]}, config)
    second_answer = {
        "role": "assistant",
        "content": "Hello from the fake API.",
        "reasoningContent": "A short greeting is enough here.",
        "model": MODEL,
    }
    # With no tool calls scripted the fake model answers in plain text.
    assert recorded(path) == [*weather_only_loop(fake_api), {"role": "user", "content": "Thanks!"}, second_answer]


def test_arguments_are_the_providers_text(fake_api: FakeAPI, instrumented_all: None, tmp_path: Path) -> None:
    """The recorded arguments are the provider's JSON text, not LangChain's dicts."""
    graph = agent(fake_api, TOOLS)
    path = new_trace(tmp_path)
    with Session(path):
        graph.invoke({"messages": [("user", USER)]})
    calls = recorded(path)[2]["toolCalls"]
    assert [c["function"]["arguments"] for c in calls] == [WEATHER_ARGS, TIME_ARGS]
    assert recorded(path)[2]["content"] == PREAMBLE


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_include_response_headers_streams_through_raw_responses(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, responses_api: bool
) -> None:
    """``include_response_headers=True`` makes ``.stream()`` go through
    ``with_raw_response.create(stream=True).parse()``: still one reply per call,
    and the headers still reach LangChain."""
    llm = model(fake_api, include_response_headers=True, use_responses_api=responses_api)
    path = new_trace(tmp_path)
    with Session(path):
        chunks = list(llm.stream([SystemMessage(SYSTEM), HumanMessage(USER)]))
        invoked = llm.invoke([SystemMessage(SYSTEM), HumanMessage(USER)])
    assert any(c.response_metadata.get("headers", {}).get("x-request-id") for c in chunks)
    assert invoked.response_metadata["headers"]["x-request-id"].startswith("req_fake")
    reply = {
        "role": "assistant",
        "content": "Hello from the fake API.",
        "reasoningContent": "A short greeting is enough here.",
        "model": MODEL,
    }
    assert recorded(path) == [*INPUTS, reply, reply]


@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_invoke_records_the_token_usage_langchain_reports(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path, responses_api: bool
) -> None:
    """``invoke`` goes through ``with_raw_response``: each recorded reply carries the
    same token counts LangChain reports in ``usage_metadata``, and the session's
    totals add them up (the raw path used to record no usage at all)."""
    path = new_trace(tmp_path)
    llm = model(fake_api, use_responses_api=responses_api).bind_tools(TOOLS)
    replies: list[Any] = []
    original = llm.invoke

    def invoke(conversation: Any) -> Any:
        replies.append(original(conversation))
        return replies[-1]

    with Session(path) as s:
        run_loop(type("L", (), {"invoke": staticmethod(invoke)})(), TOOLS)
        totals = s.stats()["usage"]
    recorded_usage = [m.get("usage") for m in valid_messages(path) if m["role"] == "assistant"]
    reported = [(r.usage_metadata["input_tokens"], r.usage_metadata["output_tokens"]) for r in replies]
    assert len(reported) == 2 and all(u is not None for u in recorded_usage), recorded_usage
    assert [(u["input"], u["output"]) for u in recorded_usage] == reported
    assert totals["totalTokens"] == sum(r.usage_metadata["total_tokens"] for r in replies)


def test_a_tool_that_raises_out_of_the_graph_answers_its_call_with_the_error(
    fake_api: FakeAPI, instrumented_all: None, tmp_path: Path
) -> None:
    """LangGraph's ``ToolNode`` lets a plain exception out of ``invoke``: the user
    sees the very exception, and the trace ends with the call answered by that
    error instead of an unanswered call (and nothing after it)."""
    boom = ValueError("the weather service is down")

    @lc_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        raise boom

    single_tool(fake_api)
    path = new_trace(tmp_path)
    with pytest.raises(ValueError) as raised:
        with Session(path):
            create_react_agent(model(fake_api), [get_weather]).invoke({"messages": [("user", USER)]})
    assert raised.value is boom
    messages = recorded(path)
    assert messages[-1] == result("call_weather01", "Error: ValueError: the weather service is down")
    assert messages[-2]["toolCalls"][0]["id"] == "call_weather01"
    assert ststrace.validate(path) == []
