"""Replaying traces converted from other agents' session files (Claude Code,
Pi): an agent that sends the recorded history back, turn by turn, through the
real SDK is answered at every turn, and recording that run gives the
converted trace's conversation again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

import ststrace  # noqa: E402
from fakeapi_fixtures import anthropic_client, openai_client  # noqa: E402
from ststrace import Session, Trace  # noqa: E402
from ststrace.testing import ReplayMismatch, assert_same_conversation, conversation_differences, replay  # noqa: E402
from test_instrument_helpers import new_trace, patched  # noqa: E402

__all__ = ["patched"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agent-traces"


def anthropic_history(client: Any, trace: Trace) -> None:
    """Claude Code's loop, as the Messages API sees it: the model's replies as
    they came back, the tool results and prompts as recorded."""
    history: list[dict[str, Any]] = []
    for m in trace.messages:
        if m["role"] == "assistant":
            reply = client.messages.create(model="claude", max_tokens=1024, messages=history)
            history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        elif m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["toolCallId"], "content": m["content"]}
            if history and history[-1]["role"] == "user" and isinstance(history[-1]["content"], list):
                history[-1]["content"].append(block)
            else:
                history.append({"role": "user", "content": [block]})
        else:
            history.append({"role": "user", "content": [{"type": "text", "text": m["content"]}]})


def chat_history(client: Any, trace: Trace) -> None:
    """The same over Chat Completions (Pi's sessions replayed by an OpenAI agent)."""
    history: list[dict[str, Any]] = []
    for m in trace.messages:
        if m["role"] == "assistant":
            message = client.chat.completions.create(model="pi", messages=history).choices[0].message
            history.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        elif m["role"] == "tool":
            history.append({"role": "tool", "tool_call_id": m["toolCallId"], "content": m["content"]})
        else:
            history.append({"role": m["role"], "content": m["content"]})


CASES = [
    pytest.param("example_claude_code.jsonl", anthropic_client, anthropic_history, id="claude-code"),
    pytest.param("example_claude_code.jsonl", openai_client, chat_history, id="claude-code-chat"),
    pytest.param("example_pi_session.jsonl", anthropic_client, anthropic_history, id="pi-messages"),
    # 160 requests, each resending the whole history: the openai SDK's request
    # transform alone takes over 10 s here.
    pytest.param("example_pi_session.jsonl", openai_client, chat_history, id="pi-chat", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("name", "factory", "agent"), CASES)
def test_converted_trace_round_trip(name: str, factory: Any, agent: Any, patched: None, tmp_path: Path) -> None:
    source = FIXTURES / name
    converted = ststrace.convert(source, redact=False)[0]
    again = new_trace(tmp_path)
    with replay(source) as api:  # the source file itself: replay() converts it
        with Session(again):
            agent(factory(api), converted)
    turns = sum(1 for m in converted.messages if m["role"] == "assistant")
    assert len(api.requests) == turns and api.misses == []
    diffs = conversation_differences(converted, again)
    # The Messages API always reports usage: a reply recorded without any comes
    # back with zero counts; every other field is the same.
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0, "reasoning": 0}
    assert all(f"usage differs: None != {zero!r}" in d for d in diffs), diffs[:3]
    if factory is openai_client:
        assert_same_conversation(converted, again)
    replayed = ststrace.read(again).messages
    calls = [c["id"] for m in replayed for c in m.get("toolCalls", [])]
    assert calls == [c["id"] for m in converted.messages for c in m.get("toolCalls", [])]
    assert json.loads(replayed[1]["toolCalls"][0]["function"]["arguments"]) == json.loads(
        converted.messages[1]["toolCalls"][0]["function"]["arguments"]
    )


def test_converted_trace_miss_names_the_changed_tool_result(patched: None, tmp_path: Path) -> None:
    source = FIXTURES / "example_claude_code.jsonl"
    converted = ststrace.convert(source, redact=False)[0]
    k = next(i for i, m in enumerate(converted.messages) if m["role"] == "tool")
    changed = Trace(converted.header, [dict(m) for m in converted.messages])
    changed.messages[k]["content"] = "a different result"
    with pytest.raises(ReplayMismatch) as info:
        with replay(source) as api:
            anthropic_history_tolerant(anthropic_client(api), changed)
    assert f"first difference: message {k + 1} of the request (tool)" in str(info.value)
    assert "+ sent:     'a different result'" in str(info.value)


def anthropic_history_tolerant(client: Any, trace: Trace) -> None:
    import anthropic

    try:
        anthropic_history(client, trace)
    except anthropic.APIStatusError as exc:
        assert exc.status_code == 409
