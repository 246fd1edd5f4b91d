"""LangChain's ``ChatGoogleGenerativeAI`` (``langchain-google-genai``) under
``ststrace.instrument()`` alone, against the local fake Gemini server: a
``bind_tools`` tool loop with ``invoke`` / ``ainvoke``, and ``stream``. Its
model calls are google-genai's ``models.generate_content`` /
``generate_content_stream``.

Runs in .venv-google (the ``test-google`` extra) with google-genai."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_google_genai", reason="langchain-google-genai runs in .venv-google (the test-google extra)")

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool as lc_tool  # noqa: E402
from langchain_google_genai import ChatGoogleGenerativeAI  # noqa: E402

from ststrace import Session  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from fakeapi_fixtures import quiet_google  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    PREAMBLE,
    REASONING_ANSWER,
    REASONING_TOOLS,
    SYSTEM,
    TEXT_REPLY,
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


@lc_tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return WEATHER_RESULT


@lc_tool
def get_time(tz: str) -> str:
    """Local time in an IANA time zone."""
    return TIME_RESULT


TOOLS = {"get_weather": get_weather, "get_time": get_time}


@pytest.fixture
def llm(fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> Any:
    quiet_google(monkeypatch)
    with instrumented("google_genai"):
        yield ChatGoogleGenerativeAI(
            model=MODEL, google_api_key="test", base_url=fake_api.gemini_base_url, max_retries=0, include_thoughts=True
        )


def expected(api: FakeAPI, ids: list[str]) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": PREAMBLE,
            "reasoningContent": REASONING_TOOLS,
            "toolCalls": [
                {"id": ids[0], "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
                {"id": ids[1], "function": {"name": "get_time", "arguments": TIME_ARGS}},
            ],
            "model": MODEL,
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": ids[0]},
        {"role": "tool", "content": TIME_RESULT, "toolCallId": ids[1]},
        {
            "role": "assistant",
            "content": api.answer_for([WEATHER_RESULT, TIME_RESULT]),
            "reasoningContent": REASONING_ANSWER,
            "model": MODEL,
        },
    ]


def ids_of(messages: list[dict[str, Any]]) -> list[str]:
    ids = [c["id"] for c in messages[2]["toolCalls"]]
    assert all(GENERATED.fullmatch(i) for i in ids)
    return ids


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_a_tool_loop_records_the_conversation(
    llm: Any, fake_api: FakeAPI, tmp_path: Path, messages_of: Any, mode: str
) -> None:
    """LangChain makes up its own ids for Gemini's id-less calls and sends the
    results back by name: the trace pairs them with the recorded calls."""
    bound = llm.bind_tools(list(TOOLS.values()))
    path = new_trace(tmp_path)
    history: list[Any] = [SystemMessage(SYSTEM), HumanMessage(USER)]
    with Session(path):
        for _ in range(2):
            reply = bound.invoke(history) if mode == "invoke" else await bound.ainvoke(history)
            history.append(reply)
            for call in reply.tool_calls:
                history.append(ToolMessage(TOOLS[call["name"]].invoke(call["args"]), tool_call_id=call["id"], name=call["name"]))
    assert reply.text == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    messages = messages_of(path)
    assert messages == expected(fake_api, ids_of(messages))


async def test_stream_and_astream(llm: Any, tmp_path: Path, messages_of: Any) -> None:
    path = new_trace(tmp_path)
    with Session(path):
        chunks = list(llm.stream([HumanMessage("hi")]))
        async for _ in llm.astream([HumanMessage("hi"), {"role": "assistant", "content": TEXT_REPLY}, HumanMessage("again")]):
            pass
    assert "".join(c.text for c in chunks) == TEXT_REPLY
    reply = {"role": "assistant", "content": TEXT_REPLY, "reasoningContent": "A short greeting is enough here.", "model": MODEL}
    assert messages_of(path) == [
        {"role": "user", "content": "hi"},
        reply,
        {"role": "user", "content": "again"},
        reply,
    ]
