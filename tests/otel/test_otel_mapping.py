"""ststrace._otel.mapping: GenAI span attributes -> STS messages, as pure functions."""

from __future__ import annotations

import orjson
import pytest

from ststrace._otel.mapping import InputCache, parse_span, usage_from
from ststrace._session import _fingerprint


def _user(text: str) -> dict[str, object]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def test_input_cache_parses_only_appended_items_and_falls_back_on_any_change() -> None:
    """Resent history is parsed once; a text that is not a pure append is parsed whole, with the same result."""
    cache = InputCache()
    history = [_user("a"), _user("b")]
    first = parse_span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": orjson.dumps(history).decode()}, (), cache)
    assert first is not None and [m["content"] for m in first.inputs or []] == ["a", "b"]
    kept = cache.messages[0]
    history.append(_user('c, with [brackets], and "quotes"]'))
    second = parse_span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": orjson.dumps(history).decode()}, (), cache)
    assert second is not None and [m["content"] for m in second.inputs or []] == ["a", "b", 'c, with [brackets], and "quotes"]']
    assert cache.messages[0] is kept  # the first items were not parsed again
    assert second.input_fingerprints == [_fingerprint(m) for m in second.inputs or []]
    # An edited history (dropped first message): parsed whole, nothing stale kept.
    edited = history[1:]
    third = parse_span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": orjson.dumps(edited).decode()}, (), cache)
    assert third is not None and [m["content"] for m in third.inputs or []] == ["b", 'c, with [brackets], and "quotes"]']
    # A last item that grew (same prefix, no comma where the old array ended): parsed whole.
    grown = [_user("b"), _user('c, with [brackets], and "quotes"] and more')]
    fourth = parse_span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": orjson.dumps(grown).decode()}, (), cache)
    assert fourth is not None and [m["content"] for m in fourth.inputs or []][-1].endswith("and more")


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        (
            {"gen_ai.usage.input_tokens": 150, "gen_ai.usage.output_tokens": 20, "gen_ai.usage.cache_read.input_tokens": 100,
             "gen_ai.usage.cache_creation.input_tokens": 30, "gen_ai.usage.reasoning.output_tokens": 5},
            {"input": 20, "output": 20, "cacheRead": 100, "cacheWrite": 30, "totalTokens": 170, "reasoning": 5},
        ),
        (
            {"llm.token_count.prompt": 10, "llm.token_count.completion": 2, "llm.token_count.prompt_details.cache_read": 4},
            {"input": 6, "output": 2, "cacheRead": 4, "cacheWrite": 0, "totalTokens": 12},
        ),
        ({"gen_ai.usage.output_tokens": 3}, {"input": 0, "output": 3, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3}),
        ({"gen_ai.request.model": "m"}, None),
    ],
)
def test_usage_from_conventions_into_pi_shape(attrs: dict[str, object], expected: dict[str, int] | None) -> None:
    """Cached tokens counted inside the input (semconv, OpenInference) are moved out, as Pi counts them."""
    assert usage_from(attrs) == expected


def test_non_genai_operations_and_chain_spans_are_not_steps() -> None:
    """Embeddings, retrieval and OpenInference CHAIN spans record nothing."""
    assert parse_span({"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "e"}) is None
    assert parse_span({"openinference.span.kind": "CHAIN", "input.value": "x"}) is None
    assert parse_span({"http.method": "GET"}) is None


def test_semconv_parts_tool_responses_under_user_role_and_flat_messages() -> None:
    """PydanticAI puts tool_call_response parts in a user message; some emitters send flat {role, content}."""
    step = parse_span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": orjson.dumps(
                [
                    {"role": "user", "content": "flat"},
                    {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "result": {"ok": True}}, {"type": "text", "content": "and?"}]},
                    {"role": "tool", "id": "c2", "parts": [{"type": "text", "content": "plain tool text"}]},
                ]
            ).decode(),
            "gen_ai.output.messages": orjson.dumps(
                [{"role": "assistant", "parts": [{"type": "tool_call", "name": "f", "arguments": {"x": 1}}]},
                 {"role": "assistant", "parts": [{"type": "text", "content": "second choice"}]}]
            ).decode(),
        }
    )
    assert step is not None and step.inputs == [
        {"role": "user", "content": "flat"},
        {"role": "tool", "content": '{"ok":true}', "toolCallId": "c1"},
        {"role": "user", "content": "and?"},
        {"role": "tool", "content": "plain tool text", "toolCallId": "c2"},
    ]
    call = step.outputs[0]["toolCalls"][0]
    assert call["function"] == {"name": "f", "arguments": '{"x":1}'} and call["id"]  # an id is made up when missing
