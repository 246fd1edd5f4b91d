"""``ststrace.instrument("cohere")`` with the real ``cohere`` SDK (v2 API) against
the fake server's ``/v2/chat``: ``ClientV2.chat`` / ``chat_stream`` and
``AsyncClientV2``'s, with Cohere's tool-call ids, ``tool_plan`` and thinking as
reasoning, tool results sent as documents, and usage from ``usage.tokens``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

cohere = pytest.importorskip("cohere")

import ststrace  # noqa: E402
from ststrace import Session, _instrument  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_decorators_helpers import valid_messages  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    CHAT_TOOLS,
    PREAMBLE,
    REASONING_ANSWER,
    REASONING_TOOLS,
    SYSTEM,
    TIME_RESULT,
    USER,
    WEATHER_RESULT,
    chat_messages,
    instrumented,
    new_trace,
    recorded,
    tool_calls,
)

MODEL = "command-a-test"
RESULTS = {"get_weather": WEATHER_RESULT, "get_time": TIME_RESULT}
THINKING = {"type": "enabled"}


@pytest.fixture
def patched_cohere() -> Iterator[None]:
    with instrumented("cohere"):
        yield


def client(api: FakeAPI) -> Any:
    return cohere.ClientV2(api_key="test", base_url=api.cohere_base_url, timeout=5.0, max_retries=0)


def async_client(api: FakeAPI) -> Any:
    return cohere.AsyncClientV2(api_key="test", base_url=api.cohere_base_url, timeout=5.0, max_retries=0)


def expected_loop(api: FakeAPI, thinking: bool) -> list[dict[str, Any]]:
    answer: dict[str, Any] = {"role": "assistant", "content": api.answer_for([WEATHER_RESULT, TIME_RESULT])}
    if thinking:
        answer["reasoningContent"] = REASONING_ANSWER
    plan = f"{REASONING_TOOLS}\n\n{PREAMBLE}" if thinking else PREAMBLE
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {"role": "assistant", "content": "", "reasoningContent": plan, "toolCalls": tool_calls("call_"), "model": MODEL},
        {"role": "tool", "toolCallId": "call_weather01", "content": WEATHER_RESULT},
        {"role": "tool", "toolCallId": "call_time02", "content": TIME_RESULT},
        {**answer, "model": MODEL},
    ]


def _next_turn(messages: list[Any], plan: str | None, calls: list[Any]) -> bool:
    """Cohere's documented loop: the assistant turn with its plan and calls, then
    one ``tool`` message per call holding a document."""
    if not calls:
        return False
    messages.append({"role": "assistant", "tool_plan": plan, "tool_calls": calls})
    for call in calls:
        document = {"type": "document", "document": {"data": RESULTS[call.function.name]}}
        messages.append({"role": "tool", "tool_call_id": call.id, "content": [document]})
    return True


def _merged(events: list[Any]) -> tuple[str, list[Any]]:
    plan = "".join(e.delta.message.tool_plan or "" for e in events if e.type == "tool-plan-delta")
    calls: list[dict[str, Any]] = []
    for e in events:
        if e.type == "tool-call-start":
            tc = e.delta.message.tool_calls
            calls.append({"id": tc.id, "type": "function", "function": {"name": tc.function.name, "arguments": ""}})
        elif e.type == "tool-call-delta":
            calls[-1]["function"]["arguments"] += e.delta.message.tool_calls.function.arguments
    return plan, [cohere.ToolCallV2(**c) for c in calls]


@pytest.mark.parametrize("thinking", [False, True])
def test_chat_tool_loop_is_recorded_with_cohere_ids(
    fake_api: FakeAPI, patched_cohere: None, tmp_path: Path, thinking: bool
) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    extra = {"thinking": THINKING} if thinking else {}
    c = client(fake_api)
    with Session(path):
        for _ in range(3):
            reply = c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS, **extra)
            assert type(reply).__name__ == "V2ChatResponse"
            if not _next_turn(messages, reply.message.tool_plan, reply.message.tool_calls or []):
                break
    assert recorded(path) == expected_loop(fake_api, thinking)
    assert fake_api.requests[0].path == "/v2/chat"
    # The results went back as documents.
    assert json.loads(fake_api.requests[1].raw)["messages"][-1]["content"][0]["type"] == "document"


def test_usage_from_tokens(fake_api: FakeAPI, patched_cohere: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with Session(path):
        reply = client(fake_api).chat(model=MODEL, messages=chat_messages())
    [assistant] = [m for m in valid_messages(path) if m["role"] == "assistant"]
    tokens = reply.usage.tokens
    assert assistant["usage"] == {
        "input": int(tokens.input_tokens),
        "output": int(tokens.output_tokens),
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": int(tokens.input_tokens + tokens.output_tokens),
    }
    assert tokens.input_tokens != reply.usage.billed_units.input_tokens  # the fake tells them apart
    assert assistant["content"] == "Hello from the fake API." and "reasoningContent" not in assistant


async def test_async_chat_tool_loop_is_recorded(fake_api: FakeAPI, patched_cohere: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    c = async_client(fake_api)
    async with Session(path):
        for _ in range(3):
            reply = await c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            if not _next_turn(messages, reply.message.tool_plan, reply.message.tool_calls or []):
                break
    assert recorded(path) == expected_loop(fake_api, False)


@pytest.mark.parametrize("thinking", [False, True])
def test_chat_stream_tool_loop_is_recorded(
    fake_api: FakeAPI, patched_cohere: None, tmp_path: Path, thinking: bool
) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    extra = {"thinking": THINKING} if thinking else {}
    c = client(fake_api)
    with Session(path):
        for _ in range(3):
            events = list(c.chat_stream(model=MODEL, messages=messages, tools=CHAT_TOOLS, **extra))
            assert events[0].type == "message-start" and events[-1].type == "message-end"
            if not _next_turn(messages, *_merged(events)):
                break
    assert recorded(path) == expected_loop(fake_api, thinking)
    usage = [m["usage"] for m in valid_messages(path) if m["role"] == "assistant"]
    assert len(usage) == 2 and all(u["input"] > 200 for u in usage)  # from usage.tokens


async def test_async_chat_stream_tool_loop_is_recorded(
    fake_api: FakeAPI, patched_cohere: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    c = async_client(fake_api)
    async with Session(path):
        for _ in range(3):
            events = [e async for e in c.chat_stream(model=MODEL, messages=messages, tools=CHAT_TOOLS)]
            if not _next_turn(messages, *_merged(events)):
                break
    assert recorded(path) == expected_loop(fake_api, False)


def test_api_error_propagates_unchanged(fake_api: FakeAPI, patched_cohere: None, tmp_path: Path) -> None:
    fake_api.fail_next(429)
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(cohere.errors.TooManyRequestsError):
            client(fake_api).chat(model=MODEL, messages=chat_messages())
    assert recorded(path) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def test_instrument_without_names_covers_cohere() -> None:
    try:
        assert "cohere" in ststrace.instrument()
        assert "cohere" in _instrument.instrumented()
    finally:
        ststrace.uninstrument()
