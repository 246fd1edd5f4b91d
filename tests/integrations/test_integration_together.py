"""``ststrace.instrument("together")`` with the real ``together`` SDK (2.x and
later, generated like openai's) against the fake server's Chat Completions:
sync, async and streamed, recorded by the openai Chat code through the shared
Stainless targets.

together pins versions the main test environment cannot take (rich, filelock),
so this file runs in its own environment (the ``test-side`` extra; ``make
test`` builds ``.venv-side``); elsewhere it is skipped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

together = pytest.importorskip("together", reason="together runs in .venv-side (the test-side extra)")

from ststrace import Session  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    CHAT_TOOLS,
    SYSTEM,
    TIME_RESULT,
    USER,
    WEATHER_RESULT,
    answer_reply,
    chat_messages,
    instrumented,
    new_trace,
    recorded,
    tool_reply,
)

MODEL = "meta-llama/test"
RESULTS = {"get_weather": WEATHER_RESULT, "get_time": TIME_RESULT}


@pytest.fixture
def patched_together() -> Iterator[None]:
    with instrumented("together"):
        yield


def expected_loop(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        tool_reply(model=MODEL),
        {"role": "tool", "toolCallId": "call_weather01", "content": WEATHER_RESULT},
        {"role": "tool", "toolCallId": "call_time02", "content": TIME_RESULT},
        answer_reply(api, model=MODEL),
    ]


def _next_turn(messages: list[Any], content: Any, calls: list[tuple[str, str, str]]) -> bool:
    if calls:
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
                ],
            }
        )
        for call_id, name, _ in calls:
            messages.append({"role": "tool", "tool_call_id": call_id, "content": RESULTS[name]})
    return bool(calls)


def _calls_of(message: Any) -> list[tuple[str, str, str]]:
    return [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]


def _streamed(chunks: list[Any]) -> tuple[str, list[tuple[str, str, str]]]:
    text, calls = "", {}
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        text += delta.content or ""
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, ["", "", ""])
            entry[0] = entry[0] or call.id or ""
            entry[1] += call.function.name or "" if call.function else ""
            entry[2] += call.function.arguments or "" if call.function else ""
    return text, [tuple(calls[i]) for i in sorted(calls)]  # type: ignore[misc]


def client(api: FakeAPI) -> Any:
    return together.Together(api_key="test", base_url=api.openai_base_url, max_retries=0, timeout=5.0)


def test_create_tool_loop_is_recorded(fake_api: FakeAPI, patched_together: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    with client(fake_api) as c, Session(path):
        for _ in range(3):
            reply = c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            assert type(reply).__module__.startswith("together.")
            message = reply.choices[0].message
            if not _next_turn(messages, message.content, _calls_of(message)):
                break
    assert recorded(path) == expected_loop(fake_api)


def test_stream_tool_loop_is_recorded(fake_api: FakeAPI, patched_together: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    with client(fake_api) as c, Session(path):
        for _ in range(3):
            stream = c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True)
            if not _next_turn(messages, *_streamed(list(stream))):
                break
    assert recorded(path) == expected_loop(fake_api)


async def test_async_create_tool_loop_is_recorded(fake_api: FakeAPI, patched_together: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    c = together.AsyncTogether(api_key="test", base_url=fake_api.openai_base_url, max_retries=0, timeout=5.0)
    async with Session(path):
        for _ in range(3):
            reply = await c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            message = reply.choices[0].message
            if not _next_turn(messages, message.content, _calls_of(message)):
                break
    await c.close()
    assert recorded(path) == expected_loop(fake_api)
