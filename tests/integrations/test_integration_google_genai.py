"""``ststrace.instrument("google_genai")`` with the real ``google-genai`` client
against the local fake Gemini server: ``models.generate_content`` (a manual tool
loop, and automatic function calling), ``generate_content_stream``, the
``client.aio`` twins, ``chats`` and Vertex AI.

google-genai pins tenacity below the main test environment's: these tests run
in environments of their own, with google-genai 2 (.venv-google, the
``test-google`` extra, beside google-adk) and 3 (.venv-side, ``test-side``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

genai = pytest.importorskip("google.genai", reason="google-genai runs in .venv-google and .venv-side (the test-google / test-side extras)")

from google.genai import errors, types  # noqa: E402

import ststrace  # noqa: E402
from ststrace import Session, tool  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from fakeapi_fixtures import GOOGLE_ENV, gemini_client, quiet_google  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    PREAMBLE,
    REASONING_ANSWER,
    REASONING_TOOLS,
    SYSTEM,
    TEXT_REPLY,
    TIME_ARGS,
    TIME_RESULT,
    USER,
    WEATHER_ARGS,
    WEATHER_RESULT,
    instrumented,
    new_trace,
    recorded,
)
from test_decorators_helpers import valid_messages  # noqa: E402

MODEL = "gemini-2.5-flash"
INPUTS = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
GENERATED = re.compile(r"call_[0-9a-f]{24}")


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return WEATHER_RESULT


def get_time(tz: str) -> str:
    """Local time in an IANA time zone."""
    return TIME_RESULT


DECLARATIONS = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="Current weather for a city.",
            parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        ),
        types.FunctionDeclaration(
            name="get_time",
            description="Local time in an IANA time zone.",
            parameters_json_schema={"type": "object", "properties": {"tz": {"type": "string"}}},
        ),
    ]
)
THOUGHTS = types.ThinkingConfig(include_thoughts=True)


def config(tools: list[Any], **extra: Any) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(system_instruction=SYSTEM, tools=tools, thinking_config=THOUGHTS, **extra)


def calls(ids: list[str]) -> list[dict[str, Any]]:
    return [
        {"id": ids[0], "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
        {"id": ids[1], "function": {"name": "get_time", "arguments": TIME_ARGS}},
    ]


def loop(ids: list[str], api: FakeAPI) -> list[dict[str, Any]]:
    """The whole exchange after the inputs: the calls, their results, the answer."""
    return [
        {"role": "assistant", "content": PREAMBLE, "reasoningContent": REASONING_TOOLS, "toolCalls": calls(ids), "model": MODEL},
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": ids[0]},
        {"role": "tool", "content": TIME_RESULT, "toolCallId": ids[1]},
        {
            "role": "assistant",
            "content": api.answer_for([WEATHER_RESULT, TIME_RESULT]),
            "reasoningContent": REASONING_ANSWER,
            "model": MODEL,
        },
    ]


def generated_ids(messages: list[dict[str, Any]]) -> list[str]:
    """The ids ststrace made up for the first reply's id-less function calls."""
    ids = [c["id"] for c in messages[2]["toolCalls"]]
    assert all(GENERATED.fullmatch(i) for i in ids) and len(set(ids)) == 2, ids
    return ids


@pytest.fixture
def api(fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch) -> FakeAPI:
    quiet_google(monkeypatch)
    return fake_api


@pytest.fixture
def patched() -> Iterator[None]:
    with instrumented("google_genai"):
        yield


def answer_turn(response: Any) -> list[types.Content]:
    """The manual loop: run the model's function calls, send back their responses."""
    content = response.candidates[0].content
    results = {"get_weather": get_weather, "get_time": get_time}
    parts = [
        types.Part.from_function_response(
            name=part.function_call.name, response={"result": results[part.function_call.name](**part.function_call.args)}
        )
        for part in content.parts
        if part.function_call
    ]
    for part, call in zip(parts, [p.function_call for p in content.parts if p.function_call]):
        assert part.function_response is not None
        part.function_response.id = call.id  # None from the Gemini API, the call's id when it sent one
    return [content, types.Content(role="user", parts=parts)]


def test_manual_tool_loop_pairs_id_less_results_by_name(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """The Gemini API sends no call ids: the recorded calls get generated ones,
    and the results sent back (with the function's name only) answer them."""
    client = gemini_client(api)
    path = new_trace(tmp_path)
    history: list[Any] = [types.Content(role="user", parts=[types.Part.from_text(text=USER)])]
    with Session(path):
        first = client.models.generate_content(model=MODEL, contents=history, config=config([DECLARATIONS]))
        assert [p.function_call.id for p in first.candidates[0].content.parts if p.function_call] == [None, None]
        history += answer_turn(first)
        final = client.models.generate_content(model=MODEL, contents=history, config=config([DECLARATIONS]))
    assert final.text == api.answer_for([WEATHER_RESULT, TIME_RESULT])
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]


def test_manual_tool_loop_keeps_the_providers_call_ids(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """A reply whose function calls carry ids is recorded with them, and the
    function responses are paired by id."""
    api.gemini_call_ids = True
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        first = client.models.generate_content(model=MODEL, contents=USER, config=config([DECLARATIONS]))
        history: list[Any] = [USER, *answer_turn(first)]
        client.models.generate_content(model=MODEL, contents=history, config=config([DECLARATIONS]))
    assert recorded(path) == [*INPUTS, *loop(["call_weather01", "call_time02"], api)]


def test_automatic_function_calling_records_every_round_trip(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """tools=[python functions]: the SDK runs them between two requests the
    caller never sees; the calls and their results are recorded in order, and
    the caller's response is unchanged."""
    client = gemini_client(api)
    plain = client.models.generate_content(model=MODEL, contents=USER, config=config([get_weather, get_time]))
    path = new_trace(tmp_path)
    with Session(path):
        seen = client.models.generate_content(model=MODEL, contents=USER, config=config([get_weather, get_time]))
    assert seen.text == plain.text == api.answer_for([WEATHER_RESULT, TIME_RESULT])
    assert len(seen.automatic_function_calling_history) == len(plain.automatic_function_calling_history) == 3
    assert len(api.requests) == 4
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]


def test_a_decorated_tool_in_automatic_function_calling_is_recorded_once(
    api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    """A function the SDK calls that is an ``@tool`` records its result itself;
    the function response resent with the next request adds nothing."""
    weather = tool(get_weather)
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        client.models.generate_content(model=MODEL, contents=USER, config=config([weather, get_time]))
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]


def test_stream_with_automatic_function_calling(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """generate_content_stream: every streamed reply merges its text and
    thought deltas into one message; the caller gets the same chunks."""
    client = gemini_client(api)
    plain = [c.text for c in client.models.generate_content_stream(model=MODEL, contents=USER, config=config([get_weather, get_time]))]
    path = new_trace(tmp_path)
    with Session(path):
        seen = [c.text for c in client.models.generate_content_stream(model=MODEL, contents=USER, config=config([get_weather, get_time]))]
    assert seen == plain and len(seen) > 5
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]


def test_stream_usage_is_the_last_chunks(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """Usage in the Pi shape: prompt tokens less the cached ones, candidates
    plus thoughts as output, thoughts as reasoning; streamed like not."""
    api.cached_tokens = 5
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        client.models.generate_content(model=MODEL, contents="hi", config=types.GenerateContentConfig(thinking_config=THOUGHTS))
        for _ in client.models.generate_content_stream(
            model=MODEL, contents="hi", config=types.GenerateContentConfig(thinking_config=THOUGHTS)
        ):
            pass
    replies = [m for m in valid_messages(path) if m["role"] == "assistant"]
    # The fake server: promptTokenCount 11 + 5 cached, candidates 6 ("Hello from the fake API."), thoughts 8.
    usage = {"input": 11, "output": 14, "cacheRead": 5, "cacheWrite": 0, "totalTokens": 30, "reasoning": 8}
    assert [m["usage"] for m in replies] == [usage, usage]
    assert [m["content"] for m in replies] == [TEXT_REPLY, TEXT_REPLY]


async def test_async_automatic_function_calling_and_stream(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """client.aio.models.generate_content and generate_content_stream."""
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        reply = await client.aio.models.generate_content(model=MODEL, contents=USER, config=config([get_weather, get_time]))
        assert reply.text == api.answer_for([WEATHER_RESULT, TIME_RESULT])
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]

    path = new_trace(tmp_path)
    with Session(path):
        stream = await client.aio.models.generate_content_stream(model=MODEL, contents=USER, config=config([get_weather, get_time]))
        texts = [chunk.text async for chunk in stream]
    assert "".join(t or "" for t in texts).endswith(api.answer_for([WEATHER_RESULT, TIME_RESULT]))
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]


def test_chat_records_only_what_is_new_each_turn(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """chats.create().send_message resends the whole history: each turn adds its
    user message, the tool exchange and the answer, nothing twice."""
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        chat = client.chats.create(model=MODEL, config=config([get_weather, get_time]))
        chat.send_message(USER)
        for _ in chat.send_message_stream("And tomorrow?"):
            pass
    messages = recorded(path)
    first = generated_ids(messages)
    second = [c["id"] for c in messages[7]["toolCalls"]]
    assert GENERATED.fullmatch(second[0]) and set(second).isdisjoint(first)
    assert messages == [
        *INPUTS,
        *loop(first, api),
        {"role": "user", "content": "And tomorrow?"},
        *loop(second, api),
    ]


async def test_async_chat(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        chat = client.aio.chats.create(model=MODEL, config=types.GenerateContentConfig(system_instruction=SYSTEM))
        await chat.send_message("one")
        async for _ in await chat.send_message_stream("two"):
            pass
    reply = {"role": "assistant", "content": TEXT_REPLY, "model": MODEL}
    assert recorded(path) == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "one"},
        reply,
        {"role": "user", "content": "two"},
        reply,
    ]


def test_vertex_ai(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """vertexai=True: Vertex's URLs and bearer token, recorded the same way."""
    client = gemini_client(api, vertexai=True)
    path = new_trace(tmp_path)
    with Session(path):
        client.models.generate_content(model=MODEL, contents=USER, config=config([get_weather, get_time]))
    vertex = "/v1beta1/projects/test-project/locations/us-central1/publishers/google/models/gemini-2.5-flash"
    assert [r.path for r in api.requests] == [f"{vertex}:generateContent"] * 2
    assert api.requests[0].headers["authorization"] == "Bearer test"
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]

    path = new_trace(tmp_path)
    with Session(path):
        for _ in client.models.generate_content_stream(model=MODEL, contents=USER, config=config([get_weather, get_time])):
            pass
    assert api.last_request.path == f"{vertex}:streamGenerateContent?alt=sse"
    messages = recorded(path)
    assert messages == [*INPUTS, *loop(generated_ids(messages), api)]


def test_a_call_asking_for_the_http_response_is_recorded_from_its_body(
    api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    """``should_return_http_response``: the SDK hands back the raw body only; the
    reply and its usage are read from it."""
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        raw = client.models.generate_content(
            model=MODEL, contents="hi", config=types.GenerateContentConfig(should_return_http_response=True)
        )
    assert raw.candidates is None and raw.sdk_http_response.body
    [reply] = [m for m in valid_messages(path) if m["role"] == "assistant"]
    assert reply["content"] == TEXT_REPLY and reply["model"] == MODEL
    assert reply["usage"] == {"input": 11, "output": 14, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 25, "reasoning": 8}


def test_outside_a_session_nothing_is_recorded_and_uninstrument_restores(api: FakeAPI, tmp_path: Path) -> None:
    client = gemini_client(api)
    with instrumented("gemini"):
        reply = client.models.generate_content(model=MODEL, contents="hi")
    assert reply.text == TEXT_REPLY
    path = new_trace(tmp_path)
    with Session(path):
        client.models.generate_content(model=MODEL, contents="hi")  # uninstrumented again
    assert recorded(path) == []


def test_a_failed_call_records_its_inputs_only(api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """The fake server's Gemini error body; the SDK's own exception reaches the caller."""
    api.fail_next(429)
    client = gemini_client(api)
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(errors.ClientError) as raised:
            client.models.generate_content(model=MODEL, contents="hi")
    assert raised.value.code == 429 and raised.value.status == "RESOURCE_EXHAUSTED"
    assert recorded(path) == [{"role": "user", "content": "hi"}]


def test_instrument_by_name_and_aliases() -> None:
    for alias in ("genai", "gemini", "google_genai"):
        assert ststrace.instrument(alias) == ["google_genai"]
        ststrace.uninstrument(alias)


def test_the_example_runs_offline(tmp_path: Path) -> None:
    """examples/gemini_agent.py without a key: the fake server, a chat with
    automatic function calling, a valid trace with both calls answered."""
    root = Path(__file__).resolve().parents[2]
    # No key, project or Vertex switch of the developer's: the example must take its offline path.
    env = {k: v for k, v in os.environ.items() if k != "STSTRACE_DIR" and k not in GOOGLE_ENV}
    env["NO_GCE_CHECK"] = "True"
    proc = subprocess.run(
        [sys.executable, str(root / "examples" / "gemini_agent.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    [trace] = (tmp_path / "traces").glob("*.jsonl")
    assert proc.stdout.startswith("Here is what I found: Sunny, 21 C; ") and trace.name in proc.stdout
    messages = recorded(trace)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [m["toolCallId"] for m in messages[3:5]] == [c["id"] for c in messages[2]["toolCalls"]]
    assert "ststrace internal error" not in proc.stderr
