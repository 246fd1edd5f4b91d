"""``ststrace.instrument("anthropic")`` with the real ``anthropic`` client against
the local fake server: ``messages.create`` (streamed or not) and the
``messages.stream()`` helper, sync and async."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from anthropic.lib.streaming import (  # noqa: E402
    AsyncMessageStream,
    AsyncMessageStreamManager,
    MessageStream,
    MessageStreamManager,
)
from anthropic.types import Message  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session, llm, tool  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_decorators_helpers import trace_dir_files  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    ANTHROPIC_TOOLS,
    INPUTS,
    MODEL,
    PREAMBLE,
    REASONING_TOOLS,
    SYSTEM,
    TEXT_REPLY,
    TIME_RESULT,
    USER,
    WEATHER_RESULT,
    answer_reply,
    assistants,
    instrumented,
    new_trace,
    normalised,
    patched,
    recorded,
    tool_reply,
)
from fakeapi_fixtures import anthropic_client  # noqa: E402

__all__ = ["patched"]

REPLY = tool_reply("toolu_")


def kwargs(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        model=MODEL,
        max_tokens=1024,
        system=SYSTEM,
        messages=[{"role": "user", "content": USER}],
        tools=ANTHROPIC_TOOLS,
    )
    return {**base, **extra}


@dataclass
class Variant:
    name: str
    run: Callable[[Any], Any]


def _create(c: Any) -> Any:
    r = c.messages.create(**kwargs())
    assert type(r) is Message
    return r


def _create_stream_for(c: Any) -> Any:
    s = c.messages.create(**kwargs(stream=True))
    assert isinstance(s, anthropic.Stream)
    assert s.response.status_code == 200
    return [event for event in s]


def _create_stream_with_next(c: Any) -> Any:
    with c.messages.create(**kwargs(stream=True)) as s:
        first = next(s)
        return [first, *s]


def _helper_iterate(c: Any) -> Any:
    manager = c.messages.stream(**kwargs())
    assert isinstance(manager, MessageStreamManager)
    with manager as s:
        assert isinstance(s, MessageStream)
        events = [e for e in s]
        return [events, s.get_final_message()]


def _helper_text_stream(c: Any) -> Any:
    with c.messages.stream(**kwargs()) as s:
        return list(s.text_stream)


def _helper_final(c: Any) -> Any:
    with c.messages.stream(**kwargs()) as s:
        return s.get_final_message()


SYNC_VARIANTS = [
    Variant("create", _create),
    Variant("create-stream-for", _create_stream_for),
    Variant("create-stream-with-next", _create_stream_with_next),
    Variant("stream-helper-iterate", _helper_iterate),
    Variant("stream-helper-text_stream", _helper_text_stream),
    Variant("stream-helper-get_final_message", _helper_final),
]


async def _acreate(c: Any) -> Any:
    r = await c.messages.create(**kwargs())
    assert type(r) is Message
    return r


async def _acreate_stream_for(c: Any) -> Any:
    s = await c.messages.create(**kwargs(stream=True))
    assert isinstance(s, anthropic.AsyncStream)
    return [event async for event in s]


async def _acreate_stream_with_anext(c: Any) -> Any:
    async with await c.messages.create(**kwargs(stream=True)) as s:
        first = await s.__anext__()
        return [first, *[e async for e in s]]


async def _ahelper_iterate(c: Any) -> Any:
    manager = c.messages.stream(**kwargs())
    assert isinstance(manager, AsyncMessageStreamManager)
    async with manager as s:
        assert isinstance(s, AsyncMessageStream)
        events = [e async for e in s]
        return [events, await s.get_final_message()]


async def _ahelper_text_stream(c: Any) -> Any:
    async with c.messages.stream(**kwargs()) as s:
        return [text async for text in s.text_stream]


async def _ahelper_final(c: Any) -> Any:
    async with c.messages.stream(**kwargs()) as s:
        return await s.get_final_message()


ASYNC_VARIANTS = [
    Variant("create", _acreate),
    Variant("create-stream-for", _acreate_stream_for),
    Variant("create-stream-with-anext", _acreate_stream_with_anext),
    Variant("stream-helper-iterate", _ahelper_iterate),
    Variant("stream-helper-text_stream", _ahelper_text_stream),
    Variant("stream-helper-get_final_message", _ahelper_final),
]


def _same_request(a: Any, b: Any) -> None:
    assert (a.method, a.path) == (b.method, b.path)
    assert a.raw == b.raw, "instrumentation changed the request body"
    assert a.headers == b.headers, "instrumentation changed the request headers"


@pytest.mark.parametrize("variant", SYNC_VARIANTS, ids=lambda v: v.name)
def test_sync_call_is_recorded_and_unchanged(
    variant: Variant, anthropic_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    """System prompt, user turn and one assistant message (thinking as
    reasoning, text, both tool_use blocks with toolu_ ids); the caller sees the
    same objects and the server the same request as uninstrumented."""
    plain = normalised(variant.run(anthropic_sync))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("anthropic"):
        ststrace.instrument("anthropic")
        with Session(path):
            seen = normalised(variant.run(anthropic_sync))
    assert seen == plain
    _same_request(fake_api.last_request, plain_request)
    assert len(fake_api.requests) == 2
    assert recorded(path) == [*INPUTS, REPLY]


@pytest.mark.parametrize("variant", ASYNC_VARIANTS, ids=lambda v: v.name)
async def test_async_call_is_recorded_and_unchanged(
    variant: Variant, anthropic_async: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    plain = normalised(await variant.run(anthropic_async))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("anthropic"):
        ststrace.instrument("anthropic")
        async with Session(path):
            seen = normalised(await variant.run(anthropic_async))
    assert seen == plain
    _same_request(fake_api.last_request, plain_request)
    assert recorded(path) == [*INPUTS, REPLY]


def test_outside_a_session_nothing_is_recorded(anthropic_sync: Any, patched: None) -> None:
    for variant in SYNC_VARIANTS:
        variant.run(anthropic_sync)
    stream = anthropic_sync.messages.create(**kwargs(stream=True))
    assert type(stream) is anthropic.Stream
    stream.close()
    assert type(anthropic_sync.messages.stream(**kwargs())) is MessageStreamManager
    assert trace_dir_files() == []


async def test_async_outside_a_session_nothing_is_recorded(anthropic_async: Any, patched: None) -> None:
    for variant in ASYNC_VARIANTS:
        await variant.run(anthropic_async)
    stream = await anthropic_async.messages.create(**kwargs(stream=True))
    assert type(stream) is anthropic.AsyncStream
    await stream.close()
    assert trace_dir_files() == []


def test_stream_manager_never_entered_records_only_the_inputs(
    anthropic_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    """``messages.stream()`` sends nothing until ``with``; unentered, no reply is recorded."""
    path = new_trace(tmp_path)
    with Session(path):
        manager = anthropic_sync.messages.stream(**kwargs())
        del manager
        gc.collect()
    assert fake_api.requests == []
    assert assistants(recorded(path)) == []


def test_stream_entered_by_hand_records_the_reply(anthropic_sync: Any, patched: None, tmp_path: Path) -> None:
    """``stream = client.messages.stream(...).__enter__()``: the manager is
    garbage right away, the stream is read afterwards; the reply is recorded."""
    path = new_trace(tmp_path)
    with Session(path):
        stream = anthropic_sync.messages.stream(**kwargs()).__enter__()
        gc.collect()
        stream.get_final_message()
        stream.__exit__(None, None, None)
    assert recorded(path) == [*INPUTS, REPLY]


def test_call_inside_llm_function_is_recorded_once(anthropic_sync: Any, patched: None, tmp_path: Path) -> None:
    """``@llm`` records (its arguments are the conversation); the client call inside steps aside."""

    @llm
    def ask(system: str, messages: list[dict[str, Any]]) -> Any:
        return anthropic_sync.messages.create(**{**kwargs(), "system": system, "messages": messages})

    @llm
    def ask_text(messages: list[dict[str, Any]]) -> Any:
        with anthropic_sync.messages.stream(**{**kwargs(), "messages": messages, "tools": []}) as s:
            yield from s.text_stream

    path = new_trace(tmp_path)
    with Session(path):
        ask(system=SYSTEM, messages=[{"role": "user", "content": USER}])
        assert "".join(ask_text([{"role": "user", "content": USER}])) == TEXT_REPLY
    messages = recorded(path)
    assert messages[:2] == INPUTS
    assert [m["content"] for m in assistants(messages)] == [PREAMBLE, TEXT_REPLY]
    assert len(messages) == 4


async def test_async_call_inside_llm_function_is_recorded_once(
    anthropic_async: Any, patched: None, tmp_path: Path
) -> None:
    @llm
    async def ask(system: str, messages: list[dict[str, Any]]) -> Any:
        async with anthropic_async.messages.stream(**{**kwargs(), "system": system, "messages": messages}) as s:
            return await s.get_final_message()

    path = new_trace(tmp_path)
    async with Session(path):
        await ask(system=SYSTEM, messages=[{"role": "user", "content": USER}])
    assert recorded(path) == [*INPUTS, REPLY]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("how", ["create", "create-stream", "stream-helper"])
def test_api_error_propagates_unchanged(
    status: int, how: str, anthropic_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    """HTTP errors raise the client's own exception class, unchanged; no
    assistant message is recorded."""

    def call() -> None:
        if how == "create":
            anthropic_sync.messages.create(**kwargs())
        elif how == "create-stream":
            list(anthropic_sync.messages.create(**kwargs(stream=True)))
        else:
            with anthropic_sync.messages.stream(**kwargs()) as s:
                s.get_final_message()

    fake_api.fail_next(status)
    with pytest.raises(anthropic.APIStatusError) as plain:
        call()
    path = new_trace(tmp_path)
    with instrumented("anthropic"):
        with Session(path):
            fake_api.fail_next(status)
            with pytest.raises(anthropic.APIStatusError) as traced:
                call()
            gc.collect()
    assert type(traced.value) is type(plain.value)
    assert traced.value.status_code == status
    assert normalised(traced.value.body) == normalised(plain.value.body)
    assert assistants(recorded(path)) == []


async def test_async_api_error_propagates_unchanged(
    anthropic_async: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    async with Session(path):
        fake_api.fail_next(500)
        with pytest.raises(anthropic.InternalServerError):
            await anthropic_async.messages.create(**kwargs())
        fake_api.fail_next(400)
        with pytest.raises(anthropic.BadRequestError):
            async with anthropic_async.messages.stream(**kwargs()) as s:
                await s.get_final_message()
    assert assistants(recorded(path)) == []


# message_start, ping, thinking start, 10 thinking deltas, signature, thinking
# stop, text start: 16 events; 3 more are 3 text deltas ("Let me look ").
CUT_AFTER = 19
PARTIAL = {"role": "assistant", "content": "Let me look ", "reasoningContent": REASONING_TOOLS, "model": MODEL}


@pytest.mark.parametrize("how", ["create-stream", "stream-helper"])
def test_dropped_stream_raises_the_clients_error_and_records_what_arrived(
    how: str, anthropic_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    def call() -> None:
        if how == "create-stream":
            for _ in anthropic_sync.messages.create(**kwargs(stream=True)):
                pass
        else:
            with anthropic_sync.messages.stream(**kwargs()) as s:
                for _ in s:
                    pass

    fake_api.drop_next_stream(CUT_AFTER)
    with pytest.raises(Exception) as plain:
        call()
    path = new_trace(tmp_path)
    with instrumented("anthropic"):
        with Session(path):
            fake_api.drop_next_stream(CUT_AFTER)
            with pytest.raises(Exception) as traced:
                call()
    assert type(traced.value) is type(plain.value)
    assert str(traced.value) == str(plain.value)
    assert recorded(path) == [*INPUTS, PARTIAL]


async def test_async_dropped_stream_records_what_arrived(
    anthropic_async: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    async with Session(path):
        fake_api.drop_next_stream(CUT_AFTER)
        with pytest.raises(Exception, match="incomplete chunked read"):
            async with anthropic_async.messages.stream(**kwargs()) as s:
                async for _ in s:
                    pass
    assert recorded(path) == [*INPUTS, PARTIAL]


# with_raw_response / with_streaming_response: tests/integrations/test_instrument_raw.py


def test_opentelemetry_tracing_of_the_client_does_not_interfere(fake_api: FakeAPI, tmp_path: Path) -> None:
    """anthropic's own OpenTelemetry spans (on, with content) and ststrace coexist."""
    client = anthropic_client(fake_api, open_telemetry={"traces": {"enabled": True, "content_mode": "content"}})
    path = new_trace(tmp_path)
    with instrumented("anthropic"):
        with Session(path):
            _create(client)
        with Session(new_trace(tmp_path)) as second:
            _helper_iterate(client)
    client.close()
    assert recorded(path) == [*INPUTS, REPLY]
    assert recorded(second.path) == [*INPUTS, REPLY]


# --------------------------------------------------------------------------- tool loops


@tool
def get_weather(city: str) -> str:
    return WEATHER_RESULT if city == "Paris" else "unknown"


@tool
def get_time(tz: str) -> str:
    return TIME_RESULT if tz == "Europe/Paris" else "unknown"


TOOLS = {"get_weather": get_weather, "get_time": get_time}


def _next_turn(messages: list[dict[str, Any]], reply: Any) -> bool:
    """Append the reply and the tool results; False when the model answered."""
    if reply.stop_reason != "tool_use":
        return False
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": TOOLS[b.name](**b.input)}
                for b in reply.content
                if b.type == "tool_use"
            ],
        }
    )
    return True


def expected_loop(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        *INPUTS,
        REPLY,
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "toolu_weather01"},
        {"role": "tool", "content": TIME_RESULT, "toolCallId": "toolu_time02"},
        answer_reply(api),
    ]


def test_tool_loop_trace_is_valid_and_paired(
    anthropic_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    messages: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    with Session(path):
        for _ in range(4):
            reply = anthropic_sync.messages.create(**{**kwargs(), "messages": messages})
            if not _next_turn(messages, reply):
                break
    assert reply.content[-1].text == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == expected_loop(fake_api)


async def test_async_streamed_tool_loop_trace_is_valid_and_paired(
    anthropic_async: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    messages: list[dict[str, Any]] = [{"role": "user", "content": USER}]
    async with Session(path):
        for _ in range(4):
            async with anthropic_async.messages.stream(**{**kwargs(), "messages": messages}) as s:
                reply = await s.get_final_message()
            if not _next_turn(messages, reply):
                break
    assert recorded(path) == expected_loop(fake_api)
