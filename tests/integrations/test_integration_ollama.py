"""``ststrace.instrument("ollama")`` with the real ``ollama`` client against the
fake server's ``/api/chat`` (JSON and NDJSON): ``Client.chat``,
``AsyncClient.chat`` and the module-level ``ollama.chat``, streamed or not.

The protocol has no tool-call ids: the recorded calls get generated ones, and
the results (``role: "tool"`` with ``tool_name``) are paired with them by name
and order."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ollama = pytest.importorskip("ollama")

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
    TIME_ARGS,
    TIME_RESULT,
    USER,
    WEATHER_ARGS,
    WEATHER_RESULT,
    chat_messages,
    instrumented,
    new_trace,
    recorded,
)

MODEL = "llama3.2"
RESULTS = {"get_weather": WEATHER_RESULT, "get_time": TIME_RESULT}
_ID = re.compile(r"call_[0-9a-f]{24}")


@pytest.fixture
def patched_ollama() -> Iterator[None]:
    with instrumented("ollama"):
        yield


def expected_loop(api: FakeAPI, ids: list[str], reasoning: bool = True) -> list[dict[str, Any]]:
    ask: dict[str, Any] = {"role": "assistant", "content": PREAMBLE}
    answer: dict[str, Any] = {"role": "assistant", "content": api.answer_for([WEATHER_RESULT, TIME_RESULT])}
    if reasoning:
        ask["reasoningContent"] = REASONING_TOOLS
        answer["reasoningContent"] = REASONING_ANSWER
    ask["toolCalls"] = [
        {"id": ids[0], "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
        {"id": ids[1], "function": {"name": "get_time", "arguments": TIME_ARGS}},
    ]
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {**ask, "model": MODEL},
        {"role": "tool", "toolCallId": ids[0], "content": WEATHER_RESULT},
        {"role": "tool", "toolCallId": ids[1], "content": TIME_RESULT},
        {**answer, "model": MODEL},
    ]


def generated_ids(messages: list[dict[str, Any]]) -> list[str]:
    ids = [c["id"] for m in messages for c in m.get("toolCalls", [])]
    assert len(ids) == 2 and all(_ID.fullmatch(i) for i in ids) and ids[0] != ids[1], ids
    return ids


def _next_turn(messages: list[Any], message: Any) -> bool:
    """Ollama's own loop: append the reply's message, then one ``tool`` message per call."""
    messages.append(message)
    for call in message.tool_calls or []:
        messages.append({"role": "tool", "content": RESULTS[call.function.name], "tool_name": call.function.name})
    return bool(message.tool_calls)


def _merged(chunks: list[Any]) -> Any:
    """The message a streamed reply adds up to, as the caller builds it."""
    calls = [c for ch in chunks for c in (ch.message.tool_calls or [])]
    return ollama.Message(
        role="assistant",
        content="".join(ch.message.content or "" for ch in chunks),
        tool_calls=calls or None,
    )


def client(api: FakeAPI) -> Any:
    return ollama.Client(host=api.ollama_base_url, timeout=5.0)


def test_sync_tool_loop_records_generated_ids_paired_by_name(
    fake_api: FakeAPI, patched_ollama: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    c = client(fake_api)
    with Session(path):
        for _ in range(3):
            reply = c.chat(MODEL, messages, tools=CHAT_TOOLS, think=True)
            assert type(reply) is ollama.ChatResponse
            if not _next_turn(messages, reply.message):
                break
    assert reply.message.content == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    got = recorded(path)
    assert got == expected_loop(fake_api, generated_ids(got))
    assert fake_api.requests[0].path == "/api/chat" and fake_api.requests[0].body["stream"] is False


def test_usage_from_eval_counts(fake_api: FakeAPI, patched_ollama: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with Session(path):
        reply = client(fake_api).chat(model=MODEL, messages=chat_messages())
    [assistant] = [m for m in valid_messages(path) if m["role"] == "assistant"]
    assert reply.prompt_eval_count and reply.eval_count
    assert assistant["usage"] == {
        "input": reply.prompt_eval_count,
        "output": reply.eval_count,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": reply.prompt_eval_count + reply.eval_count,
    }
    # No thinking unless asked for, as the real server does.
    assert "reasoningContent" not in assistant and assistant["content"] == "Hello from the fake API."


def test_stream_tool_loop_is_recorded_and_chunks_unchanged(
    fake_api: FakeAPI, patched_ollama: None, tmp_path: Path
) -> None:
    c = client(fake_api)
    plain = [ch.model_dump() for ch in c.chat(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS, stream=True)]
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    with Session(path):
        for _ in range(3):
            chunks = list(c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True, think=True))
            if len(messages) == 2:
                assert [ch.model_dump() for ch in chunks if not ch.message.thinking] == plain
            if not _next_turn(messages, _merged(chunks)):
                break
    got = recorded(path)
    assert got == expected_loop(fake_api, generated_ids(got))
    usage = [m["usage"] for m in valid_messages(path) if m["role"] == "assistant"]
    # From each stream's last chunk (prompt_eval_count / eval_count).
    assert len(usage) == 2 and all(u["input"] > 0 and u["output"] > 0 for u in usage)
    assert all(r.body["stream"] is True for r in fake_api.requests)


async def test_async_stream_tool_loop_is_recorded(fake_api: FakeAPI, patched_ollama: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    c = ollama.AsyncClient(host=fake_api.ollama_base_url, timeout=5.0)
    async with Session(path):
        for _ in range(3):
            stream = await c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True, think=True)
            if not _next_turn(messages, _merged([ch async for ch in stream])):
                break
    got = recorded(path)
    assert got == expected_loop(fake_api, generated_ids(got))


async def test_async_chat_is_recorded(fake_api: FakeAPI, patched_ollama: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    c = ollama.AsyncClient(host=fake_api.ollama_base_url, timeout=5.0)
    async with Session(path):
        for _ in range(3):
            reply = await c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            if not _next_turn(messages, reply.message):
                break
    got = recorded(path)
    assert got == expected_loop(fake_api, generated_ids(got), reasoning=False)


def test_module_level_chat_is_recorded(fake_api: FakeAPI, patched_ollama: None, tmp_path: Path) -> None:
    """``ollama.chat`` is bound to a default client at import: patched on its own."""
    default = ollama.chat.__self__._client
    before = default.base_url
    default.base_url = fake_api.ollama_base_url
    path = new_trace(tmp_path)
    try:
        with Session(path):
            reply = ollama.chat(model=MODEL, messages=[{"role": "user", "content": USER}])
    finally:
        default.base_url = before
    assert recorded(path) == [
        {"role": "user", "content": USER},
        {"role": "assistant", "content": reply.message.content, "model": MODEL},
    ]


def test_results_without_tool_name_pair_in_order(fake_api: FakeAPI, patched_ollama: None, tmp_path: Path) -> None:
    """Older loops send results with neither id nor name: they answer the
    calls still waiting, oldest first."""
    path = new_trace(tmp_path)
    messages: list[Any] = chat_messages()
    c = client(fake_api)
    with Session(path):
        reply = c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS)
        messages.append(reply.message)
        for call in reply.message.tool_calls:
            messages.append({"role": "tool", "content": RESULTS[call.function.name]})
        c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS)
    got = recorded(path)
    assert got == expected_loop(fake_api, generated_ids(got), reasoning=False)


def test_server_error_propagates_unchanged(fake_api: FakeAPI, patched_ollama: None, tmp_path: Path) -> None:
    fake_api.fail_next(404, "model 'llama3.2' not found")
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(ollama.ResponseError, match="not found"):
            client(fake_api).chat(model=MODEL, messages=chat_messages())
    assert recorded(path) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def test_instrument_without_names_covers_ollama() -> None:
    try:
        assert "ollama" in ststrace.instrument()
        assert "ollama" in _instrument.instrumented()
    finally:
        ststrace.uninstrument()
