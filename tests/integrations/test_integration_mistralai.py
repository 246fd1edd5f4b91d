"""``ststrace.instrument("mistralai")`` with the real ``mistralai`` SDK against the
fake server's Mistral dialect of Chat Completions (reasoning as ``thinking``
content chunks): ``chat.complete`` / ``complete_async`` / ``stream`` /
``stream_async``, with Mistral's tool-call ids and usage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mistralai.client")

from mistralai.client import Mistral  # noqa: E402
from mistralai.client.errors import SDKError  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session, _instrument  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_decorators_helpers import valid_messages  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    CHAT_TOOLS,
    SYSTEM,
    TEXT_REPLY,
    TIME_RESULT,
    USER,
    WEATHER_RESULT,
    answer_reply,
    chat_messages,
    instrumented,
    new_trace,
    recorded,
    text_reply,
    tool_reply,
)

MODEL = "mistral-test"
RESULTS = {"get_weather": WEATHER_RESULT, "get_time": TIME_RESULT}


@pytest.fixture
def patched_mistral() -> Iterator[None]:
    with instrumented("mistralai"):
        yield


def client(api: FakeAPI) -> Any:
    return Mistral(api_key="test", server_url=api.mistral_base_url, timeout_ms=5000)


def expected_loop(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        tool_reply(model=MODEL),
        {"role": "tool", "toolCallId": "call_weather01", "content": WEATHER_RESULT},
        {"role": "tool", "toolCallId": "call_time02", "content": TIME_RESULT},
        answer_reply(api, model=MODEL),
    ]


def _next_turn(messages: list[Any], message: Any, calls: list[Any]) -> bool:
    """Mistral's own loop: append the assistant message, then one ``tool`` message per call."""
    messages.append(message)
    for call in calls:
        messages.append(
            {"role": "tool", "name": call.function.name, "content": RESULTS[call.function.name], "tool_call_id": call.id}
        )
    return bool(calls)


def _merged(events: list[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The assistant message a stream adds up to, as the caller builds it."""
    text, calls = "", {}
    for event in events:
        delta = event.data.choices[0].delta
        if isinstance(delta.content, str):
            text += delta.content
        elif delta.content:
            text += "".join(getattr(c, "text", "") for c in delta.content if getattr(c, "type", "") == "text")
        for call in delta.tool_calls or []:
            calls.setdefault(call.index, call)
    ordered = [calls[i] for i in sorted(calls)]
    message = {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in ordered
        ],
    }
    return message, ordered


def test_complete_tool_loop_is_recorded_with_mistral_ids(
    fake_api: FakeAPI, patched_mistral: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    with client(fake_api) as c, Session(path):
        for _ in range(3):
            reply = c.chat.complete(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            assert type(reply).__name__ == "ChatCompletionResponse"
            message = reply.choices[0].message
            if not _next_turn(messages, message, message.tool_calls or []):
                break
    assert recorded(path) == expected_loop(fake_api)
    assert fake_api.requests[0].path == "/mistral/v1/chat/completions"


def test_usage_is_recorded(fake_api: FakeAPI, patched_mistral: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with client(fake_api) as c, Session(path):
        reply = c.chat.complete(model=MODEL, messages=chat_messages())
    [assistant] = [m for m in valid_messages(path) if m["role"] == "assistant"]
    u = reply.usage
    assert assistant["usage"] == {
        "input": u.prompt_tokens,
        "output": u.completion_tokens,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": u.total_tokens,
    }
    assert {k: v for k, v in assistant.items() if k not in ("usage", "timestamp")} == text_reply(model=MODEL)
    assert reply.choices[0].message.content[-1].text == TEXT_REPLY  # thinking chunk first, then text


async def test_complete_async_tool_loop_is_recorded(fake_api: FakeAPI, patched_mistral: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    async with client(fake_api) as c:
        async with Session(path):
            for _ in range(3):
                reply = await c.chat.complete_async(model=MODEL, messages=messages, tools=CHAT_TOOLS)
                message = reply.choices[0].message
                if not _next_turn(messages, message, message.tool_calls or []):
                    break
    assert recorded(path) == expected_loop(fake_api)


def test_stream_tool_loop_is_recorded(fake_api: FakeAPI, patched_mistral: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    with client(fake_api) as c, Session(path):
        for _ in range(3):
            events = list(c.chat.stream(model=MODEL, messages=messages, tools=CHAT_TOOLS))
            assert type(events[0]).__name__ == "CompletionEvent"
            if not _next_turn(messages, *_merged(events)):
                break
    assert recorded(path) == expected_loop(fake_api)
    assert all(r.body["stream"] is True for r in fake_api.requests)


async def test_stream_async_tool_loop_is_recorded(fake_api: FakeAPI, patched_mistral: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    async with client(fake_api) as c:
        async with Session(path):
            for _ in range(3):
                stream = await c.chat.stream_async(model=MODEL, messages=messages, tools=CHAT_TOOLS)
                if not _next_turn(messages, *_merged([e async for e in stream])):
                    break
    assert recorded(path) == expected_loop(fake_api)


def test_api_error_propagates_unchanged(fake_api: FakeAPI, patched_mistral: None, tmp_path: Path) -> None:
    fake_api.fail_next(401)
    path = new_trace(tmp_path)
    with client(fake_api) as c, Session(path):
        with pytest.raises(SDKError):
            c.chat.complete(model=MODEL, messages=chat_messages())
    assert recorded(path) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def test_instrument_without_names_covers_mistralai() -> None:
    try:
        assert "mistralai" in ststrace.instrument()
        assert "mistralai" in _instrument.instrumented()
    finally:
        ststrace.uninstrument()
