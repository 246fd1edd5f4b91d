"""``with_raw_response`` / ``with_streaming_response`` calls under ``instrument()``:
the real openai and anthropic clients against the local fake server, sync and
async. The caller gets the very objects it would get uninstrumented (same types,
headers, parsed results, bytes); the reply is recorded once, from the body,
however the caller reads it."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from anthropic.types import Message  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402
from openai.types.responses import Response  # noqa: E402

from ststrace import Session  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_decorators_helpers import valid_messages  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    ANTHROPIC_TOOLS,
    CHAT_TOOLS,
    INPUTS,
    MODEL,
    PREAMBLE,
    RESPONSES_TOOLS,
    SYSTEM,
    USER,
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


def chat(client: Any, **kwargs: Any) -> dict[str, Any]:
    return dict(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS, **kwargs)


def responses(**kwargs: Any) -> dict[str, Any]:
    return dict(model=MODEL, instructions=SYSTEM, input=USER, tools=RESPONSES_TOOLS, **kwargs)


def messages(**kwargs: Any) -> dict[str, Any]:
    return dict(
        model=MODEL, max_tokens=256, system=SYSTEM, messages=[{"role": "user", "content": USER}], tools=ANTHROPIC_TOOLS
    ) | kwargs


def run_both(fake_api: FakeAPI, tmp_path: Path, use: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Run *use* once outside any session and once inside one; what the caller
    observed must be the same (modulo the fake server's per-request ids).
    Returns the observation and the recorded messages."""
    plain = use()
    path = new_trace(tmp_path)
    with Session(path):
        traced = use()
    assert normalised(traced) == normalised(plain)
    return traced, recorded(path)


# --------------------------------------------------------------------------- openai Chat Completions


def test_raw_chat_parse_records_the_reply_once(
    openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path
) -> None:
    """``with_raw_response.create`` + ``parse()`` (LangChain's default path): the
    same LegacyAPIResponse, headers and ChatCompletion; the inputs and the reply
    with the provider's call ids recorded once, also when parsed twice and read."""

    def use() -> Any:
        raw = openai_sync.chat.completions.with_raw_response.create(**chat(openai_sync))
        assert type(raw) is openai._legacy_response.LegacyAPIResponse
        assert raw.headers["x-request-id"].startswith("req_fake")
        completion = raw.parse()
        assert type(completion) is ChatCompletion and completion.choices[0].message.content == PREAMBLE
        assert raw.parse() is completion
        assert raw.http_response.read() == raw.content
        return completion, raw.status_code, raw.text

    _, messages_ = run_both(fake_api, tmp_path, use)
    assert messages_ == [*INPUTS, tool_reply()]


def test_raw_response_never_parsed_is_recorded(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """A non-streamed raw call has its body read by the client: the reply is
    recorded even if the caller only looks at the headers."""
    path = new_trace(tmp_path)
    with Session(path):
        raw = openai_sync.chat.completions.with_raw_response.create(**chat(openai_sync))
        assert raw.status_code == 200
    assert recorded(path) == [*INPUTS, tool_reply()]


def test_streaming_response_iter_lines(openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """``with_streaming_response.create(stream=True)`` read line by line: the
    lines are untouched and the streamed reply is recorded when the body ends."""

    def use() -> Any:
        with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync, stream=True)) as r:
            assert type(r) is openai._response.APIResponse
            assert r.headers["content-type"].startswith("text/event-stream")
            return list(r.iter_lines())

    lines, messages_ = run_both(fake_api, tmp_path, use)
    assert "data: [DONE]" in lines
    assert messages_ == [*INPUTS, tool_reply()]


def test_streaming_response_parsed_into_a_stream(openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """``parse()`` of a streaming response gives the SDK's own ``Stream``; its
    chunks are untouched and the reply is recorded once (the Stream closes the
    response right after ``[DONE]``, before the body's end)."""

    def use() -> Any:
        with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync, stream=True)) as r:
            stream = r.parse()
            assert type(stream) is openai.Stream
            chunks = list(stream)
            assert r.parse() is stream
            return chunks

    _, messages_ = run_both(fake_api, tmp_path, use)
    assert messages_ == [*INPUTS, tool_reply()]


def test_raw_stream_parsed_then_iterated(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """``with_raw_response.create(stream=True).parse()`` (LangChain with
    ``include_response_headers``) records the streamed reply once."""
    path = new_trace(tmp_path)
    with Session(path):
        raw = openai_sync.chat.completions.with_raw_response.create(**chat(openai_sync, stream=True))
        with raw.parse() as stream:
            for _ in stream:
                pass
    assert recorded(path) == [*INPUTS, tool_reply()]


def test_streaming_response_parsed_and_read_again_records_once(
    openai_sync: Any, patched: None, tmp_path: Path
) -> None:
    """A non-SSE streaming response parsed, then read as bytes and JSON: one reply."""
    path = new_trace(tmp_path)
    with Session(path):
        with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync)) as r:
            completion = r.parse()
            body = b"".join(r.iter_bytes())
            assert r.json()["id"] == completion.id
            assert b'"tool_calls"' in body
    assert recorded(path) == [*INPUTS, tool_reply()]


def test_streaming_response_left_early_records_what_arrived(
    openai_sync: Any, patched: None, tmp_path: Path
) -> None:
    """Leaving the ``with`` block after a few lines closes the response: what
    arrived is recorded, once, at once."""
    path = new_trace(tmp_path)
    with Session(path):
        with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync, stream=True)) as r:
            lines = r.iter_lines()
            for _, _line in zip(range(30), lines):
                pass
        assert r.is_closed
        with Session(new_trace(tmp_path)):
            pass  # nothing recorded late into another session
        del lines
        gc.collect()
    partial = assistants(recorded(path))
    assert len(partial) == 1
    assert partial[0]["reasoningContent"] == "I should call get_weather and get_time."
    assert PREAMBLE.startswith(partial[0]["content"]) and "toolCalls" not in partial[0]


def test_streaming_response_never_read_records_nothing(
    openai_sync: Any, patched: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Entered and left without reading: no reply arrived, nothing is recorded
    beyond the inputs, and nothing is logged."""
    path = new_trace(tmp_path)
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(path):
            with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync, stream=True)) as r:
                assert r.status_code == 200
    assert recorded(path) == INPUTS
    assert not caplog.records


def test_body_read_undecoded_is_reported_once_per_call_site(
    openai_sync: Any, patched: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A body read with ``iter_raw()`` bypasses what ststrace reads: the call is
    not recorded, and a WARNING names the method, once per call site."""

    def read_raw() -> bytes:
        with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync, stream=True)) as r:
            return b"".join(r.http_response.iter_raw())

    def read_raw_elsewhere() -> bytes:
        with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync, stream=True)) as r:
            return b"".join(r.http_response.iter_raw())

    path = new_trace(tmp_path)
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(path):
            for _ in range(3):
                assert b"[DONE]" in read_raw()
            assert b"[DONE]" in read_raw_elsewhere()  # another call site
    warnings = [r.getMessage() for r in caplog.records if r.name == "ststrace"]
    assert len(warnings) == 2, warnings
    assert all("openai.resources.chat.completions.completions.Completions.create" in w for w in warnings)
    assert all("iter_raw" in w and __file__ in w for w in warnings)
    assert recorded(path) == INPUTS


# --------------------------------------------------------------------------- openai Responses


def test_raw_responses_create(openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """``responses.with_raw_response.create`` + ``parse()`` (LangChain with
    ``use_responses_api=True``)."""

    def use() -> Any:
        raw = openai_sync.responses.with_raw_response.create(**responses())
        response = raw.parse()
        assert type(response) is Response
        return response

    _, messages_ = run_both(fake_api, tmp_path, use)
    assert messages_ == [*INPUTS, tool_reply()]


def test_streaming_responses_events(openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """``responses.with_streaming_response.create(stream=True)`` parsed into
    events (the Agents SDK's ``run_streamed`` path)."""

    def use() -> Any:
        with openai_sync.responses.with_streaming_response.create(**responses(stream=True)) as r:
            return [event.type for event in r.parse()]

    events, messages_ = run_both(fake_api, tmp_path, use)
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert messages_ == [*INPUTS, tool_reply()]


async def test_async_streaming_responses(openai_async: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """The async client: ``async with ... with_streaming_response`` and
    ``await parse()`` iterated with ``async for``; then a raw call awaited."""
    path = new_trace(tmp_path)
    async with Session(path):
        async with openai_async.responses.with_streaming_response.create(**responses(stream=True)) as r:
            assert type(r) is openai._response.AsyncAPIResponse
            kinds = [event.type async for event in await r.parse()]
        raw = await openai_async.chat.completions.with_raw_response.create(
            model=MODEL, messages=chat_messages()
        )
        assert raw.parse().choices[0].message.content == "Hello from the fake API."
    assert kinds[-1] == "response.completed"
    assert recorded(path) == [*INPUTS, tool_reply(), text_reply()]


async def test_async_streaming_chat_lines(openai_async: Any, patched: None, tmp_path: Path) -> None:
    """``async for line in r.iter_lines()`` on an async streaming response."""
    path = new_trace(tmp_path)
    async with Session(path):
        async with openai_async.chat.completions.with_streaming_response.create(
            **chat(openai_async, stream=True)
        ) as r:
            lines = [line async for line in r.iter_lines()]
    assert "data: [DONE]" in lines
    assert recorded(path) == [*INPUTS, tool_reply()]


# --------------------------------------------------------------------------- anthropic


def test_anthropic_raw_create(anthropic_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """``messages.with_raw_response.create`` + ``parse()``."""

    def use() -> Any:
        raw = anthropic_sync.messages.with_raw_response.create(**messages())
        assert raw.headers["request-id"].startswith("req_fake")
        message = raw.parse()
        assert type(message) is Message
        return message

    _, messages_ = run_both(fake_api, tmp_path, use)
    assert messages_ == [*INPUTS, tool_reply("toolu_")]


def test_anthropic_streaming_response_read(anthropic_sync: Any, patched: None, tmp_path: Path) -> None:
    """``messages.with_streaming_response.create(stream=True)`` read whole."""
    path = new_trace(tmp_path)
    with Session(path):
        with anthropic_sync.messages.with_streaming_response.create(**messages(stream=True)) as r:
            body = r.read()
    assert b"event: message_stop" in body
    assert recorded(path) == [*INPUTS, tool_reply("toolu_")]


async def test_anthropic_async_streaming_response_events(
    anthropic_async: Any, patched: None, tmp_path: Path
) -> None:
    """The async anthropic client, parsed into its event stream."""
    path = new_trace(tmp_path)
    async with Session(path):
        async with anthropic_async.messages.with_streaming_response.create(**messages(stream=True)) as r:
            kinds = [event.type async for event in await r.parse()]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert recorded(path) == [*INPUTS, tool_reply("toolu_")]


def test_outside_a_session_nothing_is_touched(openai_sync: Any, patched: None) -> None:
    """No session: the httpx response keeps its own methods (no listener added)."""
    with openai_sync.chat.completions.with_streaming_response.create(**chat(openai_sync, stream=True)) as r:
        assert "iter_bytes" not in vars(r.http_response)
        r.read()


# --------------------------------------------------------------------------- references taken before instrument()


def test_raw_wrapper_cached_before_instrument_is_recorded(openai_sync: Any, tmp_path: Path) -> None:
    """The SDK caches ``with_raw_response`` per client, holding the method it
    wrapped: one first used before ``instrument()`` bypasses the method patch.
    The request-level safety net records it anyway, once."""
    stale_raw = openai_sync.chat.completions.with_raw_response
    stale_streaming = openai_sync.responses.with_streaming_response
    stale_create = openai_sync.chat.completions.create
    stale_raw.create(**chat(openai_sync)).parse()  # used uninstrumented: cached
    path = new_trace(tmp_path)
    with instrumented("openai"):
        assert openai_sync.chat.completions.with_raw_response is stale_raw
        with Session(path):
            stale_raw.create(**chat(openai_sync)).parse()
            with stale_streaming.create(model=MODEL, instructions=SYSTEM, input=USER, stream=True) as r:
                for _ in r.iter_lines():
                    pass
            stale_create(model=MODEL, messages=chat_messages())
    assert recorded(path) == [*INPUTS, tool_reply(), text_reply(), text_reply()]


async def test_async_raw_wrapper_cached_before_instrument_is_recorded(anthropic_async: Any, tmp_path: Path) -> None:
    """The same for the async anthropic client."""
    stale = anthropic_async.messages.with_raw_response
    await stale.create(**messages())
    path = new_trace(tmp_path)
    with instrumented("anthropic"):
        async with Session(path):
            raw = await stale.create(**messages())
            assert type(await raw.parse()) is Message
    assert recorded(path) == [*INPUTS, tool_reply("toolu_")]


def test_non_model_requests_are_not_recorded(openai_sync: Any, fake_api: FakeAPI, patched: None, tmp_path: Path) -> None:
    """The safety net only looks at model endpoints: another request (here a
    ``models.list`` the fake server refuses) records nothing."""
    path = new_trace(tmp_path)
    with Session(path):
        with pytest.raises(openai.NotFoundError):
            openai_sync.models.list()
    assert recorded(path) == []


# --------------------------------------------------------------------------- the body reader itself


class _Raw:
    """What ``watch_raw_response`` needs of an SDK response: ``http_response``."""

    def __init__(self, http: Any) -> None:
        self.http_response = http


def _pieces_stream(data: bytes, size: int) -> Any:
    import httpx2

    class Pieces(httpx2.SyncByteStream):
        def __iter__(self) -> Any:
            for i in range(0, len(data), size):
                yield data[i : i + size]

    return Pieces()


def _watch(http: Any) -> tuple[list[dict[str, Any]], list[str], str | None]:
    from ststrace._adapters.raw import watch_raw_response

    done: list[dict[str, Any]] = []
    skipped: list[str] = []
    reason = watch_raw_response(_Raw(http), done.append, skipped.append)
    return done, skipped, reason


def test_sse_split_anywhere_and_crlf_lines_give_the_same_reply() -> None:
    """SSE events cut at every byte boundary, with CRLF line ends, a comment and
    a last event with no blank line after it: one reply, the whole of it."""
    import httpx2

    chunk = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"%s"}}]}'
    body = (
        ": keep-alive\r\n\r\n"
        + "".join(f"data: {chunk % piece}\r\n\r\n" for piece in ("Hel", "lo ", "wor"))
        + f"data: {chunk % 'ld'}"
    ).encode()
    for size in (1, 3, 7, len(body)):
        http = httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_pieces_stream(body, size))
        done, skipped, reason = _watch(http)
        assert reason is None
        assert http.read() == body  # the caller's bytes, untouched
        assert done == [{"role": "assistant", "content": "Hello world", "model": "m"}], size
        assert skipped == []


def test_json_body_that_is_not_a_reply_is_reported() -> None:
    """A body ststrace cannot read as a reply is reported (not recorded as an
    empty message); an error event in a stream is not a reply either."""
    import httpx2

    done, skipped, reason = _watch(httpx2.Response(200, json={"object": "list", "data": []}))
    assert (done, reason) == ([], None)
    assert skipped == ["its body is not a model reply ststrace understands"]
    http = httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=_pieces_stream(b'event: error\ndata: {"type":"error","message":"x"}\n\n', 5))
    done, skipped, _ = _watch(http)
    http.read()
    assert done == [] and skipped == []  # a failed call (the SDK raises the error): no reply


def test_a_response_without_http_response_is_reported() -> None:
    """Something named like an SDK response but without a body cannot be watched."""
    from ststrace._adapters.raw import watch_raw_response

    assert watch_raw_response(object(), lambda m: None, lambda r: None) == "object has no http_response"


def test_safety_net_survives_another_instrumentations_leftover(openai_sync: Any, tmp_path: Path) -> None:
    """OpenInference's openai instrumentor leaves ``OpenAI.request`` set on the
    client class after ``uninstrument()``; a patch on the base class would be
    shadowed by it and a stale raw wrapper's call would go unrecorded."""
    oi = pytest.importorskip("openinference.instrumentation.openai")
    from opentelemetry.sdk.trace import TracerProvider

    import openai

    had_own = "request" in openai.OpenAI.__dict__
    instrumentor = oi.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider())
    instrumentor.uninstrument()
    try:
        stale_raw = openai_sync.chat.completions.with_raw_response
        stale_raw.create(**chat(openai_sync)).parse()  # used uninstrumented: cached
        path = new_trace(tmp_path)
        with instrumented("openai"):
            with Session(path):
                stale_raw.create(**chat(openai_sync)).parse()
        assert recorded(path) == [*INPUTS, tool_reply()]
    finally:
        if not had_own and "request" in openai.OpenAI.__dict__:
            del openai.OpenAI.request  # undo the leftover for the tests after this one


# --------------------------------------------------------------------------- token usage


def _usage_of(path: Path) -> list[Any]:
    return [m.get("usage") for m in valid_messages(path) if m["role"] == "assistant"]


_RAW_CALLS: dict[str, tuple[Any, Any]] = {
    # name: (plain call, the same call through a raw / streaming response)
    "chat-raw": (
        lambda o, a: o.chat.completions.create(**chat(o)),
        lambda o, a: o.chat.completions.with_raw_response.create(**chat(o)).parse(),
    ),
    "chat-streaming-response": (
        lambda o, a: list(o.chat.completions.create(**chat(o), stream=True, stream_options={"include_usage": True})),
        lambda o, a: o.chat.completions.with_streaming_response.create(
            **chat(o), stream=True, stream_options={"include_usage": True}
        ).__enter__().read(),
    ),
    "responses-streaming-response": (
        lambda o, a: list(o.responses.create(**responses(), stream=True)),
        lambda o, a: list(o.responses.with_streaming_response.create(**responses(), stream=True).__enter__().parse()),
    ),
    "anthropic-raw-stream": (
        lambda o, a: list(a.messages.create(**messages(stream=True))),
        lambda o, a: list(a.messages.with_raw_response.create(**messages(stream=True)).parse()),
    ),
}


@pytest.mark.parametrize("kind", sorted(_RAW_CALLS))
def test_raw_responses_record_the_same_usage_as_plain_calls(
    openai_sync: Any, anthropic_sync: Any, patched: None, tmp_path: Path, kind: str
) -> None:
    """A reply read through ``with_raw_response`` / ``with_streaming_response``
    (LangChain's ``ChatOpenAI`` always; the Agents SDK's streamed runs) carries
    the same token usage as the same call made plainly: it used to have none."""
    plain, raw = _RAW_CALLS[kind]
    plain_path, raw_path = new_trace(tmp_path), new_trace(tmp_path)
    with Session(plain_path):
        plain(openai_sync, anthropic_sync)
    with Session(raw_path) as s:
        raw(openai_sync, anthropic_sync)
        assert s.stats()["usage"].get("totalTokens", 0) > 0
    usage = _usage_of(plain_path)
    assert usage and isinstance(usage[0]["totalTokens"], int)
    assert _usage_of(raw_path) == usage


def test_raw_response_usage_is_left_out_with_usage_false(openai_sync: Any, patched: None, tmp_path: Path) -> None:
    """``Session(usage=False)`` still leaves it out of raw replies."""
    path = new_trace(tmp_path)
    with Session(path, usage=False):
        openai_sync.chat.completions.with_raw_response.create(**chat(openai_sync)).parse()
    assert _usage_of(path) == [None]


# --------------------------------------------------------------------------- left half-read


def test_raw_stream_left_half_read_when_the_session_ends_records_what_arrived(
    openai_sync: Any, patched: None, tmp_path: Path
) -> None:
    """``with_raw_response.create(stream=True).parse()``, a ``break`` after a few
    chunks, the stream still held as the ``with Session`` block ends: what
    arrived is recorded before the file closes (it used to be lost as a record
    made after close), and the rest still reads unchanged."""
    path = new_trace(tmp_path)
    with Session(path) as s:
        stream = openai_sync.chat.completions.with_raw_response.create(**chat(openai_sync, stream=True)).parse()
        for i, _chunk in enumerate(stream):
            if i == 13:
                break
    rest = list(stream)
    assert rest and rest[-1].choices[0].finish_reason == "tool_calls"
    assert s.stats()["lost"] == 0
    partial = assistants(recorded(path))
    assert len(partial) == 1 and partial[0]["content"] and PREAMBLE.startswith(partial[0]["content"])


def test_half_read_raw_stream_collected_in_a_cycle_raises_nothing(
    openai_sync: Any, patched: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A half-read raw stream dropped inside a reference cycle is finalised by
    the cycle collector, which clears weak references first: the tapped
    ``close()`` used to call the original with ``None`` and raise
    ``AttributeError`` ("Exception ignored in ...") from the user's program."""
    unraisable: list[Any] = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    with Session(new_trace(tmp_path)):
        stream = openai_sync.chat.completions.with_raw_response.create(**chat(openai_sync, stream=True)).parse()
        for i, _chunk in enumerate(stream):
            if i == 5:
                break
        holder: dict[str, Any] = {"stream": stream}
        holder["self"] = holder  # a cycle
        del stream, holder, _chunk
        gc.collect()
    assert [u.exc_value for u in unraisable] == []
