"""``ststrace.instrument("groq")`` (and the other Stainless SDKs of OpenAI-shaped
APIs: cerebras-cloud-sdk) with the real client against the fake server's
OpenAI-compatible route: ``chat.completions.create``, sync, async and streamed,
recorded by the same code as openai's Chat Completions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

groq = pytest.importorskip("groq")

import ststrace  # noqa: E402
from ststrace import _instrument  # noqa: E402
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
from test_decorators_helpers import valid_messages  # noqa: E402

MODEL = "llama-test"
RESULTS = {"get_weather": WEATHER_RESULT, "get_time": TIME_RESULT}


def expected_loop(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        tool_reply(model=MODEL),
        {"role": "tool", "toolCallId": "call_weather01", "content": WEATHER_RESULT},
        {"role": "tool", "toolCallId": "call_time02", "content": TIME_RESULT},
        answer_reply(api, model=MODEL),
    ]


def _next_turn(messages: list[dict[str, Any]], message: Any) -> bool:
    """Append the assistant turn and run its tools; False once it is the final answer."""
    calls = message.tool_calls or []
    messages.append(
        {
            "role": "assistant",
            "content": message.content,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in calls
            ],
        }
        if calls
        else {"role": "assistant", "content": message.content}
    )
    for c in calls:
        messages.append({"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.function.name]})
    return bool(calls)


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


class _Delta:
    """The message a streamed reply adds up to, shaped like ``choices[0].message``
    (cerebras builds its delta objects loosely, some as dicts)."""

    def __init__(self, chunks: list[Any]) -> None:
        deltas = [_get(c.choices[0], "delta") for c in chunks if c.choices]
        self.content = "".join(_get(d, "content") or "" for d in deltas)
        by_index: dict[int, Any] = {}
        for d in deltas:
            for call in _get(d, "tool_calls") or []:
                entry = by_index.setdefault(_get(call, "index"), {"id": None, "name": "", "arguments": ""})
                entry["id"] = entry["id"] or _get(call, "id")
                entry["name"] += _get(_get(call, "function"), "name") or ""
                entry["arguments"] += _get(_get(call, "function"), "arguments") or ""
        self.tool_calls = [_Call(e) for e in by_index.values()]


class _Call:
    def __init__(self, entry: dict[str, Any]) -> None:
        self.id = entry["id"]
        self.function = type("F", (), {"name": entry["name"], "arguments": entry["arguments"]})()


def client(api: FakeAPI) -> Any:
    return groq.Groq(base_url=api.url, api_key="test", max_retries=0, timeout=5.0, _strict_response_validation=True)


def async_client(api: FakeAPI) -> Any:
    return groq.AsyncGroq(base_url=api.url, api_key="test", max_retries=0, timeout=5.0, _strict_response_validation=True)


@pytest.fixture
def patched_groq() -> Any:
    with instrumented("groq"):
        yield


def test_sync_tool_loop_is_recorded_with_groq_ids(fake_api: FakeAPI, patched_groq: None, tmp_path: Path) -> None:
    """The system and user prompts once, the tool-asking reply with the provider's
    ids and reasoning, both results paired by id, the final answer."""
    path = new_trace(tmp_path)
    messages = chat_messages()
    with client(fake_api) as c, Session(path):
        for _ in range(3):
            reply = c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            assert type(reply).__module__.startswith("groq.")
            if not _next_turn(messages, reply.choices[0].message):
                break
    assert reply.choices[0].message.content == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == expected_loop(fake_api)
    # The path is groq's own: /openai/v1/chat/completions.
    assert fake_api.requests[0].path == "/openai/v1/chat/completions"


def test_usage_is_recorded(fake_api: FakeAPI, patched_groq: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with client(fake_api) as c, Session(path):
        reply = c.chat.completions.create(model=MODEL, messages=chat_messages())
    usage = reply.usage
    [assistant] = [m for m in valid_messages(path) if m["role"] == "assistant"]
    assert assistant["usage"] == {
        "input": usage.prompt_tokens,
        "output": usage.completion_tokens,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": usage.total_tokens,
        "reasoning": usage.completion_tokens_details.reasoning_tokens,
    }


async def test_async_tool_loop_is_recorded(fake_api: FakeAPI, patched_groq: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages = chat_messages()
    async with async_client(fake_api) as c:
        async with Session(path):
            for _ in range(3):
                reply = await c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
                if not _next_turn(messages, reply.choices[0].message):
                    break
    assert recorded(path) == expected_loop(fake_api)


def test_stream_tool_loop_is_recorded_and_chunks_unchanged(
    fake_api: FakeAPI, patched_groq: None, tmp_path: Path
) -> None:
    """A streamed reply is recorded once exhausted; the caller sees groq's own
    ``Stream`` and the same chunks as without instrumentation."""
    with client(fake_api) as c:
        plain = [ch.model_dump() for ch in c.chat.completions.create(model=MODEL, messages=chat_messages(), stream=True)]
    path = new_trace(tmp_path)
    messages = chat_messages()
    with client(fake_api) as c, Session(path):
        seen = [ch.model_dump() for ch in c.chat.completions.create(model=MODEL, messages=chat_messages(), stream=True)]
        for _ in range(3):
            stream = c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True)
            assert isinstance(stream, groq.Stream)
            if not _next_turn(messages, _Delta(list(stream))):
                break
    strip_ids = [{k: v for k, v in ch.items() if k != "id"} for ch in plain]
    assert [{k: v for k, v in ch.items() if k != "id"} for ch in seen] == strip_ids
    got = recorded(path)
    assert got[2]["content"] == "Hello from the fake API."
    assert got[:2] + got[3:] == expected_loop(fake_api)


async def test_async_stream_is_recorded(fake_api: FakeAPI, patched_groq: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages = chat_messages()
    async with async_client(fake_api) as c:
        async with Session(path):
            for _ in range(3):
                stream = await c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True)
                assert isinstance(stream, groq.AsyncStream)
                if not _next_turn(messages, _Delta([ch async for ch in stream])):
                    break
    assert recorded(path) == expected_loop(fake_api)


def test_outside_a_session_nothing_changes(fake_api: FakeAPI, patched_groq: None, tmp_path: Path) -> None:
    with client(fake_api) as c:
        reply = c.chat.completions.create(model=MODEL, messages=chat_messages())
    assert reply.choices[0].message.content == "Hello from the fake API."


def test_api_error_propagates_unchanged(fake_api: FakeAPI, patched_groq: None, tmp_path: Path) -> None:
    fake_api.fail_next(429)
    path = new_trace(tmp_path)
    with client(fake_api) as c, Session(path):
        with pytest.raises(groq.RateLimitError):
            c.chat.completions.create(model=MODEL, messages=chat_messages())
    assert recorded(path) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]


def test_instrument_without_names_patches_groq_when_imported() -> None:
    """``instrument()`` covers groq (already imported here) with the rest."""
    try:
        assert "groq" in ststrace.instrument()
        assert "groq" in _instrument.instrumented()
    finally:
        ststrace.uninstrument()


def test_cerebras_is_recorded_by_the_same_code(fake_api: FakeAPI, tmp_path: Path) -> None:
    """cerebras-cloud-sdk, another Stainless SDK, through the shared targets."""
    sdk = pytest.importorskip("cerebras.cloud.sdk")
    path = new_trace(tmp_path)
    messages = chat_messages()
    with instrumented("cerebras"):
        c = sdk.Cerebras(base_url=fake_api.url, api_key="test", max_retries=0, timeout=5.0, warm_tcp_connection=False)
        with Session(path):
            for _ in range(3):
                stream = c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True)
                if not _next_turn(messages, _Delta(list(stream))):
                    break
        c.close()
    assert fake_api.requests[0].path == "/v1/chat/completions"
    assert json.loads(fake_api.requests[0].raw)["model"] == MODEL
    assert recorded(path) == expected_loop(fake_api)


def test_stream_usage_from_x_groq() -> None:
    """Groq's final stream chunk carries the usage in ``x_groq.usage`` (without
    ``stream_options``): the streamed reply's usage comes from there."""
    from groq.types.chat import ChatCompletionChunk

    from ststrace._adapters import accumulate

    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    chunks = [
        ChatCompletionChunk(**base, choices=[{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]),
        ChatCompletionChunk(
            **base,
            choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}],
            x_groq={"id": "req_1", "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}},
        ),
    ]
    assert accumulate(chunks, usage=True) == {
        "role": "assistant",
        "content": "Hi",
        "model": MODEL,
        "usage": {"input": 12, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15},
    }
