"""``ststrace.instrument("openai")`` with the real ``openai`` client against the
local fake server: Chat Completions (``create`` streamed or not, the
``stream()`` helper) and the Responses API, sync and async."""

from __future__ import annotations

import gc
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

from openai.lib.streaming.chat import AsyncChatCompletionStream, ChatCompletionStream  # noqa: E402
from openai.types.chat import ChatCompletion, ParsedChatCompletion  # noqa: E402
from openai.types.responses import Response  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session, llm, tool  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedReply  # noqa: E402
from test_decorators_helpers import trace_dir_files  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    CHAT_TOOLS,
    INPUTS,
    MODEL,
    PREAMBLE,
    REASONING_TOOLS,
    RESPONSES_TOOLS,
    SYSTEM,
    TEXT_REPLY,
    TIME_RESULT,
    USER,
    WEATHER_RESULT,
    answer_reply,
    assistants,
    chat_messages,
    instrumented,
    new_trace,
    normalised,
    patched,
    recorded,
    text_reply,
    tool_reply,
)

__all__ = ["patched"]  # the fixture, imported for pytest


def create(client: Any, **kwargs: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS, **kwargs)


def respond(client: Any, **kwargs: Any) -> Any:
    return client.responses.create(model=MODEL, instructions=SYSTEM, input=USER, tools=RESPONSES_TOOLS, **kwargs)


# --------------------------------------------------------------------------- call variants
#
# Each variant makes one call the way user code does and returns what the user
# observed (objects, chunks, events), after asserting the types the client
# promises. Run once uninstrumented and once instrumented in a session, the
# observations and the request bodies must be identical.


@dataclass
class Variant:
    name: str
    run: Callable[[Any], Any]
    reply: dict[str, Any] = field(default_factory=tool_reply)


def _chat_create(c: Any) -> Any:
    r = create(c)
    assert type(r) is ChatCompletion
    return r


def _chat_stream_for(c: Any) -> Any:
    s = create(c, stream=True)
    assert isinstance(s, openai.Stream)
    assert type(s.response).__name__ == "Response" and s.response.status_code == 200
    return [chunk for chunk in s]


def _chat_stream_with_next(c: Any) -> Any:
    with create(c, stream=True) as s:
        assert isinstance(s, openai.Stream)
        first = next(s)
        rest = list(s)
    return [first, *rest]


def _helper_iterate(c: Any) -> Any:
    manager = c.chat.completions.stream(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS)
    with manager as s:
        assert isinstance(s, ChatCompletionStream)
        events = [e for e in s]
        final = s.get_final_completion()
    assert isinstance(final, ParsedChatCompletion)
    return [events, final]


def _helper_final(c: Any) -> Any:
    with c.chat.completions.stream(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS) as s:
        return s.get_final_completion()


def _responses_create(c: Any) -> Any:
    r = respond(c)
    assert type(r) is Response
    return r


def _responses_stream(c: Any) -> Any:
    s = respond(c, stream=True)
    assert isinstance(s, openai.Stream)
    with s:
        return list(s)


def _responses_stream_helper(c: Any) -> Any:
    with c.responses.stream(model=MODEL, instructions=SYSTEM, input=USER, tools=RESPONSES_TOOLS) as s:
        events = list(s)
        return [events, s.get_final_response()]


SYNC_VARIANTS = [
    Variant("chat.create", _chat_create),
    Variant("chat.create-stream-for", _chat_stream_for),
    Variant("chat.create-stream-with-next", _chat_stream_with_next),
    Variant("chat.stream-helper-iterate", _helper_iterate),
    Variant("chat.stream-helper-get_final_completion", _helper_final),
    Variant("responses.create", _responses_create),
    Variant("responses.create-stream", _responses_stream),
    Variant("responses.stream-helper", _responses_stream_helper),
]


async def _achat_create(c: Any) -> Any:
    r = await create(c)
    assert type(r) is ChatCompletion
    return r


async def _achat_stream_for(c: Any) -> Any:
    s = await create(c, stream=True)
    assert isinstance(s, openai.AsyncStream)
    assert s.response.status_code == 200
    return [chunk async for chunk in s]


async def _achat_stream_with_anext(c: Any) -> Any:
    async with await create(c, stream=True) as s:
        first = await s.__anext__()
        rest = [chunk async for chunk in s]
    return [first, *rest]


async def _ahelper_iterate(c: Any) -> Any:
    async with c.chat.completions.stream(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS) as s:
        assert isinstance(s, AsyncChatCompletionStream)
        events = [e async for e in s]
        final = await s.get_final_completion()
    return [events, final]


async def _ahelper_final(c: Any) -> Any:
    async with c.chat.completions.stream(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS) as s:
        return await s.get_final_completion()


async def _aresponses_create(c: Any) -> Any:
    r = await respond(c)
    assert type(r) is Response
    return r


async def _aresponses_stream(c: Any) -> Any:
    s = await respond(c, stream=True)
    assert isinstance(s, openai.AsyncStream)
    async with s:
        return [event async for event in s]


ASYNC_VARIANTS = [
    Variant("chat.create", _achat_create),
    Variant("chat.create-stream-for", _achat_stream_for),
    Variant("chat.create-stream-with-anext", _achat_stream_with_anext),
    Variant("chat.stream-helper-iterate", _ahelper_iterate),
    Variant("chat.stream-helper-get_final_completion", _ahelper_final),
    Variant("responses.create", _aresponses_create),
    Variant("responses.create-stream", _aresponses_stream),
]


def _same_request(a: Any, b: Any) -> None:
    assert (a.method, a.path) == (b.method, b.path)
    assert a.raw == b.raw, "instrumentation changed the request body"
    assert a.headers == b.headers, "instrumentation changed the request headers"


@pytest.mark.parametrize("variant", SYNC_VARIANTS, ids=lambda v: v.name)
def test_sync_call_is_recorded_and_unchanged(
    variant: Variant, openai_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    """Inside a session: inputs + one assistant message with reasoning, tool
    calls (provider ids, merged arguments) and model; the user sees the same
    objects and the server the same request as without instrumentation."""
    plain = normalised(variant.run(openai_sync))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("openai"):
        ststrace.instrument("openai")  # a second time: still one record per call
        with Session(path):
            seen = normalised(variant.run(openai_sync))
    assert seen == plain
    _same_request(fake_api.last_request, plain_request)
    assert len(fake_api.requests) == 2
    assert recorded(path) == [*INPUTS, variant.reply]


@pytest.mark.parametrize("variant", ASYNC_VARIANTS, ids=lambda v: v.name)
async def test_async_call_is_recorded_and_unchanged(
    variant: Variant, openai_async: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    """The async client: same records, same objects, same request."""
    plain = normalised(await variant.run(openai_async))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("openai"):
        ststrace.instrument("openai")
        async with Session(path):
            seen = normalised(await variant.run(openai_async))
    assert seen == plain
    _same_request(fake_api.last_request, plain_request)
    assert recorded(path) == [*INPUTS, variant.reply]


@pytest.mark.parametrize("variant", SYNC_VARIANTS, ids=lambda v: v.name)
def test_outside_a_session_nothing_is_recorded(variant: Variant, openai_sync: Any, patched: None) -> None:
    """No session: the call goes straight through, no file is created, and
    streams are the client's own objects, not proxies."""
    variant.run(openai_sync)
    stream = create(openai_sync, stream=True)
    assert type(stream) is openai.Stream
    stream.close()
    assert trace_dir_files() == []


async def test_async_outside_a_session_returns_the_plain_stream(openai_async: Any, patched: None) -> None:
    stream = await create(openai_async, stream=True)
    assert type(stream) is openai.AsyncStream
    await stream.close()
    assert type(await create(openai_async)) is ChatCompletion
    assert trace_dir_files() == []


def test_instrumenting_twice_records_once(openai_sync: Any, tmp_path: Path) -> None:
    """A second ``instrument()`` (by name or for all) patches nothing more."""
    path = new_trace(tmp_path)
    with instrumented("openai"):
        assert ststrace.instrument("openai") == ["openai"]
        ststrace.instrument()
        with Session(path):
            create(openai_sync)
            list(openai_sync.chat.completions.create(model=MODEL, messages=chat_messages(), stream=True))
    assert recorded(path) == [*INPUTS, tool_reply(), text_reply()]


def test_uninstrument_stops_recording(openai_sync: Any, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with instrumented("openai"):
        pass
    with Session(path):
        create(openai_sync)
    assert recorded(path) == []


async def test_concurrent_async_calls_each_record_one_reply(
    openai_async: Any, patched: None, tmp_path: Path
) -> None:
    """Calls awaited together (``asyncio.gather``) record one reply each and the shared input once."""
    import asyncio

    path = new_trace(tmp_path)
    async with Session(path):
        replies = await asyncio.gather(
            *(openai_async.chat.completions.create(model=MODEL, messages=chat_messages()) for _ in range(3)),
            _drain(await openai_async.chat.completions.create(model=MODEL, messages=chat_messages(), stream=True)),
        )
    assert len(replies) == 4
    assert recorded(path) == [*INPUTS, *[text_reply()] * 4]


async def _drain(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


# --------------------------------------------------------------------------- inside @llm


def test_call_inside_llm_function_is_recorded_once(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """``@llm`` around an instrumented call: one assistant message, not two."""

    @llm
    def ask(messages: list[dict[str, Any]]) -> Any:
        return openai_sync.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)

    @llm
    def ask_streaming(messages: list[dict[str, Any]]) -> Any:
        return openai_sync.chat.completions.create(model=MODEL, messages=messages, stream=True)

    @llm
    def ask_deltas(messages: list[dict[str, Any]]) -> Any:
        for chunk in openai_sync.chat.completions.create(model=MODEL, messages=messages, stream=True):
            yield chunk

    path = new_trace(tmp_path)
    with Session(path):
        ask(chat_messages())
        list(ask_streaming(chat_messages()))
        list(ask_deltas(chat_messages()))
    messages = recorded(path)
    assert messages[:2] == INPUTS
    assert [m["content"] for m in assistants(messages)] == [PREAMBLE, TEXT_REPLY, TEXT_REPLY]
    assert len(messages) == 5


def test_llm_function_returning_an_unentered_stream_manager_records_once(
    openai_sync: Any, patched: None, tmp_path: Path
) -> None:
    """``@llm`` returns ``chat.completions.stream(...)`` unentered; the request
    (an instrumented ``create``) happens at the caller's ``with``: one reply."""

    @llm
    def ask(messages: list[dict[str, Any]]) -> Any:
        return openai_sync.chat.completions.stream(model=MODEL, messages=messages)

    path = new_trace(tmp_path)
    with Session(path):
        with ask(chat_messages()) as s:
            s.get_final_completion()
    assert recorded(path) == [*INPUTS, text_reply()]


async def test_async_llm_function_returning_an_unentered_stream_manager_records_once(
    openai_async: Any, patched: None, tmp_path: Path
) -> None:
    @llm
    async def ask(messages: list[dict[str, Any]]) -> Any:
        return openai_async.chat.completions.stream(model=MODEL, messages=messages)

    path = new_trace(tmp_path)
    async with Session(path):
        async with await ask(chat_messages()) as s:
            await s.get_final_completion()
    assert recorded(path) == [*INPUTS, text_reply()]


async def test_async_call_inside_llm_function_is_recorded_once(
    openai_async: Any, patched: None, tmp_path: Path
) -> None:
    @llm
    async def ask(messages: list[dict[str, Any]]) -> Any:
        return await openai_async.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)

    @llm
    async def ask_deltas(messages: list[dict[str, Any]]) -> Any:
        async for chunk in await openai_async.responses.create(model=MODEL, input=messages, stream=True):
            yield chunk

    path = new_trace(tmp_path)
    async with Session(path):
        await ask(chat_messages())
        [e async for e in ask_deltas(chat_messages())]
    messages = recorded(path)
    assert messages[:2] == INPUTS
    assert [m["content"] for m in assistants(messages)] == [PREAMBLE, TEXT_REPLY]
    assert len(messages) == 4


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_api_error_propagates_unchanged(
    status: int, stream: bool, openai_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    """HTTP errors raise the client's own exception class; no assistant message
    is recorded, and a retry records its reply once with no duplicate input."""
    fake_api.fail_next(status)
    with pytest.raises(openai.APIStatusError) as plain:
        create(openai_sync, stream=stream)
    path = new_trace(tmp_path)
    with instrumented("openai"):
        with Session(path):
            fake_api.fail_next(status)
            with pytest.raises(openai.APIStatusError) as traced:
                create(openai_sync, stream=stream)
            assert type(traced.value) is type(plain.value)
            assert traced.value.status_code == status
            assert str(traced.value) == str(plain.value)
            gc.collect()
            assert assistants(recorded_so_far(path)) == []
            result = create(openai_sync, stream=stream)
            if stream:
                list(result)
    assert recorded(path) == [*INPUTS, tool_reply()]


def recorded_so_far(path: Path) -> list[dict[str, Any]]:
    session = ststrace.current_session()
    assert session is not None
    session.flush()
    return recorded(path)


@pytest.mark.parametrize("api_name", ["chat", "responses"])
async def test_async_api_error_propagates_unchanged(
    api_name: str, openai_async: Any, fake_api: FakeAPI, tmp_path: Path, patched: None
) -> None:
    path = new_trace(tmp_path)
    async with Session(path):
        fake_api.fail_next(400)
        with pytest.raises(openai.BadRequestError):
            if api_name == "chat":
                await create(openai_async)
            else:
                await respond(openai_async, stream=True)
    assert assistants(recorded(path)) == []


def test_wrong_arguments_raise_the_clients_type_error(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """A call the client rejects before sending raises as uninstrumented."""
    with Session(new_trace(tmp_path)):
        with pytest.raises(TypeError):
            openai_sync.chat.completions.create(messages=chat_messages())  # no model
        with pytest.raises(TypeError):
            openai_sync.chat.completions.create(model=MODEL, messages=chat_messages(), not_a_param=1)


# The chat stream: 1 role chunk, 10 reasoning deltas, then "Let me look that up."
# in 4-character deltas. Cut after 14 events: 3 text deltas arrived.
CUT_AFTER = 14


def test_dropped_stream_raises_the_clients_error_and_records_what_arrived(
    openai_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    """A connection cut mid-stream raises the same error as uninstrumented; the
    part of the reply that arrived is recorded (and the trace stays valid)."""
    fake_api.drop_next_stream(CUT_AFTER)
    with pytest.raises(Exception) as plain:
        list(create(openai_sync, stream=True))
    path = new_trace(tmp_path)
    with instrumented("openai"):
        with Session(path):
            fake_api.drop_next_stream(CUT_AFTER)
            received: list[Any] = []
            with pytest.raises(Exception) as traced:
                for chunk in create(openai_sync, stream=True):
                    received.append(chunk)
    assert type(traced.value) is type(plain.value)
    assert isinstance(traced.value, openai.APIConnectionError)
    assert len(received) == CUT_AFTER
    messages = recorded(path)
    assert messages[:2] == INPUTS
    assert messages[2:] == [
        {"role": "assistant", "content": "Let me look ", "reasoningContent": REASONING_TOOLS, "model": MODEL}
    ]


async def test_async_dropped_stream_records_what_arrived(
    openai_async: Any, fake_api: FakeAPI, tmp_path: Path, patched: None
) -> None:
    path = new_trace(tmp_path)
    async with Session(path):
        fake_api.drop_next_stream(CUT_AFTER)
        with pytest.raises(openai.APIConnectionError):
            async for _ in await create(openai_async, stream=True):
                pass
    assert assistants(recorded(path)) == [
        {"role": "assistant", "content": "Let me look ", "reasoningContent": REASONING_TOOLS, "model": MODEL}
    ]


def test_stream_closed_early_records_what_was_read(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """``close()`` after a few chunks ends the stream; what was read is recorded once."""
    path = new_trace(tmp_path)
    with Session(path):
        stream = create(openai_sync, stream=True)
        for _, _chunk in zip(range(CUT_AFTER), stream):
            pass
        stream.close()
        assert stream.response.is_closed
        del stream
        gc.collect()
    assert assistants(recorded(path)) == [
        {"role": "assistant", "content": "Let me look ", "reasoningContent": REASONING_TOOLS, "model": MODEL}
    ]


# --------------------------------------------------------------------------- raw responses, parse


# with_raw_response / with_streaming_response: tests/integrations/test_instrument_raw.py


def test_chat_parse_is_recorded(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """``chat.completions.parse`` (structured outputs) records like ``create``."""
    path = new_trace(tmp_path)
    with Session(path):
        strict = [{"type": "function", "function": {**t["function"], "strict": True}} for t in CHAT_TOOLS]
        result = openai_sync.chat.completions.parse(model=MODEL, messages=chat_messages(), tools=strict)
    assert isinstance(result, ParsedChatCompletion)
    assert result.choices[0].message.tool_calls[0].function.parsed_arguments == {"city": "Paris"}
    assert recorded(path) == [*INPUTS, tool_reply()]


# --------------------------------------------------------------------------- tool loops


@tool
def get_weather(city: str) -> str:
    return WEATHER_RESULT if city == "Paris" else "unknown"


@tool
def get_time(tz: str) -> str:
    return TIME_RESULT if tz == "Europe/Paris" else "unknown"


TOOLS = {"get_weather": get_weather, "get_time": get_time}


def chat_agent(client: Any, stream: bool) -> str:
    """A plain Chat Completions agent loop, as users write it."""
    messages = chat_messages()
    for _ in range(4):
        if stream:
            with client.chat.completions.stream(model=MODEL, messages=messages, tools=CHAT_TOOLS) as s:
                message = s.get_final_completion().choices[0].message
        else:
            message = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS).choices[0].message
        if not message.tool_calls:
            return str(message.content)
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        for call in message.tool_calls:
            result = TOOLS[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the agent did not finish")


def expected_loop(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        *INPUTS,
        tool_reply(),
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "call_weather01"},
        {"role": "tool", "content": TIME_RESULT, "toolCallId": "call_time02"},
        answer_reply(api),
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream-helper"])
def test_chat_tool_loop_trace_is_valid_and_paired(
    stream: bool, openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    """Model asks for two tools, ``@tool`` functions run, model answers: the
    trace validates with every call paired and nothing recorded twice."""
    path = new_trace(tmp_path)
    with Session(path):
        answer = chat_agent(openai_sync, stream)
    assert answer == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == expected_loop(fake_api)


async def test_responses_tool_loop_async(openai_async: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """The Responses API loop (function_call items, function_call_output inputs)."""
    path = new_trace(tmp_path)
    async with Session(path):
        items: list[Any] = [{"role": "user", "content": USER}]
        for _ in range(4):
            response = await openai_async.responses.create(
                model=MODEL, instructions=SYSTEM, input=items, tools=RESPONSES_TOOLS
            )
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                break
            items += [item.model_dump(exclude_none=True) for item in response.output]
            for call in calls:
                output = TOOLS[call.name](**json.loads(call.arguments))
                items.append({"type": "function_call_output", "call_id": call.call_id, "output": output})
    assert response.output_text == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == expected_loop(fake_api)


def test_stateful_responses_turns_are_all_recorded(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """With ``previous_response_id`` each ``input`` is only the new turn: a user
    turn that repeats the previous one ("ok", "ok") is still recorded."""
    path = new_trace(tmp_path)
    with Session(path):
        first = openai_sync.responses.create(model=MODEL, input="ok")
        openai_sync.responses.create(model=MODEL, input="ok", previous_response_id=first.id)
    users = [m["content"] for m in recorded(path) if m["role"] == "user"]
    assert users == ["ok", "ok"]
    assert len(assistants(recorded(path))) == 2


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_stream_left_unfinished_when_the_session_ends_records_what_arrived(
    openai_sync: Any, openai_async: Any, patched: None, tmp_path: Path, is_async: bool
) -> None:
    """``break`` out of a stream the caller still holds, then the ``with
    Session`` block ends: the reply read so far is recorded before the file
    closes (it used to be dropped, "a record made after close()"), and the
    caller can still read the rest of the stream, unchanged."""
    path = new_trace(tmp_path)
    if is_async:
        async with Session(path) as s:
            stream = await create(openai_async, stream=True)
            for _ in range(CUT_AFTER):
                await stream.__anext__()
        rest = [c async for c in stream]
    else:
        with Session(path) as s:
            stream = create(openai_sync, stream=True)
            for i, _chunk in enumerate(stream):
                if i + 1 == CUT_AFTER:
                    break
        rest = list(stream)
    assert rest and rest[-1].choices[0].finish_reason == "tool_calls"
    assert s.stats()["lost"] == 0
    assert assistants(recorded(path)) == [
        {"role": "assistant", "content": "Let me look ", "reasoningContent": REASONING_TOOLS, "model": MODEL}
    ]



@pytest.mark.parametrize("window", [2, 3, 4])
def test_a_sliding_history_window_records_every_user_turn(
    openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path, window: int
) -> None:
    """Memory kept to the last *window* messages (LangChain ``trim_messages``, a
    chat app's context window): a user turn repeating an earlier one ("ok")
    is still a new turn, because the reply recorded since the last call comes
    before it. It used to be taken for the previous call's "ok" and dropped."""
    users = ["hello", "ok", "ok", "tell me more", "ok", "ok", "bye"]
    fake_api.script(*[ScriptedReply(text=f"reply {i}", reasoning=None) for i in range(len(users))])
    path = new_trace(tmp_path)
    history: list[dict[str, Any]] = []
    with Session(path):
        for text in users:
            history.append({"role": "user", "content": text})
            messages = [{"role": "system", "content": SYSTEM}, *history[-window:]]
            reply = openai_sync.chat.completions.create(model=MODEL, messages=messages)
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
    recorded_ = recorded(path)
    assert recorded_[0] == {"role": "system", "content": SYSTEM}
    turns = [(m["role"], m["content"]) for m in recorded_[1:]]
    expected = [pair for i, text in enumerate(users) for pair in (("user", text), ("assistant", f"reply {i}"))]
    assert turns == expected
