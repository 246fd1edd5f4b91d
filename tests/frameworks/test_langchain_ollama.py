"""LangGraph ``create_react_agent`` over LangChain's ``ChatOllama`` with
``ststrace.instrument()`` alone, against the local fake server's Ollama API.

Ollama's protocol has no tool-call ids; langchain-ollama makes up its own and
puts them on the tool messages it sends back (``tool_call_id``). Those ids are
not the recorded calls' ids, so the results must be paired by order, not
dropped as answers to unknown calls (issue 33, item 1).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("langchain_ollama", reason="langchain-ollama is not installed")
pytest.importorskip("langgraph", reason="langgraph is not installed")

from langchain_core.tools import tool as lc_tool  # noqa: E402
from langchain_ollama import ChatOllama  # noqa: E402

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent  # noqa: E402

MODEL = "llama3.2"
SYSTEM = "Answer briefly; use the tools for facts."
PROMPT = "What's the weather in Paris, and the time there?"


@lc_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return "Sunny, 21 C"


@lc_tool
def get_time(tz: str) -> str:
    """Local time in an IANA time zone."""
    return "15:00"


def _check(messages: list[dict[str, Any]], answer: str) -> None:
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    calls = messages[2]["toolCalls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    # Each result answers the recorded call's id (not langchain-ollama's own).
    assert [m["toolCallId"] for m in messages[3:5]] == [c["id"] for c in calls]
    assert [m["content"] for m in messages[3:5]] == ["Sunny, 21 C", "15:00"]
    assert messages[5]["content"] == answer


@pytest.mark.parametrize("streaming", [False, True])
def test_langgraph_over_chat_ollama_records_every_tool_result(
    streaming: bool, fake_api: FakeAPI, trace: Path, messages_of: Callable[[Path], list[dict[str, Any]]]
) -> None:
    llm = ChatOllama(model=MODEL, base_url=fake_api.ollama_base_url, disable_streaming=not streaming)
    graph = create_react_agent(llm, [get_weather, get_time], prompt=SYSTEM)
    with instrumented():
        with ststrace.Session(trace):
            out = graph.invoke({"messages": [("user", PROMPT)]})
    assert len(fake_api.requests_to("ollama")) == 2
    _check(messages_of(trace), str(out["messages"][-1].content))


async def test_langgraph_over_chat_ollama_async(
    fake_api: FakeAPI, trace: Path, messages_of: Callable[[Path], list[dict[str, Any]]]
) -> None:
    llm = ChatOllama(model=MODEL, base_url=fake_api.ollama_base_url)
    graph = create_react_agent(llm, [get_weather, get_time], prompt=SYSTEM)
    with instrumented():
        async with ststrace.Session(trace):
            out = await graph.ainvoke({"messages": [("user", PROMPT)]})
    _check(messages_of(trace), str(out["messages"][-1].content))
