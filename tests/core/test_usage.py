"""Token usage on assistant messages: the real client libraries against the
local fake server (each provider, streamed and not, with and without cache
fields), ``@llm``, usage given by hand, ``usage=False`` and ``prices=``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ststrace
import ststrace._adapters
from ststrace import Session, llm
from ststrace._adapters.usage import UsageAccumulator, usage_of
from ststrace.testing import FakeAPI
from fakeapi_fixtures import anthropic_client, async_openai_client, hf_client, openai_client
from test_instrument_helpers import CHAT_TOOLS, MODEL, USER, chat_messages, instrumented
from test_decorators_helpers import valid_messages

CACHED = 7
WRITTEN = 5

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm"),
    pytest.mark.filterwarnings("ignore:Accessing the 'model_:DeprecationWarning"),
]


def assistants(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "session"
    return [env["message"] for env in lines[1:] if env["message"]["role"] == "assistant"]


def only_usage(path: Path) -> dict[str, Any] | None:
    replies = assistants(path)
    assert len(replies) == 1, replies
    return replies[0].get("usage")


@pytest.fixture
def patched_all() -> Iterator[None]:
    with instrumented("openai", "anthropic", "huggingface_hub", "litellm"):
        yield


def sts(inputs: int, output: int, cache_read: int = 0, cache_write: int = 0, reasoning: int | None = None) -> dict[str, Any]:
    usage = {
        "input": inputs,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": inputs + output + cache_read + cache_write,
    }
    if reasoning is not None:
        usage["reasoning"] = reasoning
    return usage


# --------------------------------------------------------------------------- pure readers


def test_openai_chat_usage_moves_cached_tokens_out_of_input() -> None:
    """prompt_tokens includes cached tokens; STS ``input`` does not."""
    raw = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 30},
        "completion_tokens_details": {"reasoning_tokens": 8},
    }
    assert usage_of(raw) == sts(70, 20, 30, 0, reasoning=8)


def test_litellm_anthropic_shape_counts_cache_writes_once() -> None:
    """LiteLLM puts Anthropic cache reads and writes inside prompt_tokens."""
    raw = {
        "prompt_tokens": 3 + 11350 + 11273,
        "completion_tokens": 38,
        "cache_read_input_tokens": 11350,
        "cache_creation_input_tokens": 11273,
        "prompt_tokens_details": {"cached_tokens": 11350, "cache_creation_tokens": 11273},
    }
    assert usage_of(raw) == sts(3, 38, 11350, 11273)


def test_anthropic_usage_keeps_input_as_is() -> None:
    """Anthropic's input_tokens already excludes the cache (a real Claude Code usage)."""
    raw = {"input_tokens": 3, "cache_creation_input_tokens": 666, "cache_read_input_tokens": 22623, "output_tokens": 9}
    assert usage_of(raw) == sts(3, 9, 22623, 666)


def test_responses_usage() -> None:
    raw = {
        "input_tokens": 50,
        "input_tokens_details": {"cached_tokens": 10},
        "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 62,
    }
    assert usage_of(raw) == sts(40, 12, 10, 0, reasoning=4)


def test_unknown_and_missing_usage_is_none() -> None:
    """No report, or nothing that reads as token counts: no usage."""
    assert usage_of(None) is None
    assert usage_of({"foo": 1}) is None
    assert usage_of("12 tokens") is None

    class UnreportedUsage:  # LiteLLM's zero stand-in, by name
        prompt_tokens = 0
        completion_tokens = 0

    assert usage_of(UnreportedUsage()) is None


def test_anthropic_stream_usage_takes_the_last_cumulative_delta() -> None:
    """message_start gives the input side; message_delta's output count is cumulative."""
    acc = UsageAccumulator()
    acc.add_event("message_start", {"message": {"usage": {"input_tokens": 9, "output_tokens": 1, "cache_read_input_tokens": 4}}})
    acc.add_event("message_delta", {"usage": {"output_tokens": 10}})
    acc.add_event("message_delta", {"usage": {"output_tokens": 17}})
    assert acc.result() == sts(9, 17, 4, 0)


# --------------------------------------------------------------------------- openai


@pytest.mark.parametrize("cached", [0, CACHED], ids=["nocache", "cache"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_openai_chat(stream: bool, cached: int, fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """Chat Completions: usage from the response, or from the last chunk when the
    user asked for it with include_usage."""
    fake_api.cached_tokens = cached
    client = openai_client(fake_api)
    path = tmp_path / "t.jsonl"
    with Session(path):
        kwargs: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
        result = client.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS, stream=stream, **kwargs)
        if stream:
            chunks = list(result)
            raw = chunks[-1].usage
        else:
            raw = result.usage
    assert raw.prompt_tokens_details.cached_tokens == cached
    expected = sts(raw.prompt_tokens - cached, raw.completion_tokens, cached, 0, raw.completion_tokens_details.reasoning_tokens)
    assert only_usage(path) == expected
    assert expected["totalTokens"] == raw.total_tokens


def test_openai_chat_stream_without_include_usage_records_none_and_asks_nothing(
    fake_api: FakeAPI, tmp_path: Path, patched_all: None
) -> None:
    """ststrace never adds stream_options: a plain stream has no usage to record."""
    client = openai_client(fake_api)
    path = tmp_path / "t.jsonl"
    with Session(path):
        list(client.chat.completions.create(model=MODEL, messages=chat_messages(), stream=True))
    assert "stream_options" not in fake_api.last_request.body
    assert only_usage(path) is None


def test_openai_reply_without_usage_has_no_field(tmp_path: Path, patched_all: None, no_external_network: list[str]) -> None:
    """A server that reports no usage gives a message without the field (not zeros, not null)."""
    with FakeAPI(usage=False) as api:
        client = openai_client(api)
        path = tmp_path / "t.jsonl"
        with Session(path):
            r = client.chat.completions.create(model=MODEL, messages=chat_messages())
            client.responses.create(model=MODEL, input=USER)
        assert r.usage is None
    replies = assistants(path)
    assert len(replies) == 2
    assert all("usage" not in m for m in replies)


@pytest.mark.parametrize("cache", [False, True], ids=["nocache", "cache"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_openai_responses(stream: bool, cache: bool, fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """Responses API: usage from the response, or from ``response.completed``."""
    if cache:
        fake_api.cached_tokens, fake_api.cache_write_tokens = CACHED, WRITTEN
    client = openai_client(fake_api)
    path = tmp_path / "t.jsonl"
    with Session(path):
        result = client.responses.create(model=MODEL, input=USER, stream=stream)
        if stream:
            events = list(result)
            raw = events[-1].response.usage
        else:
            raw = result.usage
    cached = raw.input_tokens_details.cached_tokens
    assert cached == (CACHED if cache else 0)
    written = WRITTEN if cache else 0
    expected = sts(raw.input_tokens - cached - written, raw.output_tokens, cached, written, raw.output_tokens_details.reasoning_tokens)
    assert only_usage(path) == expected
    assert expected["totalTokens"] == raw.total_tokens


async def test_openai_async_stream_helper(fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """The async ``chat.completions.stream()`` helper, drained through ``get_final_completion``."""
    fake_api.cached_tokens = CACHED
    client = async_openai_client(fake_api)
    path = tmp_path / "t.jsonl"
    async with Session(path):
        async with client.chat.completions.stream(
            model=MODEL, messages=chat_messages(), stream_options={"include_usage": True}
        ) as stream:
            final = await stream.get_final_completion()
    await client.close()
    raw = final.usage
    assert only_usage(path) == sts(
        raw.prompt_tokens - CACHED, raw.completion_tokens, CACHED, 0, raw.completion_tokens_details.reasoning_tokens
    )


# --------------------------------------------------------------------------- anthropic


@pytest.mark.parametrize("cache", [False, True], ids=["nocache", "cache"])
@pytest.mark.parametrize("how", ["json", "stream", "helper"])
def test_anthropic(how: str, cache: bool, fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """Messages: usage (with cache reads and writes) from the message, from the
    raw stream events, or from the ``messages.stream()`` helper."""
    if cache:
        fake_api.cached_tokens, fake_api.cache_write_tokens = CACHED, WRITTEN
    client = anthropic_client(fake_api)
    path = tmp_path / "t.jsonl"
    kwargs = {"model": "claude-test", "max_tokens": 100, "messages": [{"role": "user", "content": USER}]}
    with Session(path):
        if how == "json":
            raw = client.messages.create(**kwargs).usage
        elif how == "stream":
            events = list(client.messages.create(stream=True, **kwargs))
            raw = events[0].message.usage
            raw.output_tokens = events[-2].usage.output_tokens  # message_delta: cumulative
        else:
            with client.messages.stream(**kwargs) as stream:
                raw = stream.get_final_message().usage
    assert raw.cache_read_input_tokens == (CACHED if cache else 0)
    assert raw.output_tokens > 1
    expected = sts(raw.input_tokens, raw.output_tokens, raw.cache_read_input_tokens, raw.cache_creation_input_tokens)
    assert only_usage(path) == expected


# --------------------------------------------------------------------------- huggingface_hub and litellm


@pytest.mark.parametrize("cached", [0, CACHED], ids=["nocache", "cache"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_huggingface_hub(stream: bool, cached: int, fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """InferenceClient.chat_completion, with usage in the last chunk when asked for."""
    fake_api.cached_tokens = cached
    client = hf_client(fake_api)
    path = tmp_path / "t.jsonl"
    with Session(path):
        if stream:
            chunks = list(
                client.chat_completion(
                    model=MODEL, messages=chat_messages(), stream=True, stream_options={"include_usage": True}
                )
            )
            raw = chunks[-1].usage
        else:
            raw = client.chat_completion(model=MODEL, messages=chat_messages()).usage
    assert raw is not None
    # huggingface_hub keeps prompt_tokens_details only as an attribute, not
    # on the dict side of its output types: the cache must still be seen.
    assert raw.prompt_tokens_details["cached_tokens"] == cached
    usage = only_usage(path)
    assert usage is not None
    assert usage == sts(raw.prompt_tokens - cached, raw.completion_tokens, cached, 0, usage.get("reasoning"))
    assert usage["totalTokens"] == raw.total_tokens


@pytest.mark.parametrize("cached", [0, CACHED], ids=["nocache", "cache"])
@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_litellm(stream: bool, cached: int, fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """litellm.completion (openai provider), usage recorded once."""
    import litellm

    fake_api.cached_tokens = cached
    path = tmp_path / "t.jsonl"
    kwargs: dict[str, Any] = {
        "model": f"openai/{MODEL}",
        "messages": chat_messages(),
        "api_base": fake_api.openai_base_url,
        "api_key": "test",
        "timeout": 5,
        "max_retries": 0,
    }
    with Session(path):
        if stream:
            chunks = list(litellm.completion(stream=True, stream_options={"include_usage": True}, **kwargs))
            raw = next(c.usage for c in reversed(chunks) if getattr(c, "usage", None) is not None)
        else:
            raw = litellm.completion(**kwargs).usage
    usage = only_usage(path)
    assert usage is not None
    assert usage["cacheRead"] == cached
    assert usage["input"] == raw.prompt_tokens - cached
    assert usage["output"] == raw.completion_tokens
    assert usage["totalTokens"] == raw.total_tokens


def test_litellm_stream_without_usage_has_no_field(fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """litellm's stand-in zero usage for a stream that reported none is not recorded."""
    import litellm

    path = tmp_path / "t.jsonl"
    with Session(path):
        list(
            litellm.completion(
                model=f"openai/{MODEL}",
                messages=chat_messages(),
                api_base=fake_api.openai_base_url,
                api_key="test",
                stream=True,
                timeout=5,
                max_retries=0,
            )
        )
    assert "stream_options" not in fake_api.last_request.body
    assert only_usage(path) is None


# --------------------------------------------------------------------------- @llm and by hand


def test_llm_decorator_with_dict_reply_and_generator(tmp_path: Path) -> None:
    """``@llm`` reads usage from a returned reply dict and from streamed chunks."""

    @llm
    def call() -> dict[str, Any]:
        return {
            "model": "m1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        }

    @llm
    def gen() -> Iterator[dict[str, Any]]:
        yield {"model": "m2", "choices": [{"index": 0, "delta": {"content": "yo"}}]}
        yield {"model": "m2", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 1}}

    @llm(model="m3")
    def sts_reply() -> dict[str, Any]:
        return {"role": "assistant", "content": "ok", "usage": {"input": 2, "output": 1}}

    path = tmp_path / "t.jsonl"
    with Session(path):
        call()
        list(gen())
        sts_reply()
    replies = assistants(path)
    assert [m.get("usage") for m in replies] == [sts(12, 3), sts(4, 1), sts(2, 1)]


def test_assistant_by_hand_and_record(tmp_path: Path) -> None:
    """``s.assistant(usage=...)`` and ``s.record`` accept the STS shape or a provider object."""
    from openai.types import CompletionUsage

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant("a", usage={"input": 5, "output": 2, "cacheRead": 1})
        s.assistant("b", usage=CompletionUsage(prompt_tokens=9, completion_tokens=4, total_tokens=13))
        s.record({"role": "assistant", "content": "c", "usage": {"input_tokens": 3, "output_tokens": 1}})
        s.assistant("d")
        assert s.stats()["usage"] == {
            "input": 5 + 9 + 3,
            "output": 2 + 4 + 1,
            "cacheRead": 1,
            "cacheWrite": 0,
            "totalTokens": 8 + 13 + 4,
        }
    replies = assistants(path)
    assert [m.get("usage") for m in replies] == [sts(5, 2, 1), sts(9, 4), sts(3, 1), None]


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"input": -1, "output": 2}, "non-negative"),
        ({"input": "5", "output": 2}, "non-negative"),
        ({"cacheRead": 3}, "at least"),
        ("12", "usage must be"),
        ({"input": 1, "output": 1, "cost": {"dollars": 1}}, "cost"),
    ],
)
def test_bad_usage_by_hand_is_a_clear_error(bad: Any, match: str, tmp_path: Path) -> None:
    with Session(tmp_path / "t.jsonl") as s:
        with pytest.raises(ValueError, match=match):
            s.assistant("x", usage=bad)
        with pytest.raises(ValueError, match="only assistant"):
            s.record({"role": "user", "content": "x", "usage": {"input": 1, "output": 1}})


def test_usage_false_leaves_it_out(fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """``Session(usage=False)``: no usage field, from a client, a stream or by hand."""
    client = openai_client(fake_api)
    path = tmp_path / "t.jsonl"
    with Session(path, usage=False) as s:
        client.chat.completions.create(model=MODEL, messages=chat_messages())
        list(anthropic_client(fake_api).messages.create(model="c", max_tokens=9, messages=[{"role": "user", "content": "x"}], stream=True))
        s.assistant("x", usage={"input": 1, "output": 1})
        assert s.stats()["usage"] == {}
    replies = assistants(path)
    assert len(replies) == 3 and all("usage" not in m for m in replies)


def test_adapters_add_usage_only_when_asked() -> None:
    """The pure converters keep their plain output; the recording layer asks for usage."""
    reply = {
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    chunks = [{"model": "m", "choices": [{"index": 0, "delta": {"content": "hi"}}]}, {"choices": [], "usage": reply["usage"]}]
    assert "usage" not in ststrace._adapters.response_to_message(reply)
    assert ststrace._adapters.response_to_message(reply, usage=True)["usage"] == sts(3, 1)  # type: ignore[index]
    assert "usage" not in ststrace._adapters.accumulate(chunks)
    assert ststrace._adapters.accumulate(chunks, usage=True)["usage"] == sts(3, 1)


PRICES = {MODEL: {"input": 2.5e-6, "output": 1e-5, "cacheRead": 1.25e-6}}


@pytest.mark.parametrize("prices", [PRICES, lambda model: PRICES.get(model)], ids=["dict", "callable"])
def test_prices_give_cost(prices: Any, fake_api: FakeAPI, tmp_path: Path, patched_all: None) -> None:
    """With prices, usage.cost in USD as in Pi; models without a price get no cost."""
    fake_api.cached_tokens = CACHED
    client = openai_client(fake_api)
    path = tmp_path / "t.jsonl"
    with Session(path, prices=prices) as s:
        client.chat.completions.create(model=MODEL, messages=chat_messages())
        s.assistant("x", model="unpriced", usage={"input": 1, "output": 1})
        total_cost = s.stats()["usage"]["cost"]
    priced, unpriced = assistants(path)
    usage = priced["usage"]
    cost = usage["cost"]
    assert cost["input"] == pytest.approx(usage["input"] * 2.5e-6)
    assert cost["output"] == pytest.approx(usage["output"] * 1e-5)
    assert cost["cacheRead"] == pytest.approx(CACHED * 1.25e-6)
    assert cost["cacheWrite"] == 0
    assert cost["total"] == pytest.approx(cost["input"] + cost["output"] + cost["cacheRead"])
    assert total_cost == pytest.approx(cost["total"])
    assert "cost" not in unpriced["usage"]


@pytest.mark.parametrize(
    "prices, match",
    [
        ({"m": {"inputs": 1e-6}}, "unknown price"),
        ({"m": {"input": -1}}, "non-negative"),
        ({"m": 3}, "dict of USD"),
        (["m"], "prices must be"),
    ],
)
def test_bad_prices_fail_at_construction(prices: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Session(prices=prices)


def test_failing_price_callable_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A price callable that raises costs the reply its cost, nothing more."""

    def prices(model: str) -> Any:
        raise KeyError(model)

    path = tmp_path / "t.jsonl"
    with Session(path, prices=prices) as s:
        s.assistant("x", model="m", usage={"input": 1, "output": 1})
    assert assistants(path)[0]["usage"] == sts(1, 1)
    assert "prices for model 'm' failed" in caplog.text


def test_public_api_unchanged() -> None:
    """Usage needs no new public name: it is a Session / assistant() parameter."""
    assert "usage" not in ststrace.__all__



# -- token counts are JSON integers, one rule everywhere --------------------------

BIG = 2**64


@pytest.mark.parametrize("bad", [BIG, 2**53, -1, 1.5, "10", True, None, [1], {"n": 1}])
def test_assistant_usage_refuses_counts_that_are_not_json_safe_integers(tmp_path: Path, bad: Any) -> None:
    with Session(tmp_path / "t.jsonl") as s:
        with pytest.raises(ValueError, match=r"usage\['output'\] must be a non-negative integer of at most 2\*\*53 - 1"):
            s.assistant("hi", usage={"input": 1, "output": bad})
        s.assistant("ok", usage={"input": 2**53 - 1, "output": 0})
        assert s.stats()["usage"]["input"] == 2**53 - 1
    (msg,) = valid_messages(s.path)
    assert msg["usage"] == {"input": 2**53 - 1, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2**53 - 1}


def test_provider_usage_with_a_huge_count_drops_that_count_not_the_reply(tmp_path: Path) -> None:
    """An adapter (here an OpenAI-shaped dict returned from @llm) with prompt_tokens >= 2**64:
    the count is left out as unreported; the file holds integers only and s.stats() agrees with `ststrace stats`."""
    from ststrace.cli import main

    reply = {"choices": [{"message": {"role": "assistant", "content": "r"}}],
             "usage": {"prompt_tokens": BIG, "completion_tokens": 7}}
    chat = llm(lambda messages: reply)
    with Session(tmp_path / "t.jsonl") as s:
        chat([{"role": "user", "content": "q"}])
        totals = s.stats()["usage"]
    (_, msg) = valid_messages(s.path)
    assert msg["content"] == "r"
    assert msg["usage"] == {"input": 0, "output": 7, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7}
    assert totals == msg["usage"]
    assert main(["stats", "--json", str(s.path)]) == 0


def test_total_tokens_is_capped_when_the_counts_add_up_past_the_limit(tmp_path: Path) -> None:
    with Session(tmp_path / "t.jsonl") as s:
        s.assistant("x", usage={"input": 2**53 - 1, "output": 2**53 - 1})
    (msg,) = valid_messages(s.path)
    assert msg["usage"]["totalTokens"] == 2**53 - 1
