"""``ststrace.testing.replay`` under real frameworks: the OpenAI Agents SDK
(Responses and Chat Completions models, a handoff; run and run_streamed) and
LangGraph's ``create_react_agent``, recorded, replayed and recorded again: the
same conversation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
pytest.importorskip("agents", reason="openai-agents is not installed (pip install 'ststrace[test]')")

from agents import Runner  # noqa: E402

from ststrace import Session, read  # noqa: E402
from ststrace.testing import FakeAPI, ReplayMismatch, assert_same_conversation, replay  # noqa: E402
from test_agents_sdk import chat_model, handoff_agents, weather_agent  # noqa: E402
from test_instrument_helpers import USER, new_trace  # noqa: E402


def build(kind: str, api: FakeAPI) -> Any:
    if kind == "handoff":
        return handoff_agents(api)
    return weather_agent(api, model=chat_model(api) if kind == "chat" else None)


async def run(agent: Any, path: Path, streamed: bool, prompt: str = USER) -> Any:
    async with Session(path):
        if streamed:
            result: Any = Runner.run_streamed(agent, prompt)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, prompt)
    return result.final_output


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
@pytest.mark.parametrize("kind", ["responses", "chat", "handoff"])
async def test_agents_sdk_round_trip(kind: str, streamed: bool, instrumented_all: None, tmp_path: Path) -> None:
    first, second = new_trace(tmp_path), new_trace(tmp_path)
    with FakeAPI(cached_tokens=2) as fake:
        answer = await run(build(kind, fake), first, streamed)
    with replay(first) as api:
        # The agent is built against the replay server; FakeAPI's scripting
        # (handoff_agents sets tool_calls) is unused there.
        assert await run(build(kind, api), second, streamed) == answer
    assert api.misses == [] and len(api.requests) == 2
    assert_same_conversation(first, second)
    assert [m.get("usage") for m in read(second).messages] == [m.get("usage") for m in read(first).messages]


async def test_agents_sdk_changed_prompt_fails_loudly(instrumented_all: None, tmp_path: Path) -> None:
    first = new_trace(tmp_path)
    with FakeAPI() as fake:
        await run(build("responses", fake), first, False)
    with pytest.raises(ReplayMismatch, match=r"first difference: message 2 of the request \(user\)"):
        with replay(first) as api:
            await run(build("responses", api), new_trace(tmp_path), False, prompt="Weather in Oslo?")


# --------------------------------------------------------------------------- LangGraph


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
@pytest.mark.parametrize("responses_api", [False, True], ids=["chat", "responses"])
def test_langgraph_round_trip(responses_api: bool, instrumented_all: None, tmp_path: Path) -> None:
    """LangGraph's ``create_react_agent`` (tools in worker threads, ChatOpenAI
    over Chat Completions or Responses): record, replay, the same conversation."""
    pytest.importorskip("langgraph")
    from test_langchain import TOOLS
    from test_langchain import agent as react_agent

    first, second = new_trace(tmp_path), new_trace(tmp_path)
    with FakeAPI() as fake, Session(first):
        react_agent(fake, TOOLS, use_responses_api=responses_api).invoke({"messages": [("user", USER)]})
    with replay(first) as api, Session(second):
        out = react_agent(api, TOOLS, use_responses_api=responses_api).invoke({"messages": [("user", USER)]})
    assert read(first).messages[-1]["content"] in str(out["messages"][-1].content)
    assert api.misses == [] and len(api.requests) == 2
    assert_same_conversation(first, second)
