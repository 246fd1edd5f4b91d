"""Stream detection, proxies and chunk accumulation (ststrace._adapters).

Provider streams are the real ``openai`` / ``anthropic`` stream classes, made by
the real clients over an in-process ``httpx2.MockTransport`` that answers with
SSE bytes (nothing leaves the process); every event is first validated against
the provider's own pydantic type so the payloads are realistic.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anthropic
import httpx2
import huggingface_hub
import openai
import openai.types.chat
import openai.types.responses
import pydantic
import pytest

from anthropic.lib.streaming import AsyncMessageStream, MessageStream, MessageStreamManager
from openai.lib.streaming.chat import ChatCompletionStream

from ststrace._context import in_llm_call
from ststrace._adapters import accumulate, is_stream, is_wrapped_stream, response_to_message, wrap_stream


# --------------------------------------------------------------------------- payloads


def _chunk(delta: dict[str, Any], finish: str | None = None, model: str = "qwen3-32b") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _tc(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
        call["type"] = "function"
        call["function"]["name"] = name
    return {"tool_calls": [call]}


CHAT_CHUNKS: list[dict[str, Any]] = [
    _chunk({"role": "assistant", "content": "", "reasoning_content": "The user "}),
    _chunk({"reasoning_content": "wants two things."}),
    _chunk({"content": "Checking "}),
    _chunk({"content": "both."}),
    _chunk(_tc(0, "", "call_Ab9", "get_weather")),
    _chunk(_tc(0, '{"ci')),
    _chunk(_tc(1, "", "call_Zz1", "get_time")),
    _chunk(_tc(0, 'ty": "Pa')),
    _chunk(_tc(1, '{"tz": ')),
    _chunk(_tc(0, 'ris"}')),
    _chunk(_tc(1, '"UTC"}')),
    _chunk({}, finish="tool_calls"),
    {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "qwen3-32b", "choices": []},
]
CHAT_MESSAGE = {
    "role": "assistant",
    "content": "Checking both.",
    "reasoningContent": "The user wants two things.",
    "toolCalls": [
        {"id": "call_Ab9", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_Zz1", "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}},
    ],
    "model": "qwen3-32b",
}

ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Two "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "cities."}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAh"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "I'll check "}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "both."}},
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {}},
    },
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '"Par'}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": 'is", "units"'}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ': "c"}'}},
    {"type": "content_block_stop", "index": 2},
    {
        "type": "content_block_start",
        "index": 3,
        "content_block": {"type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {}},
    },
    {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"city"'}},
    {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": ': "Lima"}'}},
    {"type": "content_block_stop", "index": 3},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 40},
    },
    {"type": "message_stop"},
]
ANTHROPIC_MESSAGE = {
    "role": "assistant",
    "content": "I'll check both.",
    "reasoningContent": "Two cities.",
    "toolCalls": [
        {"id": "toolu_01A", "function": {"name": "get_weather", "arguments": '{"city":"Paris","units":"c"}'}},
        {"id": "toolu_01B", "function": {"name": "get_weather", "arguments": '{"city":"Lima"}'}},
    ],
    "model": "claude-sonnet-4-6",
}


def _response(status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "model": "gpt-5-mini",
        "status": status,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": output,
    }


_REASONING_ITEM = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [
        {"type": "summary_text", "text": "Need the weather."},
        {"type": "summary_text", "text": "Then answer."},
    ],
}
_MESSAGE_ITEM = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
}


def _fc(n: int, city: str, arguments: str) -> dict[str, Any]:
    return {
        "id": f"fc_{n}",
        "type": "function_call",
        "call_id": f"call_w{n}",
        "name": "get_weather",
        "arguments": arguments,
        "status": "completed" if arguments else "in_progress",
    }


def _responses_events(completed: bool = True) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response("in_progress", [])},
        {"type": "response.output_item.added", "output_index": 0, "item": {**_REASONING_ITEM, "summary": []}},
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
    ]
    for index, pieces in enumerate([["Need the ", "weather."], ["Then ", "answer."]]):
        for piece in pieces:
            events.append(
                {
                    "type": "response.reasoning_summary_text.delta",
                    "item_id": "rs_1",
                    "output_index": 0,
                    "summary_index": index,
                    "delta": piece,
                }
            )
    events.append({"type": "response.output_item.done", "output_index": 0, "item": _REASONING_ITEM})
    events.append(
        {"type": "response.output_item.added", "output_index": 1, "item": {**_MESSAGE_ITEM, "content": []}}
    )
    events.append(
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        }
    )
    for piece in ["Let me ", "look."]:
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 1,
                "content_index": 0,
                "delta": piece,
                "logprobs": [],
            }
        )
    events.append({"type": "response.output_item.added", "output_index": 2, "item": _fc(1, "Oslo", "")})
    events.append({"type": "response.output_item.added", "output_index": 3, "item": _fc(2, "Rome", "")})
    for index, piece in [(2, '{"city"'), (3, '{"city":'), (2, ':"Oslo"}'), (3, '"Rome"}')]:
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{index - 1}",
                "output_index": index,
                "delta": piece,
            }
        )
    final = _response(
        "completed",
        [_REASONING_ITEM, _MESSAGE_ITEM, _fc(1, "Oslo", '{"city":"Oslo"}'), _fc(2, "Rome", '{"city":"Rome"}')],
    )
    if completed:
        events.append({"type": "response.output_item.done", "output_index": 1, "item": _MESSAGE_ITEM})
        events.append({"type": "response.completed", "response": final})
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return events


RESPONSES_MESSAGE = {
    "role": "assistant",
    "content": "Let me look.",
    "reasoningContent": "Need the weather.\n\nThen answer.",
    "toolCalls": [
        {"id": "call_w1", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}},
        {"id": "call_w2", "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}},
    ],
    "model": "gpt-5-mini",
}

_CHUNK_TYPE = openai.types.chat.ChatCompletionChunk
_ANTHROPIC_EVENT = pydantic.TypeAdapter(anthropic.types.RawMessageStreamEvent)
_RESPONSES_EVENT = pydantic.TypeAdapter(openai.types.responses.ResponseStreamEvent)


def _chat_sse(chunks: list[dict[str, Any]]) -> bytes:
    for chunk in chunks:
        _CHUNK_TYPE.model_validate(chunk)
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + b"data: [DONE]\n\n"


def _anthropic_sse(events: list[dict[str, Any]]) -> bytes:
    out = b"event: ping\ndata: {\"type\": \"ping\"}\n\n"
    for event in events:
        if event["type"] != "error":
            _ANTHROPIC_EVENT.validate_python(event)
        out += f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
    return out


def _responses_sse(events: list[dict[str, Any]]) -> bytes:
    out = b""
    for event in events:
        _RESPONSES_EVENT.validate_python(event)
        out += f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
    return out


# --------------------------------------------------------------------------- clients


def _handler(body: bytes) -> Callable[[httpx2.Request], httpx2.Response]:
    def handle(request: httpx2.Request) -> httpx2.Response:
        assert request.url.host == "127.0.0.1"
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return handle


def _openai(body: bytes) -> openai.OpenAI:
    transport = httpx2.MockTransport(_handler(body))
    return openai.OpenAI(
        api_key="test", base_url="http://127.0.0.1:9/v1", max_retries=0, http_client=httpx2.Client(transport=transport)
    )


def _async_openai(body: bytes) -> openai.AsyncOpenAI:
    transport = httpx2.MockTransport(_handler(body))
    return openai.AsyncOpenAI(
        api_key="test",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )


def _anthropic(body: bytes) -> anthropic.Anthropic:
    transport = httpx2.MockTransport(_handler(body))
    return anthropic.Anthropic(
        api_key="test", base_url="http://127.0.0.1:9", max_retries=0, http_client=httpx2.Client(transport=transport)
    )


def _async_anthropic(body: bytes) -> anthropic.AsyncAnthropic:
    transport = httpx2.MockTransport(_handler(body))
    return anthropic.AsyncAnthropic(
        api_key="test",
        base_url="http://127.0.0.1:9",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=transport),
    )


MESSAGES: Any = [{"role": "user", "content": "Weather in Paris and time in UTC?"}]
ANTHROPIC_ARGS: dict[str, Any] = {"model": "claude-sonnet-4-6", "max_tokens": 1024, "messages": MESSAGES}


class Recorder:
    """Collects on_done calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, message: dict[str, Any]) -> None:
        self.calls.append(message)

    @property
    def only(self) -> dict[str, Any]:
        assert len(self.calls) == 1, self.calls
        return self.calls[0]


# --------------------------------------------------------------------------- is_stream


def test_is_stream_positive_without_consuming() -> None:
    """Generators, provider streams and stream managers are streams; checking consumes nothing."""

    def gen() -> Iterator[int]:
        yield 1
        yield 2

    g = gen()
    assert is_stream(g)
    assert next(g) == 1

    async def agen() -> AsyncIterator[int]:
        yield 1

    ag = agen()
    assert is_stream(ag)
    assert is_stream(iter([1, 2]))

    client = _openai(_chat_sse(CHAT_CHUNKS))
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert is_stream(stream)
    assert isinstance(next(stream), _CHUNK_TYPE)  # still unread after the check
    stream.close()
    assert is_stream(client.chat.completions.stream(model="m", messages=MESSAGES))
    assert is_stream(client.responses.stream(model="m", input="hi"))
    assert is_stream(_anthropic(b"").messages.stream(**ANTHROPIC_ARGS))
    asyncio.run(ag.aclose())  # type: ignore[attr-defined]


def test_is_stream_negative() -> None:
    """Strings, bytes, containers, mappings, pydantic models and HF outputs are not streams."""
    completion = openai.types.chat.ChatCompletion.model_validate(
        {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": []}
    )
    hf = huggingface_hub.ChatCompletionOutput.parse_obj_as_instance({"id": "x", "model": "m", "choices": []})
    for value in ("text", b"bytes", bytearray(b"x"), {"a": 1}, [1], (1,), {1}, completion, hf, None, 3, object()):
        assert not is_stream(value), value


# --------------------------------------------------------------------------- accumulation


def test_accumulate_chat_chunk_objects_and_dicts() -> None:
    """Parallel tool calls merge by index across interleaved fragments; reasoning and text join."""
    objects = [_CHUNK_TYPE.model_validate(c) for c in CHAT_CHUNKS]
    assert accumulate(objects) == CHAT_MESSAGE
    assert accumulate(CHAT_CHUNKS) == CHAT_MESSAGE


def test_accumulate_reasoning_field_named_reasoning_not_doubled() -> None:
    """`reasoning` deltas are read, and a server sending both fields is not counted twice."""
    chunks = [
        _chunk({"reasoning": "a", "reasoning_content": "a"}),
        _chunk({"reasoning": "b"}),
        _chunk({"content": "x"}),
    ]
    assert accumulate(chunks) == {"role": "assistant", "content": "x", "reasoningContent": "ab", "model": "qwen3-32b"}


def test_accumulate_huggingface_stream_outputs() -> None:
    """huggingface_hub ChatCompletionStreamOutput chunks (TGI shape, string argument fragments)."""
    raw = [
        {"role": "assistant", "content": None, "reasoning": "Look it up."},
        {"role": "assistant", "tool_calls": [_hf_tc(0, "0", "search", '{"q": ')]},
        {"role": "assistant", "tool_calls": [_hf_tc(0, "", None, '"ststrace"}')]},
        {"role": "assistant", "content": "Done."},
    ]
    chunks = [
        huggingface_hub.ChatCompletionStreamOutput.parse_obj_as_instance(
            {
                "id": "",
                "created": 1,
                "model": "meta-llama/Llama-3.3-70B-Instruct",
                "system_fingerprint": "3.0",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
        )
        for delta in raw
    ]
    first_call = chunks[1].choices[0].delta.tool_calls[0]  # type: ignore[index]
    assert isinstance(first_call, huggingface_hub.ChatCompletionStreamOutputDeltaToolCall)
    assert accumulate(chunks) == {
        "role": "assistant",
        "content": "Done.",
        "reasoningContent": "Look it up.",
        "toolCalls": [{"id": "0", "function": {"name": "search", "arguments": '{"q": "ststrace"}'}}],
        "model": "meta-llama/Llama-3.3-70B-Instruct",
    }


def _hf_tc(index: int, call_id: str, name: str | None, arguments: str) -> dict[str, Any]:
    return {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_accumulate_anthropic_raw_events() -> None:
    """Anthropic raw events: thinking, text, two tool_use blocks with input_json_delta fragments."""
    events = [_ANTHROPIC_EVENT.validate_python(e) for e in ANTHROPIC_EVENTS]
    assert accumulate(events) == ANTHROPIC_MESSAGE
    assert accumulate(ANTHROPIC_EVENTS) == ANTHROPIC_MESSAGE


def test_accumulate_responses_events_with_and_without_completed() -> None:
    """Responses events give the same message from response.completed and from the deltas alone."""
    full = [_RESPONSES_EVENT.validate_python(e) for e in _responses_events()]
    assert accumulate(full) == RESPONSES_MESSAGE
    partial = [_RESPONSES_EVENT.validate_python(e) for e in _responses_events(completed=False)]
    assert accumulate(partial) == RESPONSES_MESSAGE
    assert accumulate(_responses_events(completed=False)) == RESPONSES_MESSAGE


def test_accumulate_text_chunks_and_unknown_chunks() -> None:
    """String chunks are text deltas; unknown chunk types are ignored."""
    assert accumulate(["Hel", object(), 3, {"weird": True}, "lo"]) == {"role": "assistant", "content": "Hello"}
    assert accumulate([]) == {"role": "assistant", "content": ""}


def test_tool_call_without_id_gets_one_generated_id() -> None:
    """A tool call streamed with no id gets one generated id, stable across fragments."""
    first = _chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a"'}}]})
    second = _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})
    message = accumulate([first, second])
    (call,) = message["toolCalls"]
    assert call["id"].startswith("call_") and call["function"] == {"name": "f", "arguments": '{"a": 1}'}


# --------------------------------------------------------------------------- proxies over generators


def _gen(items: list[Any], error: BaseException | None = None) -> Iterator[Any]:
    yield from items
    if error is not None:
        raise error


def test_proxy_yields_same_objects_and_records_once() -> None:
    """Chunks pass through unchanged (same objects); exhaustion records once; later close() does not."""
    objects = [_CHUNK_TYPE.model_validate(c) for c in CHAT_CHUNKS]
    rec = Recorder()
    proxy = wrap_stream(_gen(objects), rec)
    assert is_wrapped_stream(proxy) and not is_wrapped_stream(objects)
    seen = list(proxy)
    assert all(a is b for a, b in zip(seen, objects, strict=True))
    assert rec.only == CHAT_MESSAGE
    proxy.close()
    list(proxy)
    assert len(rec.calls) == 1


def test_proxy_keeps_generator_identity_and_protocol() -> None:
    """isinstance, iter(p) is p, send() and close() behave as on the generator."""
    import types

    def echo() -> Iterator[str]:
        received = yield "a"
        yield f"got {received}"
        yield "c"

    rec = Recorder()
    proxy = wrap_stream(echo(), rec)
    assert isinstance(proxy, types.GeneratorType)
    assert iter(proxy) is proxy
    assert next(proxy) == "a"
    assert proxy.send("x") == "got x"
    assert rec.calls == []
    proxy.close()
    assert rec.only == {"role": "assistant", "content": "agot x"}
    with pytest.raises(StopIteration):
        next(proxy)
    assert len(rec.calls) == 1


def test_proxy_reraises_the_same_exception_and_records_partial() -> None:
    """A failing stream records what arrived and re-raises the very same exception object."""
    error = ValueError("connection dropped")
    rec = Recorder()
    proxy = wrap_stream(_gen(CHAT_CHUNKS[:4], error), rec)
    with pytest.raises(ValueError) as excinfo:
        for _ in proxy:
            pass
    assert excinfo.value is error
    assert rec.only == {
        "role": "assistant",
        "content": "Checking both.",
        "reasoningContent": "The user wants two things.",
        "model": "qwen3-32b",
    }


def test_break_then_gc_records_what_arrived() -> None:
    """Abandoning a stream half-way records the chunks read, once, when the proxy is collected."""
    rec = Recorder()
    proxy = wrap_stream(_gen(CHAT_CHUNKS), rec)
    for n, _ in enumerate(proxy):
        if n == 2:
            break
    assert rec.calls == []  # the stream may still be read on
    del proxy  # reference counting alone finishes it: no gc.collect() needed
    assert rec.only["reasoningContent"] == "The user wants two things."
    assert rec.only["content"] == "Checking "


def test_temporary_proxy_in_for_loop_records_everything() -> None:
    """`for c in wrap_stream(...)` keeps the proxy alive for the whole loop."""
    rec = Recorder()
    count = sum(1 for _ in wrap_stream(_gen(CHAT_CHUNKS), rec))
    assert count == len(CHAT_CHUNKS)
    assert rec.only == CHAT_MESSAGE


@pytest.mark.allow_internal_errors
def test_on_done_error_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """An exception inside on_done never reaches the user; it is logged on 'ststrace'."""

    def broken(message: dict[str, Any]) -> None:
        raise RuntimeError("recorder bug")

    assert list(wrap_stream(_gen(["a", "b"]), broken)) == ["a", "b"]
    errors = [r for r in caplog.records if r.name == "ststrace" and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "on_done" in errors[0].getMessage()
    assert errors[0].exc_info is not None and errors[0].exc_info[0] is RuntimeError
    caplog.clear()


def test_never_entered_manager_records_nothing() -> None:
    """A stream manager that is never entered made no request and records nothing."""
    rec = Recorder()
    manager = wrap_stream(_anthropic(b"").messages.stream(**ANTHROPIC_ARGS), rec)
    assert isinstance(manager, MessageStreamManager)
    del manager
    gc.collect()
    assert rec.calls == []


def test_non_stream_is_returned_unchanged() -> None:
    """wrap_stream on something that cannot be iterated gives it back and never calls on_done."""
    rec = Recorder()
    value = object()
    assert wrap_stream(value, rec) is value
    assert rec.calls == []


# --------------------------------------------------------------------------- real openai streams


def test_openai_chat_stream_exhausted() -> None:
    """openai.Stream of chat chunks: isinstance, .response, with-block, one merged message."""
    rec = Recorder()
    client = _openai(_chat_sse(CHAT_CHUNKS))
    raw = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    proxy = wrap_stream(raw, rec)
    assert isinstance(proxy, openai.Stream)
    assert proxy.response.status_code == 200
    assert not hasattr(proxy, "get_final_message") and hasattr(proxy, "close")
    with proxy as entered:
        assert entered is proxy
        chunks = list(entered)
    assert len(chunks) == len(CHAT_CHUNKS) and all(isinstance(c, _CHUNK_TYPE) for c in chunks)
    assert rec.only == CHAT_MESSAGE
    assert proxy.response.is_closed


def test_openai_chat_stream_closed_early() -> None:
    """close() after two chunks records those two and closes the HTTP response."""
    rec = Recorder()
    client = _openai(_chat_sse(CHAT_CHUNKS))
    proxy = wrap_stream(client.chat.completions.create(model="m", messages=MESSAGES, stream=True), rec)
    next(proxy)
    next(proxy)
    proxy.close()
    assert proxy.response.is_closed
    assert rec.only == {
        "role": "assistant",
        "content": "",
        "reasoningContent": "The user wants two things.",
        "model": "qwen3-32b",
    }


def test_openai_chat_stream_api_error_mid_stream() -> None:
    """An error event mid-stream raises openai.APIError through the proxy; what arrived is recorded."""
    body = _chat_sse(CHAT_CHUNKS[:3]).replace(b"data: [DONE]", b'data: {"error": {"message": "overloaded"}}')
    rec = Recorder()
    proxy = wrap_stream(_openai(body).chat.completions.create(model="m", messages=MESSAGES, stream=True), rec)
    with pytest.raises(openai.APIError, match="overloaded"):
        for _ in proxy:
            pass
    assert rec.only["content"] == "Checking "


def test_openai_chat_stream_manager() -> None:
    """chat.completions.stream(): the entered ChatCompletionStream is observed; exit records once."""
    rec = Recorder()
    client = _openai(_chat_sse(CHAT_CHUNKS))
    manager = wrap_stream(client.chat.completions.stream(model="m", messages=MESSAGES), rec)
    with manager as stream:
        assert isinstance(stream, ChatCompletionStream)
        types_seen = {event.type for event in stream}
        assert {"chunk", "content.delta"} <= types_seen
        assert rec.only == CHAT_MESSAGE
    assert len(rec.calls) == 1


def test_openai_chat_stream_manager_get_final_completion() -> None:
    """get_final_completion() without iterating still records the full message."""
    rec = Recorder()
    client = _openai(_chat_sse(CHAT_CHUNKS))
    manager = wrap_stream(client.chat.completions.stream(model="m", messages=MESSAGES), rec)
    with manager as stream:
        completion = stream.get_final_completion()
        assert completion.choices[0].message.tool_calls[1].id == "call_Zz1"  # type: ignore[index]
        assert rec.only == CHAT_MESSAGE


def test_openai_responses_stream() -> None:
    """responses.create(stream=True): events pass through; the response.completed reply is recorded."""
    rec = Recorder()
    client = _openai(_responses_sse(_responses_events()))
    proxy = wrap_stream(client.responses.create(model="m", input="hi", stream=True), rec)
    kinds = [event.type for event in proxy]
    assert kinds[-1] == "response.completed"
    assert rec.only == RESPONSES_MESSAGE


def test_openai_responses_stream_manager_until_done() -> None:
    """responses.stream(): until_done() returns the proxy and the message is recorded."""
    rec = Recorder()
    manager = wrap_stream(_openai(_responses_sse(_responses_events())).responses.stream(model="m", input="hi"), rec)
    with manager as stream:
        assert stream.until_done() is stream
        assert rec.only == RESPONSES_MESSAGE
        assert stream.get_final_response().output[2].call_id == "call_w1"  # type: ignore[union-attr]
    assert len(rec.calls) == 1


async def test_openai_async_chat_stream() -> None:
    """openai.AsyncStream: async with + async for; one message."""
    rec = Recorder()
    client = _async_openai(_chat_sse(CHAT_CHUNKS))
    proxy = wrap_stream(await client.chat.completions.create(model="m", messages=MESSAGES, stream=True), rec)
    assert isinstance(proxy, openai.AsyncStream)
    async with proxy as entered:
        assert entered is proxy
        chunks = [c async for c in entered]
    assert len(chunks) == len(CHAT_CHUNKS)
    assert rec.only == CHAT_MESSAGE


async def test_openai_async_chat_stream_early_close() -> None:
    """await close() after one chunk records that chunk once."""
    rec = Recorder()
    client = _async_openai(_chat_sse(CHAT_CHUNKS))
    proxy = wrap_stream(await client.chat.completions.create(model="m", messages=MESSAGES, stream=True), rec)
    await proxy.__anext__()
    await proxy.close()
    await proxy.aclose()
    assert rec.only == {"role": "assistant", "content": "", "reasoningContent": "The user ", "model": "qwen3-32b"}


async def test_openai_async_chat_stream_manager() -> None:
    """AsyncChatCompletionStreamManager: the stream entered by async with is observed."""
    rec = Recorder()
    client = _async_openai(_chat_sse(CHAT_CHUNKS))
    async with wrap_stream(client.chat.completions.stream(model="m", messages=MESSAGES), rec) as stream:
        async for _ in stream:
            pass
    assert rec.only == CHAT_MESSAGE


# --------------------------------------------------------------------------- real anthropic streams


def test_anthropic_raw_stream() -> None:
    """messages.create(stream=True): raw events merged into one message with tool_use ids kept."""
    rec = Recorder()
    raw = _anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.create(**ANTHROPIC_ARGS, stream=True)
    proxy = wrap_stream(raw, rec)
    assert isinstance(proxy, anthropic.Stream)
    with proxy:
        for _ in proxy:
            pass
    assert rec.only == ANTHROPIC_MESSAGE


def test_anthropic_stream_error_event() -> None:
    """An SSE error event raises the client's error through the proxy; partial text is recorded."""
    events = ANTHROPIC_EVENTS[:8] + [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    rec = Recorder()
    proxy = wrap_stream(_anthropic(_anthropic_sse(events)).messages.create(**ANTHROPIC_ARGS, stream=True), rec)
    with pytest.raises(anthropic.APIStatusError):
        list(proxy)
    assert rec.only == {
        "role": "assistant",
        "content": "I'll check ",
        "reasoningContent": "Two cities.",
        "model": "claude-sonnet-4-6",
    }


def test_anthropic_message_stream_manager_iteration() -> None:
    """messages.stream(): iterating the entered MessageStream (raw + derived events) counts nothing twice."""
    rec = Recorder()
    manager = wrap_stream(_anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.stream(**ANTHROPIC_ARGS), rec)
    with manager as stream:
        assert isinstance(stream, MessageStream)
        assert stream.response.status_code == 200
        kinds = {event.type for event in stream}
        assert {"text", "thinking", "input_json", "content_block_delta"} <= kinds
    assert rec.only == ANTHROPIC_MESSAGE


def test_anthropic_message_stream_text_stream() -> None:
    """Reading only text_stream still records the whole message (thinking and tool calls too)."""
    rec = Recorder()
    manager = wrap_stream(_anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.stream(**ANTHROPIC_ARGS), rec)
    with manager as stream:
        assert "".join(stream.text_stream) == "I'll check both."
        assert rec.only == ANTHROPIC_MESSAGE
    assert len(rec.calls) == 1


def test_anthropic_message_stream_get_final_message() -> None:
    """get_final_message() records once; the returned message converts to the same dict."""
    rec = Recorder()
    manager = wrap_stream(_anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.stream(**ANTHROPIC_ARGS), rec)
    with manager as stream:
        final = stream.get_final_message()
        assert rec.only == ANTHROPIC_MESSAGE
        assert response_to_message(final) == ANTHROPIC_MESSAGE
    assert len(rec.calls) == 1


def test_anthropic_message_stream_partial_then_until_done() -> None:
    """Reading two events through the proxy, then until_done(), records the complete reply."""
    rec = Recorder()
    manager = wrap_stream(_anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.stream(**ANTHROPIC_ARGS), rec)
    with manager as stream:
        next(stream)
        next(stream)
        stream.until_done()
    assert rec.only == ANTHROPIC_MESSAGE


def test_anthropic_message_stream_abandoned_in_with() -> None:
    """Leaving the with block after a few events records what arrived."""
    rec = Recorder()
    manager = wrap_stream(_anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.stream(**ANTHROPIC_ARGS), rec)
    with manager as stream:
        for event in stream:
            if event.type == "text":
                break
        assert rec.calls == []
    assert rec.only == {
        "role": "assistant",
        "content": "I'll check ",
        "reasoningContent": "Two cities.",
        "model": "claude-sonnet-4-6",
    }


async def test_anthropic_async_raw_stream_break_and_aclose() -> None:
    """AsyncStream: async for with break, then close(), records the partial reply once."""
    rec = Recorder()
    client = _async_anthropic(_anthropic_sse(ANTHROPIC_EVENTS))
    proxy = wrap_stream(await client.messages.create(**ANTHROPIC_ARGS, stream=True), rec)
    assert isinstance(proxy, anthropic.AsyncStream)
    async for event in proxy:
        if event.type == "content_block_stop":
            break
    await proxy.close()
    assert rec.only == {
        "role": "assistant",
        "content": "",
        "reasoningContent": "Two cities.",
        "model": "claude-sonnet-4-6",
    }


async def test_anthropic_async_message_stream_manager() -> None:
    """AsyncMessageStreamManager: async with + get_final_message()."""
    rec = Recorder()
    client = _async_anthropic(_anthropic_sse(ANTHROPIC_EVENTS))
    manager = client.messages.stream(**ANTHROPIC_ARGS)
    assert is_stream(manager)
    async with wrap_stream(manager, rec) as stream:
        assert isinstance(stream, AsyncMessageStream)
        final = await stream.get_final_message()
        assert final.content[2].id == "toolu_01A"  # type: ignore[union-attr]
    assert rec.only == ANTHROPIC_MESSAGE


async def test_anthropic_async_text_stream() -> None:
    """AsyncMessageStream.text_stream is observed too."""
    rec = Recorder()
    client = _async_anthropic(_anthropic_sse(ANTHROPIC_EVENTS))
    async with wrap_stream(client.messages.stream(**ANTHROPIC_ARGS), rec) as stream:
        assert "".join([t async for t in stream.text_stream]) == "I'll check both."
    assert rec.only == ANTHROPIC_MESSAGE


# --------------------------------------------------------------------------- async generators


async def test_async_generator_exception_and_identity() -> None:
    """Async generator proxy: same exception object re-raised, partial message recorded once."""
    import types

    error = ConnectionError("reset")

    async def agen() -> AsyncIterator[str]:
        yield "par"
        yield "tial"
        raise error

    rec = Recorder()
    proxy = wrap_stream(agen(), rec)
    assert isinstance(proxy, types.AsyncGeneratorType)
    assert proxy.__aiter__() is proxy
    got = []
    with pytest.raises(ConnectionError) as excinfo:
        async for piece in proxy:
            got.append(piece)
    assert excinfo.value is error
    assert got == ["par", "tial"]
    assert rec.only == {"role": "assistant", "content": "partial"}


async def test_async_generator_aclose_and_asend() -> None:
    """asend() chunks are accumulated and aclose() finishes once."""

    async def agen() -> AsyncIterator[str]:
        value = yield "a"
        yield f"<{value}>"
        yield "never"

    rec = Recorder()
    proxy = wrap_stream(agen(), rec)
    assert await proxy.__anext__() == "a"
    assert await proxy.asend("b") == "<b>"
    await proxy.aclose()
    await proxy.aclose()
    assert rec.only == {"role": "assistant", "content": "a<b>"}


async def test_async_generator_cancelled_consumer() -> None:
    """A consumer task cancelled while waiting on the stream records what arrived."""
    gate = asyncio.Event()

    async def agen() -> AsyncIterator[str]:
        yield "first"
        await gate.wait()
        yield "second"

    rec = Recorder()
    proxy = wrap_stream(agen(), rec)

    async def consume() -> None:
        async for _ in proxy:
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rec.only == {"role": "assistant", "content": "first"}


def test_accumulate_anthropic_redacted_thinking_block() -> None:
    """A streamed redacted_thinking block becomes the reasoning placeholder."""
    events = [
        ANTHROPIC_EVENTS[0],
        {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "opaque"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hi."}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_stop"},
    ]
    objects = [_ANTHROPIC_EVENT.validate_python(e) for e in events]
    assert accumulate(objects) == {
        "role": "assistant",
        "content": "Hi.",
        "reasoningContent": "[redacted thinking]",
        "model": "claude-sonnet-4-6",
    }


@pytest.mark.allow_internal_errors
def test_accumulation_error_is_logged_and_stream_continues(caplog: pytest.LogCaptureFixture) -> None:
    """A malformed chunk breaks neither the stream nor on_done; the internal error is logged."""
    bad = {"choices": 5}
    rec = Recorder()
    assert list(wrap_stream(_gen([bad, "ok"]), rec)) == [bad, "ok"]
    assert rec.only == {"role": "assistant", "content": "ok"}
    errors = [r for r in caplog.records if r.name == "ststrace" and r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "accumulation" in errors[0].getMessage()
    caplog.clear()


class _BothWays:
    """Iterable both ways, like LiteLLM's CustomStreamWrapper."""

    def __init__(self, items: list[Any]) -> None:
        self._items = list(items)

    def __iter__(self) -> _BothWays:
        return self

    def __next__(self) -> Any:
        if not self._items:
            raise StopIteration
        return self._items.pop(0)

    def __aiter__(self) -> _BothWays:
        return self

    async def __anext__(self) -> Any:
        if not self._items:
            raise StopAsyncIteration
        return self._items.pop(0)


async def test_stream_iterable_both_ways() -> None:
    """A sync+async iterable keeps both protocols through the proxy."""
    rec = Recorder()
    proxy = wrap_stream(_BothWays(CHAT_CHUNKS), rec)
    assert isinstance(proxy, _BothWays) and is_stream(proxy)
    assert next(proxy) is CHAT_CHUNKS[0]
    rest = [chunk async for chunk in proxy]
    assert rest == CHAT_CHUNKS[1:]
    assert rec.only == CHAT_MESSAGE


def test_failure_before_any_chunk_records_nothing() -> None:
    """A stream failing before its first chunk is a failed call: the error propagates, nothing is recorded."""
    error = TimeoutError("no first byte")
    rec = Recorder()
    proxy = wrap_stream(_gen([], error), rec)
    with pytest.raises(TimeoutError) as excinfo:
        next(proxy)
    assert excinfo.value is error
    assert rec.calls == []


def test_closed_before_reading_records_nothing_but_empty_reply_does() -> None:
    """Closing an unread stream records nothing; a stream that ends with no chunks is an empty reply."""
    rec = Recorder()
    client = _openai(_chat_sse(CHAT_CHUNKS))
    proxy = wrap_stream(client.chat.completions.create(model="m", messages=MESSAGES, stream=True), rec)
    proxy.close()
    assert rec.calls == []
    empty = Recorder()
    nothing = _openai(_chat_sse([])).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert list(wrap_stream(nothing, empty)) == []
    assert empty.only == {"role": "assistant", "content": ""}


async def test_async_failure_before_any_chunk_records_nothing() -> None:
    """An async stream whose first read fails records nothing and re-raises the same error."""
    error = ConnectionError("refused")

    async def agen() -> AsyncIterator[str]:
        raise error
        yield "never"  # pragma: no cover

    rec = Recorder()
    with pytest.raises(ConnectionError) as excinfo:
        async for _ in wrap_stream(agen(), rec):
            pass
    assert excinfo.value is error
    assert rec.calls == []


# --------------------------------------------------------------------------- stream managers


def _flag_watching_handler(body: bytes, seen: list[bool]) -> Callable[[httpx2.Request], httpx2.Response]:
    answer = _handler(body)

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(in_llm_call.get())
        return answer(request)

    return handle


def test_manager_sends_its_request_with_the_llm_call_flag_set() -> None:
    """openai's manager sends the request through ``create`` at ``__enter__``: that
    happens with ``in_llm_call`` set (an instrumented create steps aside), and the
    flag is back to unset for the caller's block."""
    seen: list[bool] = []
    client = openai.OpenAI(
        api_key="test",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(_flag_watching_handler(_chat_sse(CHAT_CHUNKS), seen))),
    )
    rec = Recorder()
    with wrap_stream(client.chat.completions.stream(model="m", messages=MESSAGES), rec) as stream:
        assert seen == [True]
        assert in_llm_call.get() is False
        stream.get_final_completion()
    assert rec.only == CHAT_MESSAGE


async def test_async_manager_sends_its_request_with_the_llm_call_flag_set() -> None:
    """The same for ``async with`` on AsyncMessageStreamManager."""
    seen: list[bool] = []
    client = anthropic.AsyncAnthropic(
        api_key="test",
        base_url="http://127.0.0.1:9",
        max_retries=0,
        http_client=httpx2.AsyncClient(
            transport=httpx2.MockTransport(_flag_watching_handler(_anthropic_sse(ANTHROPIC_EVENTS), seen))
        ),
    )
    rec = Recorder()
    async with wrap_stream(client.messages.stream(**ANTHROPIC_ARGS), rec) as stream:
        assert seen == [True]
        assert in_llm_call.get() is False
        await stream.get_final_message()
    assert rec.only == ANTHROPIC_MESSAGE


def test_stream_entered_by_hand_outlives_its_manager() -> None:
    """``stream = manager.__enter__()`` drops the manager at once; the stream,
    read afterwards, still records the whole reply, once."""
    rec = Recorder()
    stream = wrap_stream(
        _anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.stream(**ANTHROPIC_ARGS), rec
    ).__enter__()
    gc.collect()
    assert rec.calls == []
    assert isinstance(stream, MessageStream)
    assert [event.type for event in stream][-1] == "message_stop"
    stream.__exit__(None, None, None)
    del stream
    gc.collect()
    assert rec.only == ANTHROPIC_MESSAGE


def test_stream_entered_by_hand_then_dropped_records_what_arrived() -> None:
    """Once both the manager and the stream it handed out are garbage, what
    arrived is recorded (by the stream's collection, not the manager's)."""
    rec = Recorder()
    stream = wrap_stream(
        _anthropic(_anthropic_sse(ANTHROPIC_EVENTS)).messages.stream(**ANTHROPIC_ARGS), rec
    ).__enter__()
    gc.collect()
    for event in stream:
        if event.type == "text":
            break
    assert rec.calls == []
    del stream, event
    gc.collect()
    assert rec.only == {
        "role": "assistant",
        "content": "I'll check ",
        "reasoningContent": "Two cities.",
        "model": "claude-sonnet-4-6",
    }


def test_provider_chunks_are_read_through_the_fast_paths() -> None:
    """Stream chunks and their parts are pydantic models or dicts, which ``get``
    reads without ``getattr``; ``accumulate`` still merges them the same."""
    from ststrace._adapters._common import _layouts

    client = _openai(_chat_sse(CHAT_CHUNKS))
    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert accumulate(chunks) == CHAT_MESSAGE
    delta = chunks[0].choices[0].delta
    assert delta.model_extra == {"reasoning_content": "The user "}
    tool_call = chunks[4].choices[0].delta.tool_calls[0]  # type: ignore[index]
    for obj in (chunks[0], chunks[0].choices[0], delta, tool_call):
        assert _layouts[type(obj)].kind == "pydantic", type(obj)

