"""The transport seam (``instrument("httpx")`` / ``"httpx2"``, included in
``instrument()``): model calls no SDK-level integration saw, recorded from the
HTTP exchange, with the real clients against the fake server; and a call an
SDK-level integration records is never recorded a second time below it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")

import ststrace  # noqa: E402
from ststrace import Session, _instrument  # noqa: E402
from ststrace._adapters.http import call_arguments, route  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from fakeapi_fixtures import quiet_google  # noqa: E402
from test_instrument_helpers import (  # noqa: E402
    CHAT_TOOLS,
    REASONING_TEXT,
    TEXT_REPLY,
    chat_messages,
    instrumented,
    new_trace,
    recorded,
)

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def everything() -> Iterator[None]:
    """``instrument()`` with no names: every SDK integration and the seam."""
    with instrumented():
        yield


@pytest.fixture
def seam() -> Iterator[None]:
    with instrumented("httpx", "httpx2"):
        yield


def _text_turn(user: str, model: str = "m", reasoning: bool = True) -> list[dict[str, Any]]:
    reply: dict[str, Any] = {"role": "assistant", "content": TEXT_REPLY}
    if reasoning:
        reply["reasoningContent"] = REASONING_TEXT
    return [{"role": "user", "content": user}, {**reply, "model": model}]


def _without_usage(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "usage"} for m in messages]


# -- a hand-written httpx.post to an OpenAI-compatible server ------------------


def test_httpx_post_to_chat_completions_is_recorded(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    """JSON and SSE, read by ``.json()`` and by ``iter_lines()``: each call is one
    user turn and one reply, and the caller reads exactly what the server sent."""
    path = new_trace(tmp_path)
    url = fake_api.openai_base_url + "/chat/completions"
    with Session(path):
        reply = httpx.post(url, json={"model": "m", "messages": [{"role": "user", "content": "one"}]}).json()
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "two"}]}
        with httpx.stream("POST", url, json=body) as response:
            lines = list(response.iter_lines())
    assert reply["choices"][0]["message"]["content"] == TEXT_REPLY
    assert lines[-2:] == ["data: [DONE]", ""] and all(line.startswith("data: ") or not line for line in lines)
    messages = recorded(path)
    assert _without_usage(messages) == _text_turn("one") + _text_turn("two")


async def test_async_httpx_post_is_recorded(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    url = fake_api.openai_base_url + "/chat/completions"
    async with httpx.AsyncClient() as client:
        async with Session(path):
            await client.post(url, json={"model": "m", "messages": [{"role": "user", "content": "one"}]})
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "two"}]}
            async with client.stream("POST", url, json=body) as response:
                chunks = [chunk async for chunk in response.aiter_bytes()]
    assert b"".join(chunks).endswith(b"data: [DONE]\n\n")
    assert _without_usage(recorded(path)) == _text_turn("one") + _text_turn("two")


def test_httpx2_post_is_recorded(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    httpx2 = pytest.importorskip("httpx2")
    path = new_trace(tmp_path)
    with Session(path):
        httpx2.post(fake_api.openai_base_url + "/chat/completions", json={"model": "m", "messages": HI})
    assert _without_usage(recorded(path)) == _text_turn("hi")


def test_anthropic_and_responses_paths_are_recorded(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    with Session(path):
        httpx.post(fake_api.openai_base_url + "/responses", json={"model": "m", "input": "first"})
        httpx.post(
            fake_api.anthropic_base_url + "/v1/messages",
            json={"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "second"}]},
        )
    messages = recorded(path)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "first"),
        ("assistant", TEXT_REPLY),
        ("user", "second"),
        ("assistant", TEXT_REPLY),
    ]


def test_other_requests_and_no_session_record_nothing(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    """A GET, a POST to another path, a POST to a model path without its body
    field (OpenAI's ``/threads/{id}/messages``): nothing. No session: the
    response is not even looked at."""
    path = new_trace(tmp_path)
    with Session(path):
        httpx.get(fake_api.url + "/v1/models")
        httpx.post(fake_api.url + "/v1/embeddings", json={"model": "m", "input": "x"})
        httpx.post(fake_api.url + "/v1/threads/t1/messages", json={"role": "user", "content": "x"})
    assert recorded(path) == []
    response = httpx.post(fake_api.openai_base_url + "/chat/completions", json={"model": "m", "messages": HI})
    assert "iter_bytes" not in vars(response)


def test_failed_call_records_no_reply_and_raises_unchanged(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    fake_api.fail_next(500)
    with Session(path):
        response = httpx.post(fake_api.openai_base_url + "/chat/completions", json={"model": "m", "messages": HI})
        with pytest.raises(httpx.HTTPStatusError):
            response.raise_for_status()
    assert recorded(path) == [{"role": "user", "content": "hi"}]


def test_half_read_stream_records_what_arrived_once(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    path = new_trace(tmp_path)
    fake_api.chunk_size = 4
    body = {"model": "m", "stream": True, "messages": HI}
    with Session(path):
        with httpx.stream("POST", fake_api.openai_base_url + "/chat/completions", json=body) as response:
            lines = response.iter_lines()
            seen = [next(lines) for _ in range(8)]
    assert any('"content":"' in line for line in seen)
    messages = recorded(path)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert TEXT_REPLY.startswith(messages[1]["content"]) and messages[1]["content"] != TEXT_REPLY


def test_http_false_leaves_the_seam_out(fake_api: FakeAPI, tmp_path: Path) -> None:
    assert not _instrument.instrumented()
    ststrace.instrument(http=False)
    try:
        assert not set(_instrument.HTTP_SEAMS) & set(_instrument.instrumented())
        path = new_trace(tmp_path)
        with Session(path):
            httpx.post(fake_api.openai_base_url + "/chat/completions", json={"model": "m", "messages": HI})
        assert recorded(path) == []
        assert {"httpx", "httpx2"} <= set(ststrace.instrument("httpx", "httpx2"))
    finally:
        ststrace.uninstrument()


# -- what no SDK-level integration records: items 3 and 5 of issue 33 ----------


def test_ollama_generate_is_recorded(fake_api: FakeAPI, everything: None, tmp_path: Path) -> None:
    """``generate`` (streamed or not, sync and async) and the module-level
    ``ollama.generate``: the prompt (and system) in, the response out."""
    ollama = pytest.importorskip("ollama")
    path = new_trace(tmp_path)
    client = ollama.Client(host=fake_api.ollama_base_url, timeout=5.0)
    with Session(path):
        assert client.generate(model="llama3.2", prompt="one", system="Be brief.").response == TEXT_REPLY
        assert "".join(c.response for c in client.generate(model="llama3.2", prompt="two", stream=True)) == TEXT_REPLY

        async def both() -> None:
            aclient = ollama.AsyncClient(host=fake_api.ollama_base_url, timeout=5.0)
            await aclient.generate(model="llama3.2", prompt="three")
            async for _ in await aclient.generate(model="llama3.2", prompt="four", stream=True):
                pass

        asyncio.run(both())
    messages = recorded(path)
    expected = [{"role": "system", "content": "Be brief."}]
    for prompt in ("one", "two", "three", "four"):
        expected += _text_turn(prompt, "llama3.2", reasoning=False)
    assert _without_usage(messages) == expected


def test_cohere_v1_chat_is_recorded(fake_api: FakeAPI, everything: None, tmp_path: Path) -> None:
    """The v1 ``Client.chat`` and ``chat_stream``: preamble, history and message
    in; text and id-less tool calls out, their results paired by name."""
    cohere = pytest.importorskip("cohere")
    client = cohere.Client(api_key="test", base_url=fake_api.cohere_base_url, timeout=5.0)
    tool = {"name": "get_weather", "description": "Weather", "parameter_definitions": {"city": {"type": "str", "required": True}}}
    path = new_trace(tmp_path)
    with Session(path):
        first = client.chat(message="weather?", preamble="Be brief.", tools=[tool], model="command-r")
        calls = first.tool_calls
        assert calls and calls[0].name == "get_weather"
        results = [{"call": {"name": c.name, "parameters": c.parameters}, "outputs": [{"w": "sunny"}]} for c in calls]
        history = [{"role": "USER", "message": "weather?"}, {"role": "CHATBOT", "message": first.text, "tool_calls": calls}]
        streamed = "".join(
            e.text
            for e in client.chat_stream(message="", chat_history=history, tool_results=results, tools=[tool], model="command-r")
            if e.event_type == "text-generation"
        )
    messages = recorded(path)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", *["tool"] * len(calls), "assistant"]
    ask = messages[2]
    assert [c["function"]["name"] for c in ask["toolCalls"]] == [c.name for c in calls]
    assert [m["toolCallId"] for m in messages[3:-1]] == [c["id"] for c in ask["toolCalls"]]
    assert messages[-1]["content"] == streamed and streamed


def test_langchain_chat_mistral_ai_is_recorded(fake_api: FakeAPI, everything: None, tmp_path: Path) -> None:
    """``ChatMistralAI`` posts with its own httpx client, never through the
    mistralai SDK: ``invoke`` and ``stream`` are recorded at the transport."""
    chat_models = pytest.importorskip("langchain_mistralai.chat_models")
    fake_api.reasoning = False  # LangChain hands Mistral's thinking chunks on as content blocks
    llm = chat_models.ChatMistralAI(
        base_url=fake_api.mistral_base_url + "/v1", api_key="test", model="mistral-small", max_retries=1, timeout=5
    )
    path = new_trace(tmp_path)
    with Session(path):
        assert llm.invoke("one").content == TEXT_REPLY
        assert "".join(str(c.content) for c in llm.stream("two")) == TEXT_REPLY
    messages = recorded(path)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "one"),
        ("assistant", TEXT_REPLY),
        ("user", "two"),
        ("assistant", TEXT_REPLY),
    ]
    assert all(m["model"] == "mistral-small" for m in messages if m["role"] == "assistant")
    assert all(r.path == "/mistral/v1/chat/completions" for r in fake_api.requests)


# -- never recorded twice ----------------------------------------------------


def _sdk_calls(api: FakeAPI) -> dict[str, Any]:
    """One model call per SDK integration that sits on an HTTP client, streamed
    where the SDK sends the request lazily (on the first chunk)."""

    def openai_chat(stream: bool) -> Any:
        import openai

        c = openai.OpenAI(base_url=api.openai_base_url, api_key="t", max_retries=0)
        r = c.chat.completions.create(model="m", messages=HI, stream=stream)
        return list(r) if stream else r

    def openai_responses() -> Any:
        import openai

        return openai.OpenAI(base_url=api.openai_base_url, api_key="t", max_retries=0).responses.create(model="m", input="hi")

    def anthropic_messages(stream: bool) -> Any:
        import anthropic

        c = anthropic.Anthropic(base_url=api.anthropic_base_url, api_key="t", max_retries=0)
        r = c.messages.create(model="c", max_tokens=10, messages=HI, stream=stream)
        return list(r) if stream else r

    def groq_chat() -> Any:
        import groq

        return groq.Groq(base_url=api.url, api_key="t", max_retries=0).chat.completions.create(model="m", messages=HI)

    def cerebras_chat() -> Any:
        from cerebras.cloud import sdk

        c = sdk.Cerebras(base_url=api.url, api_key="t", max_retries=0, warm_tcp_connection=False)
        return c.chat.completions.create(model="m", messages=HI)

    def ollama_chat(stream: bool) -> Any:
        import ollama

        r = ollama.Client(host=api.ollama_base_url).chat(model="m", messages=HI, stream=stream)
        return list(r) if stream else r

    def cohere_v2(stream: bool) -> Any:
        import cohere

        c = cohere.ClientV2(api_key="t", base_url=api.cohere_base_url, max_retries=0)
        return list(c.chat_stream(model="m", messages=HI)) if stream else c.chat(model="m", messages=HI)

    def mistral_chat(stream: bool) -> Any:
        from mistralai.client import Mistral

        c = Mistral(api_key="t", server_url=api.mistral_base_url)
        return list(c.chat.stream(model="m", messages=HI)) if stream else c.chat.complete(model="m", messages=HI)

    def hf_chat() -> Any:
        from fakeapi_fixtures import hf_client

        return hf_client(api).chat_completion(messages=HI, model="m")

    def litellm_chat(stream: bool) -> Any:
        import litellm

        r = litellm.completion(model="openai/m", messages=HI, api_base=api.openai_base_url, api_key="t", stream=stream)
        return list(r) if stream else r

    def litellm_anthropic() -> Any:
        import litellm

        return litellm.completion(model="anthropic/c", messages=HI, api_base=api.anthropic_base_url, api_key="t")

    async def openai_async(stream: bool) -> Any:
        import openai

        c = openai.AsyncOpenAI(base_url=api.openai_base_url, api_key="t", max_retries=0)
        r = await c.chat.completions.create(model="m", messages=HI, stream=stream)
        return [x async for x in r] if stream else r

    async def ollama_async(stream: bool) -> Any:
        import ollama

        r = await ollama.AsyncClient(host=api.ollama_base_url).chat(model="m", messages=HI, stream=stream)
        return [x async for x in r] if stream else r

    def gemini(stream: bool) -> Any:
        from fakeapi_fixtures import gemini_client

        client = gemini_client(api)  # held: a collected Client closes its HTTP client
        if stream:
            return list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
        return client.models.generate_content(model="gemini-2.5-flash", contents="hi")

    async def gemini_async_stream() -> Any:
        from fakeapi_fixtures import gemini_client

        client = gemini_client(api)
        stream = await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
        return [x async for x in stream]

    def together_chat() -> Any:
        import together

        c = together.Together(api_key="t", base_url=api.openai_base_url, max_retries=0)
        return c.chat.completions.create(model="m", messages=HI)

    def run(coro: Any) -> Any:
        return lambda: asyncio.run(coro())

    calls: dict[str, Any] = {
        "openai": lambda: openai_chat(False),
        "openai-stream": lambda: openai_chat(True),
        "openai-responses": openai_responses,
        "openai-async-stream": run(lambda: openai_async(True)),
        "anthropic": lambda: anthropic_messages(False),
        "anthropic-stream": lambda: anthropic_messages(True),
        "groq": groq_chat,
        "cerebras": cerebras_chat,
        "ollama": lambda: ollama_chat(False),
        "ollama-stream": lambda: ollama_chat(True),
        "ollama-async-stream": run(lambda: ollama_async(True)),
        "cohere": lambda: cohere_v2(False),
        "cohere-stream": lambda: cohere_v2(True),
        "mistralai": lambda: mistral_chat(False),
        "mistralai-stream": lambda: mistral_chat(True),
        "huggingface_hub": hf_chat,
        "litellm": lambda: litellm_chat(False),
        "litellm-stream": lambda: litellm_chat(True),
        "litellm-anthropic": litellm_anthropic,
        "google_genai": lambda: gemini(False),
        "google_genai-stream": lambda: gemini(True),
        "google_genai-async-stream": run(gemini_async_stream),
        "together": together_chat,
    }
    return calls


_MODULES = {
    "openai": "openai",
    "anthropic": "anthropic",
    "groq": "groq",
    "cerebras": "cerebras.cloud.sdk",
    "ollama": "ollama",
    "cohere": "cohere",
    "mistralai": "mistralai.client",
    "huggingface_hub": "huggingface_hub",
    "litellm": "litellm",
    "google_genai": "google.genai",
    "together": "together",
}


@pytest.mark.parametrize("name", list(_sdk_calls(FakeAPI())))
def test_sdk_call_is_recorded_once(
    name: str, fake_api: FakeAPI, everything: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With the seam and every SDK integration on, one SDK call is one reply."""
    pytest.importorskip(_MODULES[name.split("-", 1)[0]])
    if name.startswith("google_genai"):
        quiet_google(monkeypatch)
    path = new_trace(tmp_path)
    with Session(path):
        _sdk_calls(fake_api)[name]()
    messages = recorded(path)
    assert [m["role"] for m in messages] == ["user", "assistant"], messages
    assert messages[1]["content"] == TEXT_REPLY


def test_llm_function_is_recorded_once(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    @ststrace.llm
    def ask(messages: list[dict[str, Any]]) -> Any:
        return httpx.post(fake_api.openai_base_url + "/chat/completions", json={"model": "m", "messages": messages}).json()

    path = new_trace(tmp_path)
    with Session(path):
        ask(HI)
    assert [m["role"] for m in recorded(path)] == ["user", "assistant"]


# -- the request side, unit by unit ---------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/v1/chat/completions", "chat"),
        ("/openai/v1/chat/completions?x=1", "chat"),
        ("/v1/responses", "responses"),
        ("/v1/messages", "anthropic"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", "gemini"),
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini"),
        ("/api/chat", "ollama-chat"),
        ("/api/generate", "ollama-generate"),
        ("/v1/chat", "cohere-v1"),
        ("/v2/chat", "cohere-v2"),
        ("/v1/embeddings", None),
        ("/v1/chat/completions/abc/messages-x", None),
    ],
)
def test_route(path: str, kind: str | None) -> None:
    assert route(path) == kind


def test_gemini_request_names_the_model_and_reads_camel_case() -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}],
    }
    named = call_arguments("gemini", body, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert named is not None and named["model"] == "gemini-2.5-flash"
    messages = ststrace._adapters.input_messages((), named)
    assert messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


def test_gemini_rest_call_is_recorded(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    """A hand-written REST call to ``generateContent`` and ``streamGenerateContent?alt=sse``."""
    path = new_trace(tmp_path)
    base = fake_api.gemini_base_url + "/v1beta/models/gemini-2.5-flash"
    with Session(path):
        for text, method in (("one", ":generateContent"), ("two", ":streamGenerateContent?alt=sse")):
            body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
            with httpx.stream("POST", base + method, json=body, headers={"x-goog-api-key": "t"}) as r:
                r.read()
    messages = recorded(path)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "one"),
        ("assistant", TEXT_REPLY),
        ("user", "two"),
        ("assistant", TEXT_REPLY),
    ]
    assert all(m["model"].startswith("gemini-2.5-flash") for m in messages if m["role"] == "assistant")


def test_cohere_v1_tools_become_function_definitions() -> None:
    named = call_arguments(
        "cohere-v1",
        {"message": "hi", "tools": [{"name": "f", "description": "d", "parameter_definitions": {"x": {"type": "int", "required": True}}}]},
        "/v1/chat",
    )
    assert named is not None
    assert named["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {"type": "object", "properties": {"x": {"type": "int"}}, "required": ["x"]},
            },
        }
    ]
    assert json.loads(json.dumps(named))  # plain JSON, as the input reader expects


def test_an_sdk_whose_methods_moved_is_still_recorded(
    fake_api: FakeAPI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """An SDK release that moves the methods ststrace patches loses its SDK-level
    integration (with a warning), and its calls are recorded at the transport."""
    openai = pytest.importorskip("openai")
    from ststrace.integrations import openai as spec

    monkeypatch.setattr(spec, "TARGETS", [*spec.TARGETS, ("openai.resources.chat.completions.completions", "Completions.gone")])
    with instrumented():
        assert "openai" not in _instrument.instrumented()
        assert "could not instrument openai" in caplog.text
        path = new_trace(tmp_path)
        client = openai.OpenAI(base_url=fake_api.openai_base_url, api_key="t", max_retries=0)
        with Session(path):
            reply = client.chat.completions.create(model="m", messages=HI)
    assert reply.choices[0].message.content == TEXT_REPLY
    assert _without_usage(recorded(path)) == _text_turn("hi")


def test_any_transport_is_seen(seam: None, tmp_path: Path) -> None:
    """The seam is the client's ``send``: a call answered by ``MockTransport``
    (no socket at all) is recorded like one over the network."""
    reply = {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "mocked"}, "finish_reason": "stop"}]}
    client = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, json=reply)))
    path = new_trace(tmp_path)
    with Session(path):
        assert client.post("http://llm.invalid/v1/chat/completions", json={"model": "m", "messages": HI}).json() == reply
    assert recorded(path) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "mocked", "model": "m"}]


async def test_litellm_aiohttp_transport_is_seen(fake_api: FakeAPI, seam: None, tmp_path: Path) -> None:
    """litellm's async client runs httpx over aiohttp (``LiteLLMAiohttpTransport``),
    which no ``AsyncHTTPTransport`` patch would see: a post through it, streamed
    or not, is recorded."""
    aiohttp = pytest.importorskip("aiohttp")
    transport_module = pytest.importorskip("litellm.llms.custom_httpx.aiohttp_transport")
    url = fake_api.openai_base_url + "/chat/completions"
    path = new_trace(tmp_path)
    async with aiohttp.ClientSession() as http:
        transport = transport_module.LiteLLMAiohttpTransport(client=http, owns_session=False)
        async with httpx.AsyncClient(transport=transport) as client:
            async with Session(path):
                await client.post(url, json={"model": "m", "messages": [{"role": "user", "content": "one"}]})
                body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "two"}]}
                async with client.stream("POST", url, json=body) as response:
                    lines = [line async for line in response.aiter_lines()]
    assert "data: [DONE]" in lines
    assert _without_usage(recorded(path)) == _text_turn("one") + _text_turn("two")


def test_requests_post_is_recorded(fake_api: FakeAPI, tmp_path: Path) -> None:
    """``requests.post``: read whole (``.json()``) and streamed (``iter_lines``,
    decoded to text), and a streamed response closed half-read."""
    requests = pytest.importorskip("requests")
    url = fake_api.openai_base_url + "/chat/completions"
    path = new_trace(tmp_path)
    with instrumented("requests"):
        with Session(path):
            assert requests.post(url, json={"model": "m", "messages": [{"role": "user", "content": "one"}]}).ok
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "two"}]}
            with requests.post(url, json=body, stream=True) as response:
                lines = list(response.iter_lines(decode_unicode=True))
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "three"}]}
            with requests.post(url, json=body, stream=True) as response:
                next(response.iter_content(16))
        outside = requests.post(url, json={"model": "m", "messages": HI})
    assert "data: [DONE]" in lines
    assert "iter_content" not in vars(outside)
    messages = recorded(path)
    assert _without_usage(messages[:4]) == _text_turn("one") + _text_turn("two")
    assert [m["role"] for m in messages[4:]] == ["user"]  # closed before any content: no reply


# -- the reply side of the new protocols, unit by unit ---------------------------


def test_ollama_generate_and_cohere_v1_replies_convert() -> None:
    from ststrace._adapters import accumulate, response_to_message

    generate = {"model": "llama3.2", "response": "hi there", "thinking": "short", "done": True}
    assert response_to_message(generate) == {
        "role": "assistant",
        "content": "hi there",
        "reasoningContent": "short",
        "model": "llama3.2",
    }
    chunks = [{"model": "llama3.2", "response": piece, "done": piece == ""} for piece in ("hi ", "there", "")]
    assert accumulate(chunks) == {"role": "assistant", "content": "hi there", "model": "llama3.2"}

    v1 = {"text": "", "generation_id": "g", "finish_reason": "COMPLETE", "tool_calls": [{"name": "f", "parameters": {"x": 1}}]}
    message = response_to_message(v1)
    assert message is not None and message["toolCalls"][0]["function"] == {"name": "f", "arguments": '{"x":1}'}
    events = [
        {"event_type": "stream-start", "generation_id": "g"},
        {"event_type": "text-generation", "text": "a"},
        {"event_type": "text-generation", "text": "b"},
        {"event_type": "stream-end", "finish_reason": "COMPLETE", "response": {"text": "ab"}},
    ]
    assert accumulate(events) == {"role": "assistant", "content": "ab"}


def test_line_delimited_body_fed_in_odd_pieces() -> None:
    """An NDJSON body split anywhere (mid-line, several lines a piece) gives the
    same reply; a mid-stream ``{"error": ...}`` line ends it as failed."""
    from ststrace._adapters.raw import _Body

    lines = b"".join(
        orjson_line({"model": "m", "message": {"role": "assistant", "content": piece}, "done": piece == ""})
        for piece in ("Hel", "lo", "")
    )
    for size in (1, 7, len(lines)):
        got: list[dict[str, Any]] = []
        body = _Body(got.append, lambda why: None, sse=False, lines=True)
        for start in range(0, len(lines), size):
            body.feed(lines[start : start + size])
        body.finish(ended=True)
        assert got == [{"role": "assistant", "content": "Hello", "model": "m"}]
    failed: list[dict[str, Any]] = []
    body = _Body(failed.append, lambda why: None, sse=False, lines=True)
    body.feed(lines.split(b"\n", 1)[0] + b"\n" + orjson_line({"error": "model unloaded"}))
    body.finish(ended=True)
    assert failed == [{"role": "assistant", "content": "Hel", "model": "m"}]  # what arrived, once
    assert body.failed


def orjson_line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"
