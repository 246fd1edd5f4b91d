"""``ststrace.instrument("huggingface_hub")`` with the real ``InferenceClient`` /
``AsyncInferenceClient`` against the local fake server: ``chat_completion`` and
its OpenAI-style alias ``chat.completions.create``, streamed or not."""

from __future__ import annotations

import gc
import json
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

huggingface_hub = pytest.importorskip("huggingface_hub")

from huggingface_hub import ChatCompletionOutput, ChatCompletionStreamOutput  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session, llm, tool  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_decorators_helpers import trace_dir_files  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    CHAT_TOOLS,
    INPUTS,
    MODEL,
    REASONING_TOOLS,
    TIME_RESULT,
    WEATHER_RESULT,
    answer_reply,
    assistants,
    chat_messages,
    instrumented,
    new_trace,
    normalised,
    patched,
    recorded,
    tool_reply,
)

__all__ = ["patched"]


@pytest.fixture(autouse=True)
def _reasoning_field(fake_api: FakeAPI) -> None:
    # TGI and huggingface_hub's types call the reasoning field "reasoning".
    fake_api.chat_reasoning_field = "reasoning"


@dataclass
class Variant:
    name: str
    run: Callable[[Any], Any]


def _chat_completion(c: Any) -> Any:
    r = c.chat_completion(chat_messages(), model=MODEL, tools=CHAT_TOOLS)
    assert type(r) is ChatCompletionOutput
    return r


def _chat_completion_stream(c: Any) -> Any:
    s = c.chat_completion(chat_messages(), model=MODEL, tools=CHAT_TOOLS, stream=True)
    assert isinstance(s, types.GeneratorType)
    chunks = [chunk for chunk in s]
    assert all(type(chunk) is ChatCompletionStreamOutput for chunk in chunks)
    return chunks


def _alias_create(c: Any) -> Any:
    r = c.chat.completions.create(messages=chat_messages(), model=MODEL, tools=CHAT_TOOLS)
    assert type(r) is ChatCompletionOutput
    return r


def _alias_create_stream_next(c: Any) -> Any:
    s = c.chat.completions.create(messages=chat_messages(), model=MODEL, tools=CHAT_TOOLS, stream=True)
    first = next(s)
    return [first, *s]


SYNC_VARIANTS = [
    Variant("chat_completion", _chat_completion),
    Variant("chat_completion-stream", _chat_completion_stream),
    Variant("chat.completions.create", _alias_create),
    Variant("chat.completions.create-stream-next", _alias_create_stream_next),
]


async def _achat_completion(c: Any) -> Any:
    r = await c.chat_completion(chat_messages(), model=MODEL, tools=CHAT_TOOLS)
    assert type(r) is ChatCompletionOutput
    return r


async def _achat_completion_stream(c: Any) -> Any:
    s = await c.chat_completion(chat_messages(), model=MODEL, tools=CHAT_TOOLS, stream=True)
    assert isinstance(s, types.AsyncGeneratorType)
    return [chunk async for chunk in s]


async def _aalias_create(c: Any) -> Any:
    return await c.chat.completions.create(messages=chat_messages(), model=MODEL, tools=CHAT_TOOLS)


async def _aalias_create_stream(c: Any) -> Any:
    s = await c.chat.completions.create(messages=chat_messages(), model=MODEL, tools=CHAT_TOOLS, stream=True)
    first = await s.__anext__()
    return [first, *[chunk async for chunk in s]]


ASYNC_VARIANTS = [
    Variant("chat_completion", _achat_completion),
    Variant("chat_completion-stream", _achat_completion_stream),
    Variant("chat.completions.create", _aalias_create),
    Variant("chat.completions.create-stream-anext", _aalias_create_stream),
]


def _same_request(a: Any, b: Any) -> None:
    assert (a.method, a.path) == (b.method, b.path)
    assert a.raw == b.raw, "instrumentation changed the request body"
    # huggingface_hub sends a random x-amzn-trace-id with every request.
    assert {**a.headers, "x-amzn-trace-id": ""} == {**b.headers, "x-amzn-trace-id": ""}


@pytest.mark.parametrize("variant", SYNC_VARIANTS, ids=lambda v: v.name)
def test_sync_call_is_recorded_and_unchanged(variant: Variant, hf_sync: Any, fake_api: FakeAPI, tmp_path: Path) -> None:
    plain = normalised(variant.run(hf_sync))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("hf"):
        ststrace.instrument("huggingface_hub")
        with Session(path):
            seen = normalised(variant.run(hf_sync))
    assert seen == plain
    _same_request(fake_api.last_request, plain_request)
    assert len(fake_api.requests) == 2
    assert recorded(path) == [*INPUTS, tool_reply()]


@pytest.mark.parametrize("variant", ASYNC_VARIANTS, ids=lambda v: v.name)
async def test_async_call_is_recorded_and_unchanged(
    variant: Variant, hf_async: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    plain = normalised(await variant.run(hf_async))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("huggingface_hub"):
        ststrace.instrument("hf")
        async with Session(path):
            seen = normalised(await variant.run(hf_async))
    assert seen == plain
    _same_request(fake_api.last_request, plain_request)
    assert recorded(path) == [*INPUTS, tool_reply()]


def test_outside_a_session_nothing_is_recorded(hf_sync: Any, patched: None) -> None:
    for variant in SYNC_VARIANTS:
        variant.run(hf_sync)
    stream = hf_sync.chat_completion(chat_messages(), model=MODEL, stream=True)
    assert type(stream) is types.GeneratorType
    stream.close()
    assert trace_dir_files() == []


async def test_async_outside_a_session_nothing_is_recorded(hf_async: Any, patched: None) -> None:
    for variant in ASYNC_VARIANTS:
        await variant.run(hf_async)
    stream = await hf_async.chat_completion(chat_messages(), model=MODEL, stream=True)
    assert type(stream) is types.AsyncGeneratorType
    await stream.aclose()
    assert trace_dir_files() == []


def test_call_inside_llm_function_is_recorded_once(hf_sync: Any, patched: None, tmp_path: Path) -> None:
    @llm
    def ask(messages: list[dict[str, Any]]) -> Any:
        return hf_sync.chat.completions.create(messages=messages, model=MODEL, tools=CHAT_TOOLS, stream=True)

    path = new_trace(tmp_path)
    with Session(path):
        list(ask(chat_messages()))
    assert recorded(path) == [*INPUTS, tool_reply()]


@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_api_error_propagates_unchanged(
    status: int, stream: bool, hf_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    def call() -> None:
        result = hf_sync.chat_completion(chat_messages(), model=MODEL, stream=stream)
        if stream:
            list(result)

    fake_api.fail_next(status)
    with pytest.raises(Exception) as plain:
        call()
    path = new_trace(tmp_path)
    with instrumented("huggingface_hub"):
        with Session(path):
            fake_api.fail_next(status)
            with pytest.raises(Exception) as traced:
                call()
            gc.collect()
    assert type(traced.value) is type(plain.value)
    assert isinstance(traced.value, huggingface_hub.errors.HfHubHTTPError)
    assert assistants(recorded(path)) == []


async def test_async_api_error_propagates_unchanged(
    hf_async: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    async with Session(path):
        fake_api.fail_next(400)
        with pytest.raises(huggingface_hub.errors.HfHubHTTPError):
            await hf_async.chat_completion(chat_messages(), model=MODEL)
    assert assistants(recorded(path)) == []


# 1 role chunk, 10 reasoning deltas, then 3 text deltas ("Let me look ").
CUT_AFTER = 14


def test_dropped_stream_raises_the_clients_error_and_records_what_arrived(
    hf_sync: Any, fake_api: FakeAPI, tmp_path: Path
) -> None:
    fake_api.drop_next_stream(CUT_AFTER)
    with pytest.raises(Exception) as plain:
        list(hf_sync.chat_completion(chat_messages(), model=MODEL, tools=CHAT_TOOLS, stream=True))
    path = new_trace(tmp_path)
    with instrumented("huggingface_hub"):
        with Session(path):
            fake_api.drop_next_stream(CUT_AFTER)
            with pytest.raises(Exception) as traced:
                list(hf_sync.chat_completion(chat_messages(), model=MODEL, tools=CHAT_TOOLS, stream=True))
    assert type(traced.value) is type(plain.value)
    assert recorded(path) == [
        *INPUTS,
        {"role": "assistant", "content": "Let me look ", "reasoningContent": REASONING_TOOLS, "model": MODEL},
    ]


# --------------------------------------------------------------------------- tool loop


@tool
def get_weather(city: str) -> str:
    return WEATHER_RESULT if city == "Paris" else "unknown"


@tool
def get_time(tz: str) -> str:
    return TIME_RESULT if tz == "Europe/Paris" else "unknown"


TOOLS = {"get_weather": get_weather, "get_time": get_time}


def expected_loop(api: FakeAPI) -> list[dict[str, Any]]:
    return [
        *INPUTS,
        tool_reply(),
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "call_weather01"},
        {"role": "tool", "content": TIME_RESULT, "toolCallId": "call_time02"},
        answer_reply(api),
    ]


def _arguments(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else json.loads(value)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_async_tool_loop_trace_is_valid_and_paired(
    stream: bool, hf_async: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    path = new_trace(tmp_path)
    messages = chat_messages()
    async with Session(path):
        for _ in range(4):
            if stream:
                text, calls = "", {}
                async for chunk in await hf_async.chat_completion(messages, model=MODEL, tools=CHAT_TOOLS, stream=True):
                    delta = chunk.choices[0].delta
                    text += delta.content or ""
                    for c in delta.tool_calls or []:
                        entry = calls.setdefault(c.index, {"id": c.id, "name": c.function.name, "arguments": ""})
                        entry["arguments"] += c.function.arguments or ""
                call_list = [calls[i] for i in sorted(calls)]
            else:
                message = (await hf_async.chat_completion(messages, model=MODEL, tools=CHAT_TOOLS)).choices[0].message
                text = message.content or ""
                call_list = [
                    {"id": c.id, "name": c.function.name, "arguments": json.dumps(_arguments(c.function.arguments))}
                    for c in message.tool_calls or []
                ]
            if not call_list:
                break
            messages.append(
                {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [
                        {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                        for c in call_list
                    ],
                }
            )
            for c in call_list:
                result = TOOLS[c["name"]](**_arguments(c["arguments"]))
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
    assert text == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == expected_loop(fake_api)

