"""``@llm`` on the reply shapes of each provider, built from the real client
libraries' own type classes (and their plain-dict forms)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator

import orjson
import pytest

from ststrace import Session, llm, tool
from ststrace._context import in_llm_call
from test_decorators_helpers import assert_paired, tool_results, trace_dir_files, valid_messages

openai_types = pytest.importorskip("openai.types.chat")
responses_types = pytest.importorskip("openai.types.responses")
anthropic_types = pytest.importorskip("anthropic.types")
hf = pytest.importorskip("huggingface_hub")

WEATHER_ARGS = '{"city":"Paris"}'
TIME_ARGS = '{"tz":"Europe/Paris"}'


def chat_completion(reasoning_field: str | None = "reasoning_content") -> Any:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
            {"id": "call_t", "type": "function", "function": {"name": "get_time", "arguments": TIME_ARGS}},
        ],
    }
    if reasoning_field:
        # Extra field added by OpenAI-compatible servers (vLLM, DeepSeek, TGI...).
        message[reasoning_field] = "Two tools are needed."
    return openai_types.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }
    )


def response() -> Any:
    return responses_types.Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1767225600,
            "model": "gpt-test",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "Two tools are needed."}],
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}],
                },
                {"type": "function_call", "id": "fc_w", "call_id": "call_w", "name": "get_weather", "arguments": WEATHER_ARGS},
                {"type": "function_call", "id": "fc_t", "call_id": "call_t", "name": "get_time", "arguments": TIME_ARGS},
            ],
        }
    )


def anthropic_message() -> Any:
    return anthropic_types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 5},
            "content": [
                {"type": "thinking", "thinking": "Two tools are needed.", "signature": "sig"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_w", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_t", "name": "get_time", "input": {"tz": "Europe/Paris"}},
            ],
        }
    )


def hf_output() -> Any:
    return hf.ChatCompletionOutput.parse_obj_as_instance(
        {
            "id": "hf-1",
            "created": 1767225600,
            "model": "hf-test",
            "system_fingerprint": "fp",
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "Let me look.",
                        "reasoning": "Two tools are needed.",
                        "tool_calls": [
                            {"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
                            {"id": "call_t", "type": "function", "function": {"name": "get_time", "arguments": TIME_ARGS}},
                        ],
                    },
                }
            ],
        }
    )


def as_dict(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    return dump() if dump is not None else orjson.loads(orjson.dumps(obj))


EXPECTED_CALLS = [
    {"id": "call_w", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}},
    {"id": "call_t", "function": {"name": "get_time", "arguments": TIME_ARGS}},
]

CASES: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {
    "openai-chat": (
        chat_completion,
        {"content": "Let me look.", "reasoningContent": "Two tools are needed.", "model": "gpt-test"},
    ),
    "openai-chat-reasoning": (
        lambda: chat_completion("reasoning"),
        {"content": "Let me look.", "reasoningContent": "Two tools are needed.", "model": "gpt-test"},
    ),
    "openai-chat-no-reasoning": (lambda: chat_completion(None), {"content": "Let me look.", "model": "gpt-test"}),
    "openai-responses": (
        response,
        {"content": "Let me look.", "reasoningContent": "Two tools are needed.", "model": "gpt-test"},
    ),
    "anthropic": (
        anthropic_message,
        {"content": "Let me look.", "reasoningContent": "Two tools are needed.\n\n[redacted thinking]", "model": "claude-test"},
    ),
    "huggingface": (
        hf_output,
        {"content": "Let me look.", "reasoningContent": "Two tools are needed.", "model": "hf-test"},
    ),
}


@tool
def get_weather(city: str) -> str:
    return f"sunny in {city}"


@tool
def get_time(tz: str) -> str:
    return f"noon in {tz}"


@pytest.mark.parametrize("form", ["object", "dict"])
@pytest.mark.parametrize("case", list(CASES))
def test_provider_reply_recorded_and_tools_pair(case: str, form: str, tmp_path: Path) -> None:
    """The reply becomes one assistant message; its tool calls (ids kept) are what @tool answers."""
    make, expected = CASES[case]
    reply = make() if form == "object" else as_dict(make())

    @llm
    def call_model(prompt: str) -> Any:
        return reply

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert call_model("weather?") is reply
        get_time("Europe/Paris")  # executed out of order on purpose
        get_weather("Paris")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assistant = msgs[0]
    assert assistant["role"] == "assistant"
    # Usage values are checked in tests/core/test_usage.py.
    assert {k: v for k, v in assistant.items() if k not in ("timestamp", "toolCalls", "role", "usage")} == expected
    assert assistant["toolCalls"] == EXPECTED_CALLS
    assert isinstance(assistant["timestamp"], int)
    assert [(m["toolCallId"], m["content"]) for m in tool_results(msgs)] == [
        ("call_t", "noon in Europe/Paris"),
        ("call_w", "sunny in Paris"),
    ]
    assert len(msgs) == 3  # no synthesized calls


def test_plain_string_reply(tmp_path: Path) -> None:
    @llm(model="local-model")
    def call_model() -> str:
        return "Just text."

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert call_model() == "Just text."
    msg = valid_messages(path)[0]
    assert (msg["role"], msg["content"], msg["model"]) == ("assistant", "Just text.", "local-model")


def test_sts_dict_reply(tmp_path: Path) -> None:
    """An STS-shaped message dict is recorded as it is; its tool calls become pending."""
    reply = {
        "role": "assistant",
        "content": "",
        "reasoningContent": "think",
        "toolCalls": [{"id": "sts_1", "function": {"name": "get_weather", "arguments": WEATHER_ARGS}}],
    }

    @llm
    def call_model() -> dict[str, Any]:
        return reply

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert call_model() is reply
        get_weather("Paris")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert msgs[0]["reasoningContent"] == "think"
    assert msgs[0]["toolCalls"] == reply["toolCalls"]
    assert msgs[1]["toolCallId"] == "sts_1"


def test_model_from_decorator_and_from_keyword(tmp_path: Path) -> None:
    """The reply's own model wins; else ``@llm(model=)``; else the call's ``model=`` keyword."""

    @llm
    def by_keyword(model: str) -> str:
        return "a"

    @llm(model="fixed")
    def fixed(model: str) -> Any:
        return chat_completion(None)

    path = tmp_path / "t.jsonl"
    with Session(path):
        by_keyword(model="kw-model")
        fixed(model="ignored")
        get_weather("Paris")
        get_time("Europe/Paris")
    msgs = [m for m in valid_messages(path) if m["role"] == "assistant"]
    assert [m.get("model") for m in msgs] == ["kw-model", "gpt-test"]


def test_unknown_object_warns_and_records_json(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A reply ststrace does not understand is recorded as JSON text with a warning, never an exception."""

    class Weird:
        def to_dict(self) -> dict[str, int]:
            return {"answer": 42}

    weird = Weird()

    @llm
    def call_model() -> Any:
        return weird

    path = tmp_path / "t.jsonl"
    with Session(path), caplog.at_level(logging.WARNING, logger="ststrace"):
        assert call_model() is weird
    msg = valid_messages(path)[0]
    assert msg["role"] == "assistant"
    assert orjson.loads(msg["content"]) == {"answer": 42}
    assert any("Weird" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_model_exception_propagates_and_records_no_reply(tmp_path: Path) -> None:
    """The model call's own exception reaches the caller unchanged; the inputs stay recorded,
    no assistant message is written."""
    err = ConnectionError("rate limited")

    @llm
    def call_model(messages: list[dict[str, str]]) -> Any:
        raise err

    path = tmp_path / "t.jsonl"
    with Session(path):
        with pytest.raises(ConnectionError) as info:
            call_model(messages=[{"role": "user", "content": "hi"}])
    assert info.value is err
    assert [m["role"] for m in valid_messages(path)] == ["user"]


async def test_async_model_exception_propagates(tmp_path: Path) -> None:
    err = TimeoutError("slow")

    @llm
    async def call_model(messages: list[dict[str, str]]) -> Any:
        raise err

    path = tmp_path / "t.jsonl"
    async with Session(path):
        with pytest.raises(TimeoutError) as info:
            await call_model(messages=[{"role": "user", "content": "hi"}])
    assert info.value is err
    assert [m["role"] for m in valid_messages(path)] == ["user"]


async def test_async_llm(tmp_path: Path) -> None:
    reply = anthropic_message()

    @llm
    async def call_model() -> Any:
        await asyncio.sleep(0)
        return reply

    path = tmp_path / "t.jsonl"
    async with Session(path):
        assert await call_model() is reply
        await asyncio.gather(asyncio.to_thread(get_weather, "Paris"), asyncio.to_thread(get_time, "Europe/Paris"))
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert {m["toolCallId"] for m in tool_results(msgs)} == {"call_w", "call_t"}


def chat_chunks() -> list[Any]:
    """A streamed chat reply: text, reasoning and two parallel tool calls whose
    arguments are split over several chunks and interleaved."""
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}

    def chunk(delta: dict[str, Any]) -> Any:
        return openai_types.ChatCompletionChunk.model_validate({**base, "choices": [{"index": 0, "delta": delta}]})

    return [
        chunk({"role": "assistant", "reasoning_content": "Two "}),
        chunk({"reasoning_content": "tools."}),
        chunk({"content": "Let "}),
        chunk({"content": "me look."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_t", "type": "function", "function": {"name": "get_time", "arguments": '{"tz":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"Europe/Paris"}'}}]}),
    ]


STREAMED = {"content": "Let me look.", "reasoningContent": "Two tools.", "model": "gpt-test", "toolCalls": EXPECTED_CALLS}


def assistant_fields(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k not in ("timestamp", "role")}


def test_generator_function_llm_merges_chunks(tmp_path: Path) -> None:
    """A generator-function @llm yielding chat chunks records one merged message when it ends."""

    @llm
    def stream() -> Iterator[Any]:
        assert in_llm_call.get() is True
        yield from chat_chunks()

    path = tmp_path / "t.jsonl"
    with Session(path):
        got = list(stream())
        assert in_llm_call.get() is False
        get_weather("Paris")
        get_time("Europe/Paris")
    assert len(got) == 9
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert assistant_fields(msgs[0]) == STREAMED


async def test_async_generator_function_llm_merges_chunks(tmp_path: Path) -> None:
    @llm
    async def stream() -> AsyncIterator[Any]:
        for c in chat_chunks():
            assert in_llm_call.get() is True
            await asyncio.sleep(0)
            yield c

    path = tmp_path / "t.jsonl"
    async with Session(path):
        got = [c async for c in stream()]
        get_weather("Paris")
        get_time("Europe/Paris")
    assert len(got) == 9
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert assistant_fields(msgs[0]) == STREAMED


def test_returned_iterator_is_proxied_and_recorded(tmp_path: Path) -> None:
    """A function that *returns* an iterator of chunks gets back an iterator with the
    same chunks; the merged message is recorded once it is exhausted."""
    chunks = chat_chunks()

    @llm
    def stream() -> Iterator[Any]:
        return iter(chunks)

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        got = list(stream())
        s.flush()
        assert len(valid_messages(path)) == 1  # recorded at exhaustion, before the session ends
        get_weather("Paris")
        get_time("Europe/Paris")
    assert got == chunks
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert assistant_fields(msgs[0]) == STREAMED


def test_stream_abandoned_half_way_records_what_arrived(tmp_path: Path) -> None:
    @llm
    def stream() -> Iterator[Any]:
        yield from chat_chunks()

    path = tmp_path / "t.jsonl"
    with Session(path):
        it: Any = stream()
        for _ in range(4):
            next(it)
        it.close()
    msgs = valid_messages(path)
    assert assistant_fields(msgs[0]) == {"content": "Let me look.", "reasoningContent": "Two tools.", "model": "gpt-test"}


def test_stream_failing_half_way_records_what_arrived_and_reraises(tmp_path: Path) -> None:
    err = ConnectionResetError("dropped")

    @llm
    def stream() -> Iterator[Any]:
        yield from chat_chunks()[:3]
        raise err

    path = tmp_path / "t.jsonl"
    with Session(path):
        with pytest.raises(ConnectionResetError) as info:
            list(stream())
    assert info.value is err
    msgs = valid_messages(path)
    assert [m["content"] for m in msgs] == ["Let "]


def test_stream_failing_before_any_chunk_records_nothing(tmp_path: Path) -> None:
    @llm
    def stream() -> Iterator[Any]:
        raise ConnectionRefusedError("no")
        yield  # pragma: no cover

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.user("hi")
        with pytest.raises(ConnectionRefusedError):
            list(stream())
    assert [m["role"] for m in valid_messages(path)] == ["user"]


def test_text_generator_llm(tmp_path: Path) -> None:
    @llm
    def stream() -> Iterator[str]:
        yield "Hel"
        yield "lo"

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert "".join(stream()) == "Hello"
    assert valid_messages(path)[0]["content"] == "Hello"


def test_in_llm_call_flag_only_during_the_call(tmp_path: Path) -> None:
    seen: list[bool] = []

    @llm
    def call_model() -> str:
        seen.append(in_llm_call.get())
        return "x"

    with Session(tmp_path / "t.jsonl"):
        call_model()
        seen.append(in_llm_call.get())
    assert seen == [True, False]


# -- kinds and introspection ------------------------------------------------------


def sync_model(messages: list[Any], temperature: float = 0.0) -> str:
    """doc"""
    return "s"


async def async_model(messages: list[Any], temperature: float = 0.0) -> str:
    return "a"


def gen_model(messages: list[Any], temperature: float = 0.0) -> Iterator[str]:
    yield "g"


async def agen_model(messages: list[Any], temperature: float = 0.0) -> AsyncIterator[str]:
    yield "ag"


MODELS = [sync_model, async_model, gen_model, agen_model]


async def consume(fn: Callable[..., Any], *args: Any) -> str:
    out: Any = fn(*args)
    if inspect.isawaitable(out):
        return str(await out)
    if inspect.isasyncgen(out):
        return "".join([str(c) async for c in out])
    if inspect.isgenerator(out):
        return "".join(map(str, out))
    return str(out)


@pytest.mark.parametrize("orig", MODELS, ids=lambda f: f.__name__)
async def test_llm_kinds_with_and_without_session(orig: Callable[..., Any], tmp_path: Path) -> None:
    fn: Any = llm(orig)
    for pred in (inspect.iscoroutinefunction, inspect.isasyncgenfunction, inspect.isgeneratorfunction):
        assert pred(fn) == pred(orig)
    assert inspect.signature(fn) == inspect.signature(orig)
    assert (fn.__name__, fn.__doc__, fn.__wrapped__) == (orig.__name__, orig.__doc__, orig)

    expected = await consume(orig, [])
    assert await consume(fn, [{"role": "user", "content": "q"}]) == expected
    assert trace_dir_files() == []

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert await consume(fn, [{"role": "user", "content": "q"}]) == expected
    msgs = valid_messages(path)
    assert [(m["role"], m["content"]) for m in msgs] == [("user", "q"), ("assistant", expected)]


class Agent:
    @llm
    def think(self, messages: list[Any]) -> str:
        return f"{len(messages)} messages"

    @llm
    @classmethod
    def cthink(cls, messages: list[Any]) -> str:
        return cls.__name__


def test_llm_on_methods(tmp_path: Path) -> None:
    """self / cls are not mistaken for the conversation."""
    path = tmp_path / "t.jsonl"
    with Session(path):
        assert Agent().think([{"role": "user", "content": "a"}]) == "1 messages"
        assert Agent.cthink([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]) == "Agent"
    msgs = valid_messages(path)
    assert [(m["role"], m["content"]) for m in msgs] == [
        ("user", "a"),
        ("assistant", "1 messages"),
        ("user", "b"),
        ("assistant", "Agent"),
    ]


@pytest.mark.allow_internal_errors
def test_failing_recording_never_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _fail_on_internal_errors: list[BaseException]
) -> None:
    """With the session's assistant recording broken, the reply still comes back."""
    from ststrace._session import Session as SessionClass

    def broken(self: Any, msg: Any) -> None:
        raise RuntimeError("broken")

    reply = chat_completion()

    @llm
    def call_model(messages: Any) -> Any:
        return reply

    with Session(tmp_path / "t.jsonl"):
        monkeypatch.setattr(SessionClass, "_record_assistant", broken)
        assert call_model(messages=[{"role": "user", "content": "x"}]) is reply
    assert [str(e) for e in _fail_on_internal_errors] == ["broken"]


@pytest.mark.allow_internal_errors
def test_failing_input_recording_still_records_the_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _fail_on_internal_errors: list[BaseException]
) -> None:
    from ststrace._session import Session as SessionClass

    def broken(self: Any, msg: Any, stateful: Any = None, **kwargs: Any) -> None:
        raise RuntimeError("broken inputs")

    @llm
    def call_model(messages: Any) -> str:
        return "reply"

    path = tmp_path / "t.jsonl"
    with Session(path):
        monkeypatch.setattr(SessionClass, "_record_inputs", broken)
        assert call_model(messages=[{"role": "user", "content": "x"}]) == "reply"
    assert [str(e) for e in _fail_on_internal_errors] == ["broken inputs"]
    assert [(m["role"], m["content"]) for m in valid_messages(path)] == [("assistant", "reply")]


async def test_plain_function_returning_a_coroutine(tmp_path: Path) -> None:
    """A plain def that returns the async client's coroutine: the reply is recorded once awaited."""

    async def client_call() -> Any:
        assert in_llm_call.get() is True
        return chat_completion(None)

    @llm
    def call_model() -> Any:
        return client_call()

    path = tmp_path / "t.jsonl"
    async with Session(path):
        reply = await call_model()
        get_weather("Paris")
        get_time("Europe/Paris")
    assert reply.model == "gpt-test"
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert msgs[0]["content"] == "Let me look."
