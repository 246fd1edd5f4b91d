"""``ststrace.instrument("litellm")``: ``litellm.completion`` / ``acompletion``
against the local fake server (an ``openai/...`` model with ``api_base``).

litellm calls the openai client inside; with both instrumented, each call is
still recorded once, by the outer litellm patch.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Before the import: litellm would otherwise fetch its price list from GitHub.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper  # noqa: E402
from litellm.types.utils import ModelResponse  # noqa: E402

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
    recorded,
    tool_reply,
)

# litellm's own pydantic models warn about ReadOnly TypedDict items on first use.
pytestmark = pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")


@pytest.fixture
def both() -> Iterator[None]:
    """litellm and the openai client it uses, both instrumented."""
    with instrumented("litellm", "openai"):
        yield


def call_kwargs(api: FakeAPI, **extra: Any) -> dict[str, Any]:
    return {
        "model": f"openai/{MODEL}",
        "messages": chat_messages(),
        "tools": CHAT_TOOLS,
        "api_base": api.openai_base_url,
        "api_key": "test",
        "timeout": 5,
        "max_retries": 0,
        **extra,
    }


def _complete(api: FakeAPI, stream: bool) -> Any:
    result = litellm.completion(**call_kwargs(api, stream=stream))
    if not stream:
        assert type(result) is ModelResponse
        return result
    assert isinstance(result, CustomStreamWrapper)
    return [chunk for chunk in result]


async def _acomplete(api: FakeAPI, stream: bool) -> Any:
    result = await litellm.acompletion(**call_kwargs(api, stream=stream))
    if not stream:
        assert type(result) is ModelResponse
        return result
    assert isinstance(result, CustomStreamWrapper)
    return [chunk async for chunk in result]


def _comparable(result: Any) -> str:
    # litellm stamps its own ids and creation times on every response / chunk.
    def scrub(obj: Any) -> Any:
        data = obj.model_dump() if hasattr(obj, "model_dump") else obj
        for key in ("id", "created", "_response_ms"):
            data.pop(key, None)
        return data

    items = result if isinstance(result, list) else [result]
    return normalised([scrub(item) for item in items])


def _check_request(a: Any, b: Any) -> None:
    assert (a.method, a.path) == (b.method, b.path)
    assert a.raw == b.raw, "instrumentation changed the request body"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_completion_is_recorded_once_and_unchanged(stream: bool, fake_api: FakeAPI, tmp_path: Path) -> None:
    plain = _comparable(_complete(fake_api, stream))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("litellm", "openai"):
        ststrace.instrument("litellm")
        with Session(path):
            seen = _comparable(_complete(fake_api, stream))
    assert seen == plain
    _check_request(fake_api.last_request, plain_request)
    assert len(fake_api.requests) == 2
    assert recorded(path) == [*INPUTS, tool_reply()]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_acompletion_is_recorded_once_and_unchanged(stream: bool, fake_api: FakeAPI, tmp_path: Path) -> None:
    plain = _comparable(await _acomplete(fake_api, stream))
    plain_request = fake_api.last_request
    path = new_trace(tmp_path)
    with instrumented("litellm", "openai"):
        async with Session(path):
            seen = _comparable(await _acomplete(fake_api, stream))
    assert seen == plain
    _check_request(fake_api.last_request, plain_request)
    assert recorded(path) == [*INPUTS, tool_reply()]


def test_outside_a_session_nothing_is_recorded(fake_api: FakeAPI, both: None) -> None:
    _complete(fake_api, False)
    _complete(fake_api, True)
    assert trace_dir_files() == []


def test_call_inside_llm_function_is_recorded_once(fake_api: FakeAPI, both: None, tmp_path: Path) -> None:
    @llm
    def ask(messages: list[dict[str, Any]]) -> Any:
        return litellm.completion(**{**call_kwargs(fake_api), "messages": messages})

    path = new_trace(tmp_path)
    with Session(path):
        ask(chat_messages())
    assert recorded(path) == [*INPUTS, tool_reply()]


def test_api_error_propagates_unchanged(fake_api: FakeAPI, tmp_path: Path) -> None:
    fake_api.fail_next(400)
    with pytest.raises(Exception) as plain:
        litellm.completion(**call_kwargs(fake_api))
    path = new_trace(tmp_path)
    with instrumented("litellm", "openai"):
        with Session(path):
            fake_api.fail_next(400)
            with pytest.raises(Exception) as traced:
                litellm.completion(**call_kwargs(fake_api))
            gc.collect()
    assert type(traced.value) is type(plain.value)
    assert isinstance(traced.value, litellm.BadRequestError)
    assert assistants(recorded(path)) == []


def test_dropped_stream_records_what_arrived(fake_api: FakeAPI, tmp_path: Path) -> None:
    fake_api.drop_next_stream(14)  # role chunk, 10 reasoning deltas, 3 text deltas
    with pytest.raises(Exception) as plain:
        _complete(fake_api, True)
    path = new_trace(tmp_path)
    with instrumented("litellm", "openai"):
        with Session(path):
            fake_api.drop_next_stream(14)
            with pytest.raises(Exception) as traced:
                _complete(fake_api, True)
    assert type(traced.value) is type(plain.value)
    assert recorded(path) == [
        *INPUTS,
        {"role": "assistant", "content": "Let me look ", "reasoningContent": REASONING_TOOLS, "model": MODEL},
    ]


@tool
def get_weather(city: str) -> str:
    return WEATHER_RESULT if city == "Paris" else "unknown"


@tool
def get_time(tz: str) -> str:
    return TIME_RESULT if tz == "Europe/Paris" else "unknown"


TOOLS = {"get_weather": get_weather, "get_time": get_time}


async def test_tool_loop_trace_is_valid_and_paired(fake_api: FakeAPI, both: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    messages = chat_messages()
    async with Session(path):
        for _ in range(4):
            response = await litellm.acompletion(**{**call_kwargs(fake_api), "messages": messages})
            message = response.choices[0].message
            if not message.tool_calls:
                break
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                        for c in message.tool_calls
                    ],
                }
            )
            for c in message.tool_calls:
                result = TOOLS[c.function.name](**json.loads(c.function.arguments))
                messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
    assert message.content == fake_api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert recorded(path) == [
        *INPUTS,
        tool_reply(),
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "call_weather01"},
        {"role": "tool", "content": TIME_RESULT, "toolCallId": "call_time02"},
        answer_reply(fake_api),
    ]
