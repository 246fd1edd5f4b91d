"""``ststrace.testing.replay`` for the providers beyond OpenAI and Anthropic:
Ollama, Cohere v2, Mistral, Groq and Amazon Bedrock (Converse and
converse_stream), each with its real SDK.

Round trip: record the SDK's own tool loop against the plain fake server, replay
the trace to the same loop, record again; the two traces hold the same
conversation. Ollama has no call ids: the recorded ids were made by ststrace,
the replay matches its requests by call name and arguments instead. (Gemini is
in ``test_replay_google.py``: google-genai lives in another venv.)"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ollama = pytest.importorskip("ollama")
cohere = pytest.importorskip("cohere")
groq = pytest.importorskip("groq")
mistralai = pytest.importorskip("mistralai.client")
boto3 = pytest.importorskip("boto3")

import test_integration_bedrock as bedrock_t  # noqa: E402
import test_integration_cohere as cohere_t  # noqa: E402
import test_integration_groq as groq_t  # noqa: E402
import test_integration_mistralai as mistral_t  # noqa: E402
import test_integration_ollama as ollama_t  # noqa: E402
from fakeapi_fixtures import openai_client  # noqa: E402
import replay_agents as agents  # noqa: E402
import ststrace  # noqa: E402
from ststrace import Session, read  # noqa: E402
from ststrace.testing import FakeAPI, ReplayMismatch, assert_same_conversation, localhost_only, replay  # noqa: E402
from test_instrument_helpers import CHAT_TOOLS, SYSTEM, USER, chat_messages, instrumented, new_trace  # noqa: E402

MODEL = "gpt-test"
_GENERATED = re.compile(r"call_[0-9a-f]{24}")


@pytest.fixture(autouse=True)
def _no_aws_lookups(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def patched_all() -> Iterator[None]:
    with instrumented("openai", "ollama", "cohere", "groq", "mistralai", "bedrock"):
        yield


def _messages(prompt: str) -> list[Any]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


# --------------------------------------------------------------------------- the agents
# Each runs the SDK's documented tool loop to its final answer and returns it.


def ollama_loop(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    c = ollama.Client(host=api.ollama_base_url, timeout=5.0)
    messages = _messages(prompt)
    for _ in range(3):
        if stream:
            message = ollama_t._merged(list(c.chat(MODEL, messages, tools=CHAT_TOOLS, think=True, stream=True)))
        else:
            message = c.chat(MODEL, messages, tools=CHAT_TOOLS, think=True).message
        if not ollama_t._next_turn(messages, message):
            return str(message.content)
    raise AssertionError("the agent did not finish")


def ollama_async(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    async def main() -> str:
        c = ollama.AsyncClient(host=api.ollama_base_url, timeout=5.0)
        messages = _messages(prompt)
        for _ in range(3):
            if stream:
                message = ollama_t._merged([ch async for ch in await c.chat(MODEL, messages, tools=CHAT_TOOLS, stream=True)])
            else:
                message = (await c.chat(MODEL, messages, tools=CHAT_TOOLS)).message
            if not ollama_t._next_turn(messages, message):
                return str(message.content)
        raise AssertionError("the agent did not finish")

    return asyncio.run(main())


def cohere_loop(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    c = cohere_t.client(api)
    messages = _messages(prompt)
    extra = {"thinking": cohere_t.THINKING}
    for _ in range(3):
        if stream:
            events = list(c.chat_stream(model=MODEL, messages=messages, tools=CHAT_TOOLS, **extra))
            plan, calls = cohere_t._merged(events)
            text = "".join(
                e.delta.message.content.text or ""
                for e in events
                if e.type == "content-delta" and getattr(e.delta.message.content, "text", None)
            )
        else:
            reply = c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS, **extra)
            plan, calls = reply.message.tool_plan, reply.message.tool_calls or []
            text = "".join(getattr(p, "text", "") for p in reply.message.content or [] if p.type == "text")
        if not cohere_t._next_turn(messages, plan, calls):
            return text
    raise AssertionError("the agent did not finish")


def cohere_async(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    async def main() -> str:
        c = cohere_t.async_client(api)
        messages = _messages(prompt)
        for _ in range(3):
            reply = await c.chat(model=MODEL, messages=messages, tools=CHAT_TOOLS)
            if not cohere_t._next_turn(messages, reply.message.tool_plan, reply.message.tool_calls or []):
                return "".join(p.text for p in reply.message.content or [] if p.type == "text")
        raise AssertionError("the agent did not finish")

    return asyncio.run(main())


def _mistral_text(content: Any) -> str:
    # Text chunks after the thinking chunk.
    return content if isinstance(content, str) else "".join(getattr(p, "text", "") for p in content or [])


def mistral_loop(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    messages = _messages(prompt)
    with mistral_t.client(api) as c:
        for _ in range(3):
            if stream:
                message, calls = mistral_t._merged(list(c.chat.stream(model=MODEL, messages=messages, tools=CHAT_TOOLS)))
                text = message["content"]
            else:
                message = c.chat.complete(model=MODEL, messages=messages, tools=CHAT_TOOLS).choices[0].message
                calls, text = message.tool_calls or [], _mistral_text(message.content)
            if not mistral_t._next_turn(messages, message, calls):
                return str(text)
    raise AssertionError("the agent did not finish")


def mistral_async(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    async def main() -> str:
        messages = _messages(prompt)
        async with mistral_t.client(api) as c:
            for _ in range(3):
                if stream:
                    events = [e async for e in await c.chat.stream_async(model=MODEL, messages=messages, tools=CHAT_TOOLS)]
                    message, calls = mistral_t._merged(events)
                    text = message["content"]
                else:
                    reply = await c.chat.complete_async(model=MODEL, messages=messages, tools=CHAT_TOOLS)
                    message = reply.choices[0].message
                    calls, text = message.tool_calls or [], _mistral_text(message.content)
                if not mistral_t._next_turn(messages, message, calls):
                    return str(text)
        raise AssertionError("the agent did not finish")

    return asyncio.run(main())


def groq_loop(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    c = groq_t.client(api)
    messages = _messages(prompt)
    for _ in range(3):
        if stream:
            message: Any = groq_t._Delta(list(c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True)))
        else:
            message = c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS).choices[0].message
        if not groq_t._next_turn(messages, message):
            return str(message.content)
    raise AssertionError("the agent did not finish")


def groq_async(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    async def main() -> str:
        c = groq_t.async_client(api)
        messages = _messages(prompt)
        for _ in range(3):
            if stream:
                chunks = [
                    ch
                    async for ch in await c.chat.completions.create(
                        model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True
                    )
                ]
                message: Any = groq_t._Delta(chunks)
            else:
                message = (await c.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)).choices[0].message
            if not groq_t._next_turn(messages, message):
                return str(message.content)
        raise AssertionError("the agent did not finish")

    return asyncio.run(main())


def bedrock_loop(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    c = bedrock_t.client(api)
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": prompt}]}]
    for _ in range(3):
        kwargs = bedrock_t.converse_kwargs(messages)
        if stream:
            content = bedrock_t._content_of(list(c.converse_stream(**kwargs)["stream"]))
        else:
            content = c.converse(**kwargs)["output"]["message"]["content"]
        if not bedrock_t._next_turn(messages, content):
            return "".join(b.get("text", "") for b in content)
    raise AssertionError("the agent did not finish")


def bedrock_invoke(api: FakeAPI, stream: bool, prompt: str = USER) -> str:
    """``invoke_model`` with an Anthropic Messages body (JSON only)."""
    import json

    c = bedrock_t.client(api)
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for _ in range(3):
        body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 512, "system": SYSTEM,
                "messages": messages, "tools": bedrock_t.ANTHROPIC_TOOLS, **bedrock_t.THINKING}
        reply = json.loads(c.invoke_model(modelId=bedrock_t.MODEL, body=json.dumps(body))["body"].read())
        messages.append({"role": "assistant", "content": reply["content"]})
        uses = [b for b in reply["content"] if b["type"] == "tool_use"]
        if not uses:
            return "".join(b.get("text", "") for b in reply["content"])
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u["id"], "content": bedrock_t.RESULTS[u["name"]]} for u in uses]})
    raise AssertionError("the agent did not finish")


Loop = Callable[..., str]
LOOPS: list[tuple[str, Loop]] = [
    ("ollama", ollama_loop),
    ("ollama-async", ollama_async),
    ("cohere", cohere_loop),
    ("cohere-async", cohere_async),
    ("mistral", mistral_loop),
    ("mistral-async", mistral_async),
    ("groq", groq_loop),
    ("groq-async", groq_async),
    ("bedrock", bedrock_loop),
    ("bedrock-invoke", bedrock_invoke),
]


def run(api: FakeAPI, loop: Loop, stream: bool, path: Path, **kw: Any) -> str:
    with localhost_only(), Session(path):
        return loop(api, stream, **kw)


def record(tmp_path: Path, loop: Loop, stream: bool) -> Path:
    path = new_trace(tmp_path)
    with FakeAPI(cached_tokens=3, cache_write_tokens=2) as api:
        run(api, loop, stream, path)
    return path


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("name", "loop"), LOOPS, ids=[x[0] for x in LOOPS])
def test_round_trip(name: str, loop: Loop, stream: bool, patched_all: None, tmp_path: Path) -> None:
    if name in ("cohere-async", "bedrock-invoke") and stream:
        pytest.skip("this agent does not stream (its sync twin covers the stream)")
    first = record(tmp_path, loop, stream)
    second = new_trace(tmp_path)
    with replay(first) as api:
        answer = run(api, loop, stream, second)
    assert len(api.requests) == 2 and api.misses == []
    original, replayed = read(first).messages, read(second).messages
    assert answer == original[-1]["content"] != ""
    assert_same_conversation(first, second)
    assert [p for p in ststrace.validate(second) if p.severity == "error"] == []
    ids = [c["id"] for m in original for c in m.get("toolCalls", [])]
    assert len(ids) == 2
    if name.startswith("ollama"):
        # Made by ststrace in each run; paired the same way (assert_same_conversation).
        assert all(_GENERATED.fullmatch(i) for i in ids)
    else:
        # The provider's ids, exactly: the replay sent them.
        assert [m.get("toolCalls") for m in replayed] == [m.get("toolCalls") for m in original]
    assert [m.get("usage") for m in replayed] == [m.get("usage") for m in original]
    # The fake's Chat Completions stream (Mistral's, Groq's) carries usage only
    # when asked with stream_options, which these SDKs do not send.
    assert any(m.get("usage") for m in replayed) or (name.startswith(("mistral", "groq")) and stream)
    assert [m.get("reasoningContent") for m in replayed] == [m.get("reasoningContent") for m in original]


def test_bedrock_round_trip_keeps_cache_counts(patched_all: None, tmp_path: Path) -> None:
    """Converse reports cache reads and writes beside ``inputTokens``: replayed as recorded."""
    first = record(tmp_path, bedrock_loop, True)
    usage = [m["usage"] for m in read(first).messages if m["role"] == "assistant"]
    assert all(u["cacheRead"] == 3 and u["cacheWrite"] == 2 for u in usage)
    second = new_trace(tmp_path)
    with replay(first) as api:
        run(api, bedrock_loop, False, second)
    assert [m["usage"] for m in read(second).messages if m["role"] == "assistant"] == usage


# --------------------------------------------------------------------------- one recording, another SDK


@pytest.mark.parametrize(("name", "loop"), [("ollama", ollama_loop), ("bedrock", bedrock_loop), ("cohere", cohere_loop)])
def test_openai_recording_replays_to_another_sdk(name: str, loop: Loop, patched_all: None, tmp_path: Path) -> None:
    """A trace recorded with openai's Chat Completions serves the agent moved to
    another SDK: same replies and arguments, in that API's wire shape."""
    first = new_trace(tmp_path)
    with FakeAPI(reasoning=False) as api, localhost_only(), Session(first):
        agents.chat(openai_client(api), False)
    second = new_trace(tmp_path)
    with replay(first) as api:
        run(api, loop, False, second)
    assert api.misses == [] and len(api.requests) == 2
    diffs = [d for d in ststrace.testing.conversation_differences(first, second) if ": usage differs" not in d]
    if name == "ollama":
        # Ollama sends no ids: the second run's are ststrace's own.
        diffs = [d for d in diffs if "toolCalls differs" not in d and "toolCallId differs" not in d]
        replayed = read(second).messages
        assert [c["function"]["name"] for m in replayed for c in m.get("toolCalls", [])] == ["get_weather", "get_time"]
    if name == "bedrock":
        # A Converse reply names no model: the trace has the request's modelId.
        assert [m.get("model") for m in read(second).messages if m["role"] == "assistant"] == [bedrock_t.MODEL] * 2
        diffs = [d for d in diffs if ": model differs" not in d]
    assert diffs == []


# --------------------------------------------------------------------------- strict misses


def _miss(loop: Loop, tmp_path: Path, error: type[BaseException] | tuple[type[BaseException], ...]) -> tuple[str, FakeAPI]:
    first = record(tmp_path, loop, False)
    with pytest.raises(ReplayMismatch) as info:
        with replay(first) as api:
            with pytest.raises(error):
                with localhost_only():
                    loop(api, False, prompt="What's the weather in Rome?")
    return str(info.value), api


def _assert_named(text: str, path: str) -> None:
    assert f"request 1 (POST {path}" in text
    assert "first difference: message 2 of the request (user)" in text
    assert f"- recorded: {USER!r}" in text
    assert "+ sent:     \"What's the weather in Rome?\"" in text


def test_ollama_miss(patched_all: None, tmp_path: Path) -> None:
    text, api = _miss(ollama_loop, tmp_path, ollama.ResponseError)
    _assert_named(text, "/api/chat")
    assert len(api.requests) == 1
    assert api.requests[0].path == "/api/chat"


def test_cohere_miss(patched_all: None, tmp_path: Path) -> None:
    import cohere.core.api_error

    text, api = _miss(cohere_loop, tmp_path, cohere.core.api_error.ApiError)
    _assert_named(text, "/v2/chat")
    assert len(api.requests) == 1


def test_mistral_miss(patched_all: None, tmp_path: Path) -> None:
    from mistralai.client.errors import MistralError

    text, api = _miss(mistral_loop, tmp_path, MistralError)
    _assert_named(text, "/mistral/v1/chat/completions")
    assert len(api.requests) == 1


def test_groq_miss(patched_all: None, tmp_path: Path) -> None:
    text, api = _miss(groq_loop, tmp_path, groq.ConflictError)
    _assert_named(text, "/openai/v1/chat/completions")
    assert len(api.requests) == 1


def test_bedrock_miss(patched_all: None, tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    text, api = _miss(bedrock_loop, tmp_path, ClientError)
    _assert_named(text, "/model/")
    assert len(api.requests) == 1


def test_ollama_changed_tool_result_is_a_miss(patched_all: None, tmp_path: Path) -> None:
    """No ids to go by: a tool result that differs from the recorded one is still found."""
    first = record(tmp_path, ollama_loop, False)
    results = dict(ollama_t.RESULTS)
    ollama_t.RESULTS["get_weather"] = "Fog"
    try:
        with pytest.raises(ReplayMismatch, match=r"request 2 .*\n.*first difference: message 4 of the request \(tool\)"):
            with replay(first) as api:
                with pytest.raises(ollama.ResponseError):
                    with localhost_only():
                        ollama_loop(api, False)
    finally:
        ollama_t.RESULTS.update(results)
    assert len(api.requests) == 2



# --------------------------------------------------------------------------- fake_llm under --ststrace-replay

ENV_SUITE = '''
import boto3
import groq
import ollama

import ststrace


def test_ollama(fake_llm):
    ststrace.instrument("ollama")
    try:
        reply = ollama.Client(timeout=5).chat("llama3.2", [{"role": "user", "content": "hi ollama"}], stream=False)
    finally:
        ststrace.uninstrument()
    assert reply.message.content == "Hello from the fake API."


def test_groq(fake_llm):
    ststrace.instrument("groq")
    try:
        client = groq.Groq(max_retries=0, timeout=5)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi groq"}])
    finally:
        ststrace.uninstrument()
    assert reply.choices[0].message.content == "Hello from the fake API."


def test_bedrock(fake_llm):
    ststrace.instrument("bedrock")
    try:
        client = boto3.client("bedrock-runtime")
        reply = client.converse(modelId="m", messages=[{"role": "user", "content": [{"text": "hi bedrock"}]}])
    finally:
        ststrace.uninstrument()
    assert reply["output"]["message"]["content"][0]["text"] == "Hello from the fake API."
'''


def test_fake_llm_points_the_providers_variables_at_the_replay(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Recorded against a model the environment names, replayed with that model
    gone: ``fake_llm`` sets OLLAMA_HOST, GROQ_BASE_URL and
    AWS_ENDPOINT_URL_BEDROCK_RUNTIME (with dummy AWS credentials) to the replay."""
    from ststrace.pytest_plugin import trace_file

    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_suite=ENV_SUITE)
    out = tmp_path / "recorded"
    monkeypatch.setenv("GROQ_API_KEY", "test")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    args = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    with FakeAPI() as model:
        monkeypatch.setenv("OLLAMA_HOST", model.ollama_base_url)
        monkeypatch.setenv("GROQ_BASE_URL", model.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", model.bedrock_base_url)
        pytester.runpytest_inprocess(f"--ststrace-record={out}", *args).assert_outcomes(passed=3)
    assert len(model.requests) == 3
    bedrock = ststrace.read(out / trace_file("test_suite.py::test_bedrock")).messages
    assert [m["content"] for m in bedrock] == ["hi bedrock", "Hello from the fake API."]
    # The model is gone: only the replay can answer.
    for var in ("OLLAMA_HOST", "GROQ_BASE_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    pytester.runpytest_inprocess(f"--ststrace-replay={out}", *args).assert_outcomes(passed=3)


def test_cohere_default_client_retries_a_miss_twice_then_fails(patched_all: None, tmp_path: Path) -> None:
    """Cohere's client retries a 409 (ignoring ``x-should-retry``), but only its
    ``max_retries`` (2) times, with a short backoff: the run still ends, and the
    mismatch counts the retried requests."""
    import cohere.core.api_error

    first = record(tmp_path, cohere_loop, False)
    with pytest.raises(ReplayMismatch, match=r"(?s)request 1 \(POST /v2/chat\).*\(2 more request\(s\) missed too\)"):
        with replay(first) as api:
            c = cohere.ClientV2(api_key="test", base_url=api.cohere_base_url, timeout=5.0)
            with pytest.raises(cohere.core.api_error.ApiError) as error, localhost_only():
                c.chat(model=MODEL, messages=_messages("What's the weather in Rome?"))
            assert error.value.status_code == 409
    assert len(api.requests) == 3
