"""Tool results sent back to the model without their call's id.

Some frameworks lose the provider's tool-call id on the way back (CrewAI's
streamed LiteLLM path resends the call with ``id: null`` and its result
without ``tool_call_id``; see tests/frameworks/test_crewai.py). The result
must still answer the call recorded from the model's reply, not be dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")

import ststrace  # noqa: E402
from ststrace.testing import FakeAPI  # noqa: E402
from test_decorators_helpers import assert_paired, valid_messages  # noqa: E402
from test_instrument_helpers import CHAT_TOOLS, instrumented  # noqa: E402

PROMPT = "What's the weather in Paris, and the time there?"


@pytest.fixture(autouse=True)
def _openai() -> Iterator[None]:
    with instrumented("openai"):
        yield


def ask_then_answer(api: FakeAPI, results: list[dict[str, Any]]) -> None:
    """One model call that asks for get_weather and get_time, then the
    results sent back as *results* (``tool`` messages) behind an assistant
    turn whose calls have no ids."""
    client = openai.OpenAI(base_url=api.openai_base_url, api_key="test", max_retries=0)
    user = {"role": "user", "content": PROMPT}
    reply = client.chat.completions.create(model="gpt-test", messages=[user], tools=CHAT_TOOLS)
    calls = reply.choices[0].message.tool_calls or []
    assert [c.id for c in calls] == ["call_weather01", "call_time02"]
    assistant = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": None, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in calls
        ],
    }
    client.chat.completions.create(model="gpt-test", messages=[user, assistant, *results], tools=CHAT_TOOLS)


def results_of(path: Path) -> list[tuple[str, str]]:
    messages = valid_messages(path)
    assert_paired(messages)
    return [(m["toolCallId"], m["content"]) for m in messages if m["role"] == "tool"]


def test_named_results_answer_the_call_of_their_tool(fake_api: FakeAPI, tmp_path: Path) -> None:
    """A result naming its tool answers the oldest waiting call of that tool,
    whatever the order of the results."""
    path = tmp_path / "t.jsonl"
    with ststrace.Session(path):
        ask_then_answer(
            fake_api,
            [
                {"role": "tool", "name": "get_time", "content": "15:00"},
                {"role": "tool", "name": "get_weather", "content": "Sunny, 21 C"},
            ],
        )
    assert results_of(path) == [("call_time02", "15:00"), ("call_weather01", "Sunny, 21 C")]


def test_unnamed_results_answer_the_waiting_calls_in_order(fake_api: FakeAPI, tmp_path: Path) -> None:
    """Results with neither id nor name answer the waiting calls oldest first."""
    path = tmp_path / "t.jsonl"
    with ststrace.Session(path):
        ask_then_answer(fake_api, [{"role": "tool", "content": "Sunny, 21 C"}, {"role": "tool", "content": "15:00"}])
    assert results_of(path) == [("call_weather01", "Sunny, 21 C"), ("call_time02", "15:00")]


def test_a_result_with_an_id_is_not_taken_by_one_without(fake_api: FakeAPI, tmp_path: Path) -> None:
    """An id-less result only takes a call still waiting: the call answered by
    id is not answered twice, and an extra id-less result is not recorded."""
    path = tmp_path / "t.jsonl"
    with ststrace.Session(path):
        ask_then_answer(
            fake_api,
            [
                {"role": "tool", "tool_call_id": "call_weather01", "content": "Sunny, 21 C"},
                {"role": "tool", "name": "get_weather", "content": "Sunny again"},
                {"role": "tool", "content": "15:00"},
                {"role": "tool", "content": "nobody asked"},
            ],
        )
    assert results_of(path) == [("call_weather01", "Sunny, 21 C"), ("call_time02", "15:00")]
