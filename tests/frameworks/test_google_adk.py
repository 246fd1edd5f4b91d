"""Google ADK (``google-adk``) under ``ststrace.instrument()`` alone, against the
local fake Gemini server: ``InMemoryRunner.run_async`` with ADK's default Gemini
model (plain and ``StreamingMode.SSE``), the sync ``Runner.run``, transfers to ``sub_agents``, an
``AgentTool`` as a linked child session, and ststrace's ``@tool`` as an ADK tool.

google-adk needs google-genai<3 and tenacity below the main test environment's:
these tests run in .venv-google (the ``test-google`` extra, ``make test``)."""

import json
import re
from pathlib import Path
from typing import Any

import pytest

adk = pytest.importorskip("google.adk", reason="google-adk runs in .venv-google (the test-google extra)")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.run_config import RunConfig, StreamingMode  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools.agent_tool import AgentTool  # noqa: E402
from google.genai import types  # noqa: E402

from ststrace import Session, tool  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedReply, ScriptedToolCall  # noqa: E402
from fakeapi_fixtures import quiet_google  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    PREAMBLE,
    SYSTEM,
    TIME_ARGS,
    TIME_RESULT,
    USER,
    WEATHER_ARGS,
    WEATHER_RESULT,
    instrumented,
    new_trace,
)

MODEL = "gemini-2.5-flash"
GENERATED = re.compile(r"call_[0-9a-f]{24}")
WEATHER = ScriptedToolCall("get_weather", {"city": "Paris"}, "weather01")


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return WEATHER_RESULT


def get_time(tz: str) -> str:
    """Local time in an IANA time zone."""
    return TIME_RESULT


@pytest.fixture
def api(fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> FakeAPI:
    """ADK builds its own google-genai client: it is pointed at the fake server
    through the environment, as a user would point it at a proxy."""
    quiet_google(monkeypatch)
    monkeypatch.setenv("GOOGLE_API_KEY", "test")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake_api.gemini_base_url)
    return fake_api


@pytest.fixture
def patched() -> Any:
    with instrumented("google_genai", "google_adk"):
        yield


async def run(agent: Any, text: str = USER, sse: bool = False) -> list[Any]:
    runner = InMemoryRunner(agent=agent, app_name="app")
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text=text)])
    options: dict[str, Any] = {"run_config": RunConfig(streaming_mode=StreamingMode.SSE)} if sse else {}
    return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message, **options)]


def sent_system(api: FakeAPI, index: int) -> dict[str, Any]:
    """The system message as request *index* sent it (ADK adds to the agent's instruction)."""
    return {"role": "system", "content": api.requests[index].body["systemInstruction"]["parts"][0]["text"]}


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": arguments}}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "content": content, "toolCallId": call_id}


def tool_turn(ids: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": PREAMBLE,
            "toolCalls": [call(ids[0], "get_weather", WEATHER_ARGS), call(ids[1], "get_time", TIME_ARGS)],
            "model": MODEL,
        },
        result(ids[0], WEATHER_RESULT),
        result(ids[1], TIME_RESULT),
    ]


def answer(api: FakeAPI, *results: str) -> dict[str, Any]:
    return {"role": "assistant", "content": api.answer_for(list(results)), "model": MODEL}


def weather_agent(**extra: Any) -> Any:
    return LlmAgent(name="weather", model=MODEL, instruction=SYSTEM, tools=[get_weather, get_time], **extra)


async def test_a_run_records_the_conversation(api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any) -> None:
    """The default Gemini model sends id-less calls: recorded with generated
    ids, each result (from the run's events) paired by name."""
    path = new_trace(tmp_path)
    with Session(path):
        events = await run(weather_agent())
    assert events[-1].content.parts[0].text == api.answer_for([WEATHER_RESULT, TIME_RESULT])
    messages = messages_of(path)
    ids = [c["id"] for c in messages[2]["toolCalls"]]
    assert all(GENERATED.fullmatch(i) for i in ids)
    assert messages == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        *tool_turn(ids),
        answer(api, WEATHER_RESULT, TIME_RESULT),
    ]
    assert len(api.requests) == 2


async def test_a_streamed_run_keeps_the_providers_ids(
    api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any
) -> None:
    """StreamingMode.SSE: each streamed reply once (ADK's partial events are not
    replies of their own), with the ids the model sent."""
    api.gemini_call_ids = True
    path = new_trace(tmp_path)
    with Session(path):
        events = await run(weather_agent(), sse=True)
    assert any(e.partial for e in events)
    assert all(r.stream for r in api.requests)
    assert messages_of(path) == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        *tool_turn(["call_weather01", "call_time02"]),
        answer(api, WEATHER_RESULT, TIME_RESULT),
    ]


def test_the_sync_runner(api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any) -> None:
    """``Runner.run`` drives ``run_async`` on a thread of its own, which starts
    in a copy of the caller's context: the session is there."""
    import asyncio

    api.gemini_call_ids = True
    runner = InMemoryRunner(agent=weather_agent(), app_name="app")
    session = asyncio.run(runner.session_service.create_session(app_name="app", user_id="u"))
    path = new_trace(tmp_path)
    with Session(path):
        message = types.Content(role="user", parts=[types.Part(text=USER)])
        events = list(runner.run(user_id="u", session_id=session.id, new_message=message))
    assert events[-1].content.parts[0].text == api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert messages_of(path) == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        *tool_turn(["call_weather01", "call_time02"]),
        answer(api, WEATHER_RESULT, TIME_RESULT),
    ]


async def test_outside_a_session_the_run_is_untouched(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    events = await run(weather_agent())
    assert [e.author for e in events] == ["weather"] * 3
    assert events[-1].content.parts[0].text == api.answer_for([WEATHER_RESULT, TIME_RESULT])


async def test_a_transfer_stays_in_the_session_as_a_handoff(
    api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any
) -> None:
    """transfer_to_agent: the call, its result (it never reaches a model), the
    new agent's instructions where they start to apply, and its turns; ADK's
    relays of the first agent's turns ("For context: ...") are no user turns."""
    api.gemini_call_ids = True
    helper = LlmAgent(name="helper", model=MODEL, instruction="You help.", description="helps", tools=[get_weather])
    boss = LlmAgent(name="boss", model=MODEL, instruction=SYSTEM, sub_agents=[helper])
    transfer = ScriptedToolCall("transfer_to_agent", {"agent_name": "helper"}, "transfer01")
    api.script(ScriptedReply(text=None, tool_calls=(transfer,)))
    api.tool_calls = (WEATHER,)
    path = new_trace(tmp_path)
    with Session(path):
        await run(boss)
    relayed = api.requests[1].body["contents"][1]["parts"][0]["text"]
    assert relayed.startswith("For context:")
    assert messages_of(path) == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        {"role": "assistant", "content": "", "toolCalls": [call("call_transfer01", "transfer_to_agent", transfer.arguments_json)], "model": MODEL},
        result("call_transfer01", "null"),
        sent_system(api, 1),
        {"role": "assistant", "content": PREAMBLE, "toolCalls": [call("call_weather01", "get_weather", WEATHER_ARGS)], "model": MODEL},
        result("call_weather01", WEATHER_RESULT),
        answer(api, WEATHER_RESULT),
    ]
    assert sent_system(api, 1)["content"].startswith("You help.")


def header_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0])


@pytest.mark.parametrize("sse", [False, True], ids=["plain", "sse"])
async def test_an_agent_tool_records_a_linked_child_session(
    api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any, sse: bool
) -> None:
    """AgentTool runs its agent with a Runner of its own: that run is a child
    session beside the parent's file, named after the agent and linked to the
    parent's call (matched by name: the model sent no id); the parent holds the
    call and the agent's answer."""
    helper = LlmAgent(name="helper", model=MODEL, instruction="You help.", tools=[get_weather])
    boss = LlmAgent(name="boss", model=MODEL, instruction=SYSTEM, tools=[AgentTool(helper)])
    ask = ScriptedToolCall("helper", {"request": "weather in Paris"}, "ask01")
    api.script(ScriptedReply(text=None, tool_calls=(ask,)))
    api.tool_calls = (WEATHER,)
    path = new_trace(tmp_path)
    with Session(path, harness="boss-app") as parent:
        await run(boss, sse=sse)
    inner = api.answer_for([WEATHER_RESULT])
    messages = messages_of(path)
    ask_id = messages[2]["toolCalls"][0]["id"]
    assert GENERATED.fullmatch(ask_id)
    assert messages == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        {"role": "assistant", "content": "", "toolCalls": [call(ask_id, "helper", ask.arguments_json)], "model": MODEL},
        result(ask_id, inner),
        answer(api, inner),
    ]
    [child_path] = [p for p in tmp_path.glob("*.jsonl") if p != path]
    header = header_of(child_path)
    assert child_path == path.parent / f"{path.stem}.{header['id']}.jsonl"
    assert (header["harness"], header["name"]) == ("boss-app", "helper")
    assert (header["parentSessionId"], header["parentToolCallId"]) == (parent.id, ask_id)
    child = messages_of(child_path)
    weather_id = child[2]["toolCalls"][0]["id"]
    assert child == [
        sent_system(api, 1),
        {"role": "user", "content": "weather in Paris"},
        {"role": "assistant", "content": PREAMBLE, "toolCalls": [call(weather_id, "get_weather", WEATHER_ARGS)], "model": MODEL},
        result(weather_id, WEATHER_RESULT),
        answer(api, WEATHER_RESULT),
    ]


async def test_a_decorated_tool_answers_its_call_once(
    api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any
) -> None:
    """An ``@tool`` function as an ADK tool records its own result; neither the
    run's event nor the next request records it again."""
    api.gemini_call_ids = True
    agent = LlmAgent(name="weather", model=MODEL, instruction=SYSTEM, tools=[tool(get_weather), get_time])
    path = new_trace(tmp_path)
    with Session(path):
        await run(agent)
    assert messages_of(path) == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        *tool_turn(["call_weather01", "call_time02"]),
        answer(api, WEATHER_RESULT, TIME_RESULT),
    ]


async def test_a_tool_that_raises_ends_the_run_with_its_error(
    api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any
) -> None:
    """ADK lets a tool's exception end the run: the other call's result is
    recorded from ADK's event, the failed call is answered with the error when
    it leaves the session, and the exception reaches the caller unchanged."""
    api.gemini_call_ids = True

    def broken_weather(city: str) -> str:
        """Current weather for a city."""
        raise RuntimeError("weather service down")

    broken_weather.__name__ = "get_weather"
    agent = LlmAgent(name="weather", model=MODEL, instruction=SYSTEM, tools=[broken_weather, get_time])
    path = new_trace(tmp_path)
    with pytest.raises(RuntimeError, match="weather service down"):
        with Session(path):
            await run(agent)
    assert messages_of(path) == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        tool_turn(["call_weather01", "call_time02"])[0],
        result("call_time02", TIME_RESULT),
        result("call_weather01", "Error: RuntimeError: weather service down"),
    ]


async def test_a_follow_up_turn_adds_only_what_is_new(
    api: FakeAPI, patched: None, tmp_path: Path, messages_of: Any
) -> None:
    """Two runs on one ADK session: the second request resends the first run's
    history; only the new user turn and its answer are added."""
    runner = InMemoryRunner(agent=weather_agent(), app_name="app")
    adk_session = await runner.session_service.create_session(app_name="app", user_id="u")
    path = new_trace(tmp_path)
    with Session(path):
        for text in (USER, "Thanks! And in London?"):
            message = types.Content(role="user", parts=[types.Part(text=text)])
            async for _ in runner.run_async(user_id="u", session_id=adk_session.id, new_message=message):
                pass
    assert len(api.requests[2].body["contents"]) == 5  # the first run's four turns and the new one
    messages = messages_of(path)
    first, second = ([c["id"] for c in messages[i]["toolCalls"]] for i in (2, 7))
    assert all(GENERATED.fullmatch(i) for i in first + second) and len(set(first + second)) == 4
    assert messages == [
        sent_system(api, 0),
        {"role": "user", "content": USER},
        *tool_turn(first),
        answer(api, WEATHER_RESULT, TIME_RESULT),
        {"role": "user", "content": "Thanks! And in London?"},
        *tool_turn(second),
        answer(api, WEATHER_RESULT, TIME_RESULT),
    ]
