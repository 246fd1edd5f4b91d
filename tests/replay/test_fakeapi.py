"""The fake LLM API is accepted by the real client libraries, strictly validated.

These tests are the proof that the server's replies are realistic: every client
runs with ``_strict_response_validation=True`` (where offered), so a missing or
mistyped field fails here rather than silently in the instrumentation tests.
"""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

import pytest

from fakeapi_fixtures import (  # noqa: F401  (fixtures are used by name)
    anthropic_async,
    anthropic_client,
    anthropic_sync,
    fake_api,
    hf_async,
    hf_sync,
    no_external_network,
    openai_async,
    openai_client,
    openai_sync,
)
from ststrace.testing import (
    DEFAULT_TOOL_CALLS,
    ExternalNetworkError,
    FakeAPI,
    ScriptedToolCall,
    localhost_only,
)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
pytest.importorskip("huggingface_hub")

USER = [{"role": "user", "content": "What's the weather and time in Paris?"}]
CHAT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in a time zone.",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
        },
    },
]
RESPONSES_TOOLS = [{"type": "function", "strict": False, **t["function"]} for t in CHAT_TOOLS]
ANTHROPIC_TOOLS = [
    {"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]}
    for t in CHAT_TOOLS
]
RESULTS = {"get_weather": "Sunny, 21 C", "get_time": "14:05"}
EXPECTED_ANSWER = "Here is what I found: Sunny, 21 C; 14:05"


def _raw_post(api: FakeAPI, path: str, body: dict[str, Any]) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=5)
    conn.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data


def _sse_events(data: bytes) -> list[tuple[str | None, str]]:
    events: list[tuple[str | None, str]] = []
    for block in data.decode().split("\n\n"):
        if not block:
            continue
        name = None
        payload = ""
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                payload = line[len("data: ") :]
        events.append((name, payload))
    return events


# -- OpenAI Chat Completions ------------------------------------------------


def test_chat_json_two_parallel_tool_calls(fake_api: FakeAPI, openai_sync: Any) -> None:
    """With tools offered, the reply asks for both default tools with ids, arguments and reasoning."""
    completion = openai_sync.chat.completions.create(model="gpt-test", messages=USER, tools=CHAT_TOOLS)
    assert isinstance(completion, openai.types.chat.ChatCompletion)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    message = choice.message
    assert message.content == "Let me look that up."
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("call_weather01", "get_weather", {"city": "Paris"}),
        ("call_time02", "get_time", {"tz": "Europe/Paris"}),
    ]
    assert message.reasoning_content == "I should call get_weather and get_time."
    assert completion.model == "gpt-test"
    assert completion._request_id == "req_fake0001"
    request = fake_api.last_request
    assert (request.method, request.path, request.endpoint) == ("POST", "/v1/chat/completions", "chat")
    assert request.headers["authorization"] == "Bearer test"
    assert request.headers["host"] == f"127.0.0.1:{fake_api.port}"
    assert request.body["tools"] == CHAT_TOOLS
    assert "stream_options" not in request.body


def test_chat_json_text_without_tools(openai_sync: Any) -> None:
    """Without tools the reply is the scripted text with reasoning."""
    completion = openai_sync.chat.completions.create(model="m", messages=USER)
    message = completion.choices[0].message
    assert (message.content, message.tool_calls, completion.choices[0].finish_reason) == (
        "Hello from the fake API.",
        None,
        "stop",
    )
    assert message.reasoning_content == "A short greeting is enough here."
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens


def test_chat_reasoning_can_be_disabled_or_renamed(fake_api: FakeAPI, openai_sync: Any) -> None:
    """`reasoning=False` drops the field; `chat_reasoning_field` renames it."""
    fake_api.reasoning = False
    message = openai_sync.chat.completions.create(model="m", messages=USER).choices[0].message
    assert message.model_extra == {}
    fake_api.reasoning = True
    fake_api.chat_reasoning_field = "reasoning"
    message = openai_sync.chat.completions.create(model="m", messages=USER).choices[0].message
    assert message.model_extra == {"reasoning": "A short greeting is enough here."}


def test_chat_stream_splits_tool_arguments_over_many_chunks(fake_api: FakeAPI, openai_sync: Any) -> None:
    """Streamed tool calls arrive as an opening delta then many argument fragments, at indexes 0 and 1."""
    chunks = list(openai_sync.chat.completions.create(model="m", messages=USER, tools=CHAT_TOOLS, stream=True))
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    calls: dict[int, dict[str, str]] = {}
    fragments: dict[int, int] = {}
    reasoning = content = ""
    for chunk in chunks:
        delta = chunk.choices[0].delta
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] += tc.id or ""
            slot["name"] += tc.function.name or ""
            slot["arguments"] += tc.function.arguments or ""
            fragments[tc.index] = fragments.get(tc.index, 0) + 1
    assert sorted(calls) == [0, 1]
    assert calls[0] == {"id": "call_weather01", "name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert calls[1] == {"id": "call_time02", "name": "get_time", "arguments": '{"tz":"Europe/Paris"}'}
    assert min(fragments.values()) >= 4
    assert (reasoning, content) == ("I should call get_weather and get_time.", "Let me look that up.")
    assert all(c.usage is None for c in chunks)
    assert "stream_options" not in fake_api.last_request.body


def test_chat_stream_usage_only_when_asked(openai_sync: Any) -> None:
    """`stream_options.include_usage` adds a final choice-less usage chunk, as OpenAI does."""
    chunks = list(
        openai_sync.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_stream_helper_final_completion(openai_sync: Any) -> None:
    """The `chat.completions.stream()` helper accumulates both tool calls and emits their done events."""
    with openai_sync.chat.completions.stream(model="m", messages=USER, tools=CHAT_TOOLS) as stream:
        events = list(stream)
        final = stream.get_final_completion()
    done = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert [(e.index, e.name, e.arguments) for e in done] == [
        (0, "get_weather", '{"city":"Paris"}'),
        (1, "get_time", '{"tz":"Europe/Paris"}'),
    ]
    message = final.choices[0].message
    assert [c.id for c in message.tool_calls] == ["call_weather01", "call_time02"]
    assert message.content == "Let me look that up."


def test_chat_two_turn_tool_loop(fake_api: FakeAPI, openai_sync: Any) -> None:
    """Tool results appended after the assistant turn produce a final answer quoting them."""
    messages: list[dict[str, Any]] = list(USER)
    first = openai_sync.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS).choices[0].message
    messages.append(first.model_dump(exclude_none=True, exclude={"reasoning_content"}))
    for call in first.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": RESULTS[call.function.name]})
    second = openai_sync.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == EXPECTED_ANSWER
    assert second.choices[0].message.tool_calls is None
    assert [r.body["messages"][-1]["role"] for r in fake_api.requests] == ["user", "tool"]
    # A new user turn after the answer starts another tool round.
    messages += [{"role": "assistant", "content": EXPECTED_ANSWER}, {"role": "user", "content": "And Rome?"}]
    third = openai_sync.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS)
    assert third.choices[0].finish_reason == "tool_calls"


async def test_async_chat_stream_tool_loop(openai_async: Any) -> None:
    """The async client streams the same script and completes the loop."""
    messages: list[dict[str, Any]] = list(USER)
    async with openai_async.chat.completions.stream(model="m", messages=messages, tools=CHAT_TOOLS) as stream:
        first = (await stream.get_final_completion()).choices[0].message
    assert [c.function.name for c in first.tool_calls] == ["get_weather", "get_time"]
    messages.append({"role": "assistant", "tool_calls": [c.model_dump(exclude={"index"}) for c in first.tool_calls]})
    messages += [{"role": "tool", "tool_call_id": c.id, "content": RESULTS[c.function.name]} for c in first.tool_calls]
    stream2 = await openai_async.chat.completions.create(model="m", messages=messages, tools=CHAT_TOOLS, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream2])
    assert text == EXPECTED_ANSWER


def test_configured_tool_calls(fake_api: FakeAPI, openai_sync: Any, anthropic_sync: Any) -> None:
    """Tool names, arguments and ids come from the instance's `tool_calls`."""
    fake_api.tool_calls = (ScriptedToolCall("lookup", {"q": "ünï", "n": [1, 2]}, "abc"),)
    fake_api.tool_preamble = None
    message = openai_sync.chat.completions.create(model="m", messages=USER, tools=CHAT_TOOLS).choices[0].message
    assert message.content is None
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("call_abc", "lookup", {"q": "ünï", "n": [1, 2]})
    ]
    reply = anthropic_sync.messages.create(model="c", max_tokens=64, messages=USER, tools=ANTHROPIC_TOOLS)
    assert [(b.type, getattr(b, "id", None)) for b in reply.content] == [("thinking", None), ("tool_use", "toolu_abc")]


def test_parallel_tool_calls_false_gives_one_call(openai_sync: Any, anthropic_sync: Any) -> None:
    """`parallel_tool_calls=False` / `disable_parallel_tool_use` limit the reply to the first tool call."""
    message = (
        openai_sync.chat.completions.create(model="m", messages=USER, tools=CHAT_TOOLS, parallel_tool_calls=False)
        .choices[0]
        .message
    )
    assert [c.id for c in message.tool_calls] == ["call_weather01"]
    reply = anthropic_sync.messages.create(
        model="c",
        max_tokens=64,
        messages=USER,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
    )
    assert [b.id for b in reply.content if b.type == "tool_use"] == ["toolu_weather01"]


def test_tool_choice_none_means_text(openai_sync: Any) -> None:
    completion = openai_sync.chat.completions.create(model="m", messages=USER, tools=CHAT_TOOLS, tool_choice="none")
    assert completion.choices[0].message.content == "Hello from the fake API."


# -- OpenAI Responses API ---------------------------------------------------


def test_responses_json_items(fake_api: FakeAPI, openai_sync: Any) -> None:
    """JSON replies carry reasoning, message and two function_call items."""
    response = openai_sync.responses.create(model="m", input=USER[0]["content"], tools=RESPONSES_TOOLS)
    assert isinstance(response, openai.types.responses.Response)
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call", "function_call"]
    assert response.output[0].summary[0].text == "I should call get_weather and get_time."
    assert response.output_text == "Let me look that up."
    calls = [(i.id, i.call_id, i.name, i.arguments) for i in response.output[2:]]
    assert calls == [
        ("fc_weather01", "call_weather01", "get_weather", '{"city":"Paris"}'),
        ("fc_time02", "call_time02", "get_time", '{"tz":"Europe/Paris"}'),
    ]
    assert [t.name for t in response.tools] == ["get_weather", "get_time"]
    assert fake_api.last_request.path == "/v1/responses"


def test_responses_stream_events(openai_sync: Any) -> None:
    """Streamed events come in OpenAI's order with contiguous sequence numbers and split arguments."""
    events = list(openai_sync.responses.create(model="m", input=USER, tools=RESPONSES_TOOLS, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    for kind in (
        "response.reasoning_summary_text.delta",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ):
        assert kind in kinds
    arg_deltas: dict[str, str] = {}
    for e in events:
        if e.type == "response.function_call_arguments.delta":
            arg_deltas[e.item_id] = arg_deltas.get(e.item_id, "") + e.delta
    assert arg_deltas == {"fc_weather01": '{"city":"Paris"}', "fc_time02": '{"tz":"Europe/Paris"}'}
    assert kinds.count("response.function_call_arguments.delta") >= 8
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    assert summary == "I should call get_weather and get_time."
    assert events[-1].response.status == "completed"
    assert events[-1].response.output_text == "Let me look that up."


def test_responses_stream_helper_and_tool_loop(openai_sync: Any) -> None:
    """`responses.stream()` builds the final response; function_call_output items yield the answer."""
    with openai_sync.responses.stream(model="m", input=USER, tools=RESPONSES_TOOLS) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    calls = [i for i in final.output if i.type == "function_call"]
    assert [c.call_id for c in calls] == ["call_weather01", "call_time02"]
    follow_up: list[Any] = list(USER) + [i.model_dump(exclude_none=True) for i in final.output]
    follow_up = [i for i in follow_up if i.get("type") != "reasoning"]
    follow_up += [{"type": "function_call_output", "call_id": c.call_id, "output": RESULTS[c.name]} for c in calls]
    answer = openai_sync.responses.create(model="m", input=follow_up, tools=RESPONSES_TOOLS)
    assert answer.output_text == EXPECTED_ANSWER
    assert [i.type for i in answer.output] == ["reasoning", "message"]


async def test_async_responses_stream(openai_async: Any) -> None:
    stream = await openai_async.responses.create(model="m", input="hi", stream=True)
    text = "".join([e.delta async for e in stream if e.type == "response.output_text.delta"])
    assert text == "Hello from the fake API."


def test_responses_sse_wire_format(fake_api: FakeAPI) -> None:
    """Each Responses event has an `event:` line equal to its type, and there is no [DONE]."""
    response, data = _raw_post(fake_api, "/v1/responses", {"model": "m", "input": "hi", "stream": True})
    assert response.getheader("content-type", "").startswith("text/event-stream")
    assert response.getheader("transfer-encoding") == "chunked"
    events = _sse_events(data)
    assert all(name == json.loads(payload)["type"] for name, payload in events)
    assert "[DONE]" not in data.decode()


# -- Chat Completions wire format -------------------------------------------


def test_chat_sse_wire_format(fake_api: FakeAPI) -> None:
    """Chat chunks are bare `data:` lines ending in `data: [DONE]`."""
    body = {"model": "m", "messages": USER, "tools": CHAT_TOOLS, "stream": True}
    response, data = _raw_post(fake_api, "/chat/completions", body)
    assert response.status == 200
    events = _sse_events(data)
    assert events[-1] == (None, "[DONE]")
    assert all(name is None for name, _ in events)
    assert len(events) > 20
    assert data.endswith(b"data: [DONE]\n\n")


# -- Anthropic Messages -----------------------------------------------------


def test_anthropic_json_blocks(fake_api: FakeAPI, anthropic_sync: Any) -> None:
    """JSON replies carry thinking (with signature), text and two tool_use blocks."""
    message = anthropic_sync.messages.create(model="claude-test", max_tokens=256, messages=USER, tools=ANTHROPIC_TOOLS)
    assert isinstance(message, anthropic.types.Message)
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert message.content[0].thinking == "I should call get_weather and get_time."
    assert message.content[0].signature
    assert message.content[1].text == "Let me look that up."
    assert [(b.id, b.name, b.input) for b in message.content[2:]] == [
        ("toolu_weather01", "get_weather", {"city": "Paris"}),
        ("toolu_time02", "get_time", {"tz": "Europe/Paris"}),
    ]
    assert message.stop_reason == "tool_use"
    assert message._request_id == "req_fake0001"
    request = fake_api.last_request
    assert request.path == "/v1/messages"
    assert "anthropic-version" in request.headers
    assert "test" in (request.headers.get("x-api-key"), request.headers.get("authorization", "").removeprefix("Bearer "))


def test_anthropic_raw_stream_events(anthropic_sync: Any) -> None:
    """`create(stream=True)` yields every delta kind; tool input arrives as many JSON fragments."""
    events = list(
        anthropic_sync.messages.create(model="c", max_tokens=256, messages=USER, tools=ANTHROPIC_TOOLS, stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 4
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"} == set(deltas)
    fragments = [e.delta.partial_json for e in events if e.type == "content_block_delta" and e.index == 2]
    assert len(fragments) >= 4 and json.loads("".join(fragments)) == {"city": "Paris"}
    assert events[-2].delta.stop_reason == "tool_use"


def test_anthropic_sse_wire_format(fake_api: FakeAPI) -> None:
    """Every Anthropic event is named with an `event:` line, including `ping`."""
    body = {"model": "c", "max_tokens": 10, "messages": USER, "stream": True}
    _, data = _raw_post(fake_api, "/v1/messages", body)
    events = _sse_events(data)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert all(name == json.loads(payload)["type"] for name, payload in events)


def test_anthropic_stream_helper_two_turn_loop(fake_api: FakeAPI, anthropic_sync: Any) -> None:
    """`messages.stream()` merges tool input JSON; tool_result blocks produce the final answer."""
    with anthropic_sync.messages.stream(model="c", max_tokens=256, messages=USER, tools=ANTHROPIC_TOOLS) as stream:
        first = stream.get_final_message()
    uses = [b for b in first.content if b.type == "tool_use"]
    assert [(b.id, b.input) for b in uses] == [("toolu_weather01", {"city": "Paris"}), ("toolu_time02", {"tz": "Europe/Paris"})]
    assert first.content[0].signature == fake_api_signature(anthropic_sync)
    messages: list[dict[str, Any]] = list(USER)
    messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": [{"type": "text", "text": RESULTS[b.name]}]}
                for b in uses
            ],
        }
    )
    with anthropic_sync.messages.stream(model="c", max_tokens=256, messages=messages, tools=ANTHROPIC_TOOLS) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[1].text == EXPECTED_ANSWER
    assert final.stop_reason == "end_turn"


def fake_api_signature(client: Any) -> str:
    # The signature is what the non-streamed reply carries for the same thinking text.
    blocks = client.messages.create(model="c", max_tokens=9, messages=USER, tools=ANTHROPIC_TOOLS).content
    return str(blocks[0].signature)


async def test_async_anthropic_stream(anthropic_async: Any) -> None:
    async with anthropic_async.messages.stream(model="c", max_tokens=64, messages=USER) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Hello from the fake API."
    assert [b.type for b in final.content] == ["thinking", "text"]


# -- Hugging Face InferenceClient ---------------------------------------------


def test_hf_chat_completion(fake_api: FakeAPI, hf_sync: Any) -> None:
    """`InferenceClient(base_url=…/v1)` posts to /v1/chat/completions and parses the reply."""
    fake_api.chat_reasoning_field = "reasoning"
    output = hf_sync.chat_completion(messages=USER, model="tgi", tools=CHAT_TOOLS)
    message = output.choices[0].message
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls] == [
        ("call_weather01", "get_weather", '{"city":"Paris"}'),
        ("call_time02", "get_time", '{"tz":"Europe/Paris"}'),
    ]
    assert message.reasoning == "I should call get_weather and get_time."
    assert fake_api.last_request.path == "/v1/chat/completions"
    assert fake_api.last_request.headers["authorization"] == "Bearer test"


def test_hf_stream_via_chat_completions_create(hf_sync: Any) -> None:
    chunks = list(hf_sync.chat.completions.create(messages=USER, model="tgi", stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello from the fake API."
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_hf_async_stream_tool_calls(hf_async: Any) -> None:
    stream = await hf_async.chat_completion(messages=USER, model="tgi", tools=CHAT_TOOLS, stream=True)
    args: dict[int, str] = {}
    async for chunk in stream:
        for tc in chunk.choices[0].delta.tool_calls or []:
            args[tc.index] = args.get(tc.index, "") + (tc.function.arguments or "")
    assert args == {0: '{"city":"Paris"}', 1: '{"tz":"Europe/Paris"}'}


# -- Errors and broken streams ---------------------------------------------


def test_openai_errors(fake_api: FakeAPI, openai_sync: Any) -> None:
    """`fail_next` returns OpenAI's error JSON; the request after it succeeds."""
    fake_api.fail_next(400, "bad tools")
    with pytest.raises(openai.BadRequestError) as info:
        openai_sync.chat.completions.create(model="m", messages=USER)
    assert info.value.body == {"message": "bad tools", "type": "invalid_request_error", "param": None, "code": None}
    fake_api.fail_next(500, times=2)
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            openai_sync.responses.create(model="m", input="hi", stream=True)
    assert openai_sync.chat.completions.create(model="m", messages=USER).choices[0].message.content


def test_anthropic_errors(fake_api: FakeAPI, anthropic_sync: Any) -> None:
    fake_api.fail_next(400, "max_tokens: field required")
    with pytest.raises(anthropic.BadRequestError) as info:
        anthropic_sync.messages.create(model="c", max_tokens=1, messages=USER)
    assert info.value.body["error"] == {"type": "invalid_request_error", "message": "max_tokens: field required"}
    fake_api.fail_next(529)
    with pytest.raises(anthropic.OverloadedError):
        anthropic_sync.messages.create(model="c", max_tokens=1, messages=USER, stream=True)


def test_hf_error(fake_api: FakeAPI, hf_sync: Any) -> None:
    from huggingface_hub.errors import BadRequestError

    fake_api.fail_next(400, "bad request for hf")
    with pytest.raises(BadRequestError, match="bad request for hf"):
        hf_sync.chat_completion(messages=USER, model="tgi")


def test_dropped_stream_raises_mid_iteration(fake_api: FakeAPI, openai_sync: Any, anthropic_sync: Any) -> None:
    """`drop_next_stream` cuts the body after N events, so iteration fails after yielding some."""
    fake_api.drop_next_stream(after_events=3)
    received: list[Any] = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in openai_sync.chat.completions.create(model="m", messages=USER, stream=True):
            received.append(chunk)
    assert len(received) == 3
    fake_api.drop_next_stream(after_events=4)
    with pytest.raises(Exception) as info:
        list(anthropic_sync.messages.create(model="c", max_tokens=9, messages=USER, stream=True))
    assert not isinstance(info.value, AssertionError)
    assert openai_sync.chat.completions.create(model="m", messages=USER).choices[0].message.content


def test_unknown_path_and_bad_json(fake_api: FakeAPI) -> None:
    response, data = _raw_post(fake_api, "/v1/embeddings", {"input": "x"})
    assert response.status == 404 and "error" in json.loads(data)
    conn = http.client.HTTPConnection("127.0.0.1", fake_api.port, timeout=5)
    conn.request("POST", "/v1/chat/completions", body=b"{not json", headers={"content-type": "application/json"})
    bad = conn.getresponse()
    assert bad.status == 400 and json.loads(bad.read())["error"]["type"] == "invalid_request_error"
    conn.close()
    assert [r.raw for r in fake_api.requests][-1] == b"{not json"


# -- The server itself and the network guard --------------------------------


def test_lifecycle_and_reset() -> None:
    """The server binds 127.0.0.1 on an ephemeral port and stops cleanly; `reset` forgets state."""
    api = FakeAPI()
    with pytest.raises(RuntimeError):
        api.url
    with api:
        assert api.url.startswith("http://127.0.0.1:") and api.port > 0
        api.fail_next(500)
        _raw_post(api, "/v1/messages", {"model": "c", "messages": USER})
        api.reset()
        assert api.requests == []
        response, _ = _raw_post(api, "/v1/messages", {"model": "c", "messages": USER})
        assert response.status == 200
        port = api.port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert DEFAULT_TOOL_CALLS[0].arguments_json == '{"city":"Paris"}'


@pytest.mark.allow_refused_network
def test_guard_refuses_non_loopback() -> None:
    """Inside `localhost_only`, look-ups and connections to other hosts fail before any packet."""
    real_connect = socket.socket.connect
    with localhost_only() as attempts:
        with pytest.raises(ExternalNetworkError):
            socket.getaddrinfo("example.com", 443)
        with pytest.raises(ExternalNetworkError):
            socket.create_connection(("192.0.2.1", 80), timeout=0.5)
        with FakeAPI() as api:
            response, _ = _raw_post(api, "/v1/chat/completions", {"model": "m", "messages": USER})
            assert response.status == 200
        assert len(attempts) == 2
    assert socket.socket.connect is real_connect


def test_example_agent_runs_offline(tmp_path: Any) -> None:
    """examples/openai_agent.py, with no OPENAI_API_KEY, runs the full loop on the fake server.

    It runs in a subprocess (``instrument()`` patches openai process-wide) under
    the network guard, and its trace must validate with every tool call paired.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "openai_agent.py"
    script = (
        "import runpy, sys\n"
        "from ststrace.testing import localhost_only\n"
        "with localhost_only() as refused:\n"
        f"    runpy.run_path({str(example)!r}, run_name='__main__')\n"
        "sys.exit(3 if refused else 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["STSTRACE_DIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "Here is what I found: Sunny, 21 C; " in proc.stdout
    traces = list(tmp_path.glob("*.jsonl"))
    assert len(traces) == 1 and f"trace: {traces[0]}" in proc.stdout

    import ststrace

    assert ststrace.validate(traces[0]) == []
    messages = ststrace.read(traces[0]).messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in messages[2]["toolCalls"]] == ["call_weather01", "call_time02"]
    assert [m["toolCallId"] for m in messages[3:5]] == ["call_weather01", "call_time02"]
    assert messages[3]["content"] == "Sunny, 21 C"


def test_scripted_replies_are_served_in_order_then_planning_resumes(
    fake_api: FakeAPI, openai_sync: Any, anthropic_sync: Any
) -> None:
    """``FakeAPI.script``: each request takes the next scripted reply whatever it
    holds (tools offered or not, any endpoint, streamed or not); then the default
    planning answers again. ``reset()`` forgets what is left."""
    from ststrace.testing import ScriptedReply
    from ststrace.testing.fakeapi import DEFAULT_TEXT_REPLY

    final = ScriptedToolCall("final_answer", {"answer": "42"}, "fin01")
    fake_api.script(
        ScriptedReply(text="Plan: look it up."),
        ScriptedReply(text=None, tool_calls=(final,), reasoning="Done."),
        ScriptedReply(text="From the script."),
    )
    messages = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "final_answer", "parameters": {"type": "object"}}}]
    first = openai_sync.chat.completions.create(model="m", messages=messages, tools=tools)
    assert first.choices[0].message.content == "Plan: look it up." and first.choices[0].message.tool_calls is None
    second = openai_sync.chat.completions.create(model="m", messages=messages)
    msg = second.choices[0].message
    assert msg.content is None and msg.reasoning_content == "Done."  # type: ignore[attr-defined]
    assert [(c.id, c.function.name, c.function.arguments) for c in msg.tool_calls] == [
        ("call_fin01", "final_answer", '{"answer":"42"}')
    ]
    third = anthropic_sync.messages.create(model="m", max_tokens=10, messages=messages)
    assert [b.text for b in third.content if b.type == "text"] == ["From the script."]
    assert openai_sync.chat.completions.create(model="m", messages=messages).choices[0].message.content == (
        DEFAULT_TEXT_REPLY
    )
    fake_api.script(ScriptedReply(text="never served"))
    fake_api.reset()
    assert openai_sync.chat.completions.create(model="m", messages=messages).choices[0].message.content == (
        DEFAULT_TEXT_REPLY
    )


def test_scripted_replies_for_one_conversation(fake_api: FakeAPI, openai_sync: Any, anthropic_sync: Any) -> None:
    """``ScriptedReply(when=...)`` serves only requests whose first user message
    contains that text, in order, so two agents running at once each get theirs;
    a request no reply matches gets the default planning."""
    from ststrace.testing import ScriptedReply
    from ststrace.testing.fakeapi import DEFAULT_TEXT_REPLY

    fake_api.script(
        ScriptedReply(text="parent 1", when="plan the trip"),
        ScriptedReply(text="child 1", when="find a hotel"),
        ScriptedReply(text="parent 2", when="plan the trip"),
    )
    parent = [{"role": "user", "content": "Please plan the trip."}]
    child = [{"role": "user", "content": [{"type": "text", "text": "Now find a hotel."}]}]

    def chat(messages: Any) -> Any:
        return openai_sync.chat.completions.create(model="m", messages=messages).choices[0].message.content

    assert chat(child) == "child 1"
    assert [b.text for b in anthropic_sync.messages.create(model="m", max_tokens=10, messages=parent).content] == [
        "parent 1"
    ]
    assert chat(child) == DEFAULT_TEXT_REPLY
    assert chat(parent + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]) == "parent 2"
