"""``@llm`` around the real client libraries talking to the local fake API
(127.0.0.1 only): agent loops that use nothing but the decorators, and streamed
replies recorded exactly like the same reply non-streamed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")
pytest.importorskip("huggingface_hub")

from fakeapi_fixtures import (  # noqa: E402  (pytest fixtures, used by name)
    anthropic_async,
    anthropic_sync,
    fake_api,
    hf_sync,
    no_external_network,
    openai_async,
    openai_sync,
)

from ststrace import Session, llm, tool  # noqa: E402
from test_decorators_helpers import assert_paired, tool_results, valid_messages  # noqa: E402

__all__ = [
    "anthropic_async",
    "anthropic_sync",
    "fake_api",
    "hf_sync",
    "no_external_network",
    "openai_async",
    "openai_sync",
]

SYSTEM = "You are terse."
QUESTION = "Weather and time in Paris?"
SCHEMAS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "get_time": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
}
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in SCHEMAS.items()]
RESPONSES_TOOLS = [{"type": "function", "name": n, "parameters": p} for n, p in SCHEMAS.items()]
ANTHROPIC_TOOLS = [{"name": n, "input_schema": p} for n, p in SCHEMAS.items()]


@tool
def get_weather(city: str) -> str:
    return f"sunny in {city}"


@tool
def get_time(tz: str) -> str:
    return f"noon in {tz}"


TOOLS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "get_time": get_time}
FINAL = "Here is what I found: sunny in Paris; noon in Europe/Paris"


def check_loop_trace(path: Path, model: str | None = "fake-model") -> list[dict[str, Any]]:
    """system, user, assistant with two calls, two paired results, final answer -- each once."""
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert msgs[0]["content"] == SYSTEM and msgs[1]["content"] == QUESTION
    calls = msgs[2]["toolCalls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Paris"}, {"tz": "Europe/Paris"}]
    assert [m["toolCallId"] for m in tool_results(msgs)] == [c["id"] for c in calls]
    assert msgs[2]["reasoningContent"] == "I should call get_weather and get_time."
    assert msgs[5]["content"] == FINAL
    if model is not None:
        assert msgs[2]["model"] == model
    return msgs


def test_openai_chat_agent_loop(openai_sync: Any, tmp_path: Path) -> None:
    @llm
    def chat(messages: list[dict[str, Any]]) -> Any:
        return openai_sync.chat.completions.create(model="fake-model", messages=messages, tools=CHAT_TOOLS)

    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    path = tmp_path / "t.jsonl"
    with Session(path):
        for _ in range(3):
            msg = chat(messages=messages).choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                break
            for tc in msg.tool_calls:
                out = TOOLS[tc.function.name](**json.loads(tc.function.arguments))
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": out})
    msgs = check_loop_trace(path)
    assert [c["id"] for c in msgs[2]["toolCalls"]] == ["call_weather01", "call_time02"]


async def test_openai_chat_async_loop(openai_async: Any, tmp_path: Path) -> None:
    @llm
    async def chat(messages: list[dict[str, Any]]) -> Any:
        return await openai_async.chat.completions.create(model="fake-model", messages=messages, tools=CHAT_TOOLS)

    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    path = tmp_path / "t.jsonl"
    async with Session(path):
        for _ in range(3):
            msg = (await chat(messages=messages)).choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                break
            for tc in msg.tool_calls:
                out = TOOLS[tc.function.name](**json.loads(tc.function.arguments))
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": out})
    check_loop_trace(path)


def test_anthropic_agent_loop(anthropic_sync: Any, tmp_path: Path) -> None:
    """Anthropic form: system=, tool_use blocks, tool_result blocks in the next user turn."""

    @llm
    def chat(messages: list[dict[str, Any]], system: str) -> Any:
        return anthropic_sync.messages.create(
            model="fake-model", max_tokens=256, system=system, messages=messages, tools=ANTHROPIC_TOOLS
        )

    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    path = tmp_path / "t.jsonl"
    with Session(path):
        for _ in range(3):
            reply = chat(messages=messages, system=SYSTEM)
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                break
            results = [
                {"type": "tool_result", "tool_use_id": b.id, "content": TOOLS[b.name](**b.input)} for b in uses
            ]
            messages.append({"role": "user", "content": results})
    msgs = check_loop_trace(path)
    assert [c["id"] for c in msgs[2]["toolCalls"]] == ["toolu_weather01", "toolu_time02"]


def test_openai_responses_agent_loop(openai_sync: Any, tmp_path: Path) -> None:
    """Responses form: instructions=, input items, function_call / function_call_output."""

    @llm
    def respond(input: list[Any], instructions: str) -> Any:
        return openai_sync.responses.create(
            model="fake-model", instructions=instructions, input=input, tools=RESPONSES_TOOLS
        )

    items: list[Any] = [{"role": "user", "content": QUESTION}]
    path = tmp_path / "t.jsonl"
    with Session(path):
        for _ in range(3):
            resp = respond(input=items, instructions=SYSTEM)
            calls = [o for o in resp.output if o.type == "function_call"]
            items.extend(o.model_dump(exclude_none=True) for o in resp.output)
            if not calls:
                break
            for c in calls:
                out = TOOLS[c.name](**json.loads(c.arguments))
                items.append({"type": "function_call_output", "call_id": c.call_id, "output": out})
    msgs = check_loop_trace(path)
    assert [c["id"] for c in msgs[2]["toolCalls"]] == ["call_weather01", "call_time02"]


def test_huggingface_agent_loop(hf_sync: Any, fake_api: Any, tmp_path: Path) -> None:
    fake_api.chat_reasoning_field = "reasoning"  # as huggingface_hub's types name it

    @llm
    def chat(messages: list[dict[str, Any]]) -> Any:
        return hf_sync.chat_completion(messages=messages, tools=CHAT_TOOLS, model="fake-model")

    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    path = tmp_path / "t.jsonl"
    with Session(path):
        for _ in range(3):
            msg = chat(messages=messages).choices[0].message
            calls = msg.tool_calls or []
            messages.append(
                {
                    "role": "assistant",
                    "content": msg.content or "",
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                        for c in calls
                    ],
                }
            )
            if not calls:
                break
            for c in calls:
                args = c.function.arguments
                out = TOOLS[c.function.name](**(json.loads(args) if isinstance(args, str) else args))
                messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
    check_loop_trace(path)


# -- streamed replies record exactly what the non-streamed reply records -----------


def recorded_reply(path: Path) -> dict[str, Any]:
    msgs = valid_messages(path)
    replies = [m for m in msgs if m["role"] == "assistant"]
    assert len(replies) == 1
    # Usage is left out: a stream reports it only when asked (tests/core/test_usage.py);
    # so are tool schemas: an @llm function sees only its own arguments'
    # tools= (tests/core/test_tool_schemas.py).
    return {k: v for k, v in replies[0].items() if k not in ("timestamp", "usage", "tools")}


def first_turn(path: Path, call: Any, consume: Any) -> dict[str, Any]:
    """Run one model call (and both tools), check pairing, return the recorded reply."""
    with Session(path):
        consume(call())
        get_weather("Paris")
        get_time("Europe/Paris")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert [m["role"] for m in msgs][-3:] == ["assistant", "tool", "tool"]
    assert len(tool_results(msgs)) == 2
    return recorded_reply(path)


def drain(stream: Any) -> None:
    for _ in stream:
        pass


def keep(_: Any) -> None:
    pass


CHAT_MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]


def test_openai_chat_stream_equals_non_streamed(openai_sync: Any, tmp_path: Path) -> None:
    @llm
    def chat(messages: Any, stream: bool = False) -> Any:
        return openai_sync.chat.completions.create(model="fake-model", messages=messages, tools=CHAT_TOOLS, stream=stream)

    plain = first_turn(tmp_path / "a.jsonl", lambda: chat(messages=CHAT_MESSAGES), keep)
    streamed = first_turn(tmp_path / "b.jsonl", lambda: chat(messages=CHAT_MESSAGES, stream=True), drain)
    assert streamed == plain
    assert plain["content"] == "Let me look that up."


def test_openai_chat_stream_with_block_and_close(openai_sync: Any, tmp_path: Path) -> None:
    """The proxy still works as a context manager and keeps the stream's attributes."""

    @llm
    def chat(messages: Any) -> Any:
        return openai_sync.chat.completions.create(model="fake-model", messages=messages, tools=CHAT_TOOLS, stream=True)

    def consume(stream: Any) -> None:
        assert hasattr(stream, "response")
        with stream as s:
            for _ in s:
                pass

    got = first_turn(tmp_path / "b.jsonl", lambda: chat(messages=CHAT_MESSAGES), consume)
    assert [c["id"] for c in got["toolCalls"]] == ["call_weather01", "call_time02"]
    assert got["content"] == "Let me look that up."


async def test_openai_async_chat_stream_equals_non_streamed(openai_async: Any, tmp_path: Path) -> None:
    @llm
    async def chat(messages: Any, stream: bool = False) -> Any:
        return await openai_async.chat.completions.create(
            model="fake-model", messages=messages, tools=CHAT_TOOLS, stream=stream
        )

    async def run(path: Path, stream: bool) -> dict[str, Any]:
        async with Session(path):
            out = await chat(messages=CHAT_MESSAGES, stream=stream)
            if stream:
                async for _ in out:
                    pass
            get_weather("Paris")
            get_time("Europe/Paris")
        msgs = valid_messages(path)
        assert_paired(msgs)
        assert len(msgs) == 5
        return recorded_reply(path)

    assert await run(tmp_path / "b.jsonl", True) == await run(tmp_path / "a.jsonl", False)


def test_openai_responses_stream_equals_non_streamed(openai_sync: Any, tmp_path: Path) -> None:
    @llm
    def respond(input: Any, stream: bool = False) -> Any:
        return openai_sync.responses.create(model="fake-model", input=input, tools=RESPONSES_TOOLS, stream=stream)

    items = [{"role": "user", "content": QUESTION}]
    plain = first_turn(tmp_path / "a.jsonl", lambda: respond(input=items), keep)
    streamed = first_turn(tmp_path / "b.jsonl", lambda: respond(input=items, stream=True), drain)
    assert streamed == plain


def test_anthropic_stream_equals_non_streamed(anthropic_sync: Any, tmp_path: Path) -> None:
    @llm
    def chat(messages: Any, stream: bool = False) -> Any:
        return anthropic_sync.messages.create(
            model="fake-model", max_tokens=256, messages=messages, tools=ANTHROPIC_TOOLS, stream=stream
        )

    msgs = [{"role": "user", "content": QUESTION}]
    plain = first_turn(tmp_path / "a.jsonl", lambda: chat(messages=msgs), keep)
    streamed = first_turn(tmp_path / "b.jsonl", lambda: chat(messages=msgs, stream=True), drain)
    assert streamed == plain
    assert [c["id"] for c in plain["toolCalls"]] == ["toolu_weather01", "toolu_time02"]


def test_anthropic_message_stream_manager(anthropic_sync: Any, tmp_path: Path) -> None:
    """``messages.stream()`` returns a manager; the helper methods still work through the proxy."""

    @llm
    def chat(messages: Any) -> Any:
        return anthropic_sync.messages.stream(model="fake-model", max_tokens=256, messages=messages, tools=ANTHROPIC_TOOLS)

    msgs = [{"role": "user", "content": QUESTION}]
    plain = first_turn(
        tmp_path / "a.jsonl",
        lambda: llm(anthropic_sync.messages.create)(model="fake-model", max_tokens=256, messages=msgs, tools=ANTHROPIC_TOOLS),
        keep,
    )

    final: list[Any] = []

    def consume(manager: Any) -> None:
        with manager as stream:
            final.append(stream.get_final_message())

    streamed = first_turn(tmp_path / "b.jsonl", lambda: chat(messages=msgs), consume)
    assert final[0].content[-1].type == "tool_use"
    assert streamed == plain


def test_huggingface_stream_equals_non_streamed(hf_sync: Any, tmp_path: Path) -> None:
    @llm
    def chat(messages: Any, stream: bool = False) -> Any:
        return hf_sync.chat_completion(messages=messages, tools=CHAT_TOOLS, model="fake-model", stream=stream)

    plain = first_turn(tmp_path / "a.jsonl", lambda: chat(messages=CHAT_MESSAGES), keep)
    streamed = first_turn(tmp_path / "b.jsonl", lambda: chat(messages=CHAT_MESSAGES, stream=True), drain)
    assert streamed == plain


def test_stream_dropped_mid_way_records_what_arrived(openai_sync: Any, fake_api: Any, tmp_path: Path) -> None:
    """The server drops the connection after a few events: the error reaches the caller and
    the partial reply is recorded once."""

    @llm
    def chat(messages: Any) -> Any:
        return openai_sync.chat.completions.create(model="fake-model", messages=messages, stream=True)

    fake_api.drop_next_stream(after_events=3)
    path = tmp_path / "t.jsonl"
    with Session(path):
        stream = chat(messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(Exception):
            drain(stream)
    msgs = valid_messages(path)
    assert [m["role"] for m in msgs] == ["user", "assistant"]


# -- @llm around an instrumented client records each reply once ------------------


def test_llm_around_an_instrumented_client_records_once(openai_sync: Any, tmp_path: Path) -> None:
    """Sync and generator @llm functions calling an instrumented client: one
    assistant message per call, not two."""
    from test_instrument_helpers import instrumented

    @llm
    def sync_chat(messages: Any) -> Any:
        return openai_sync.chat.completions.create(model="fake-model", messages=messages)

    @llm
    def gen_chat(messages: Any) -> Any:
        yield from openai_sync.chat.completions.create(model="fake-model", messages=messages, stream=True)

    messages = [{"role": "user", "content": "hi"}]
    path = tmp_path / "t.jsonl"
    with instrumented("openai"):
        with Session(path):
            sync_chat(messages=messages)
            list(gen_chat(messages=messages))
            openai_sync.chat.completions.create(model="fake-model", messages=messages)  # instrumented alone
    msgs = valid_messages(path)
    assert [m["role"] for m in msgs] == ["user", "assistant", "assistant", "assistant"]
    assert {m["content"] for m in msgs if m["role"] == "assistant"} == {"Hello from the fake API."}


async def test_async_llm_around_an_instrumented_client_records_once(openai_async: Any, tmp_path: Path) -> None:
    from test_instrument_helpers import instrumented

    @llm
    async def async_chat(messages: Any) -> Any:
        return await openai_async.chat.completions.create(model="fake-model", messages=messages)

    @llm
    async def agen_chat(messages: Any) -> Any:
        stream = await openai_async.chat.completions.create(model="fake-model", messages=messages, stream=True)
        async for chunk in stream:
            yield chunk

    messages = [{"role": "user", "content": "hi"}]
    path = tmp_path / "t.jsonl"
    with instrumented("openai"):
        async with Session(path):
            await async_chat(messages=messages)
            [c async for c in agen_chat(messages=messages)]
    msgs = valid_messages(path)
    assert [m["role"] for m in msgs] == ["user", "assistant", "assistant"]
    assert all(m["content"] == "Hello from the fake API." for m in msgs[1:])
