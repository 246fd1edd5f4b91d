"""Issue 24, third adversarial round (items 7-13): history, usage values,
malformed traces, OTLP memory, directories and odd paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ststrace import Session, llm
from test_decorators_helpers import valid_messages
from test_instrument_helpers import patched, strip

__all__ = ["patched"]  # the fixture, imported for pytest

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "u1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "u2"},
]


def _roles_contents(path: Path) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in valid_messages(path)]


# -- 7: a session started from an earlier conversation records it whole ---------------


def test_llm_first_call_records_the_history_assistant_turns(tmp_path: Path) -> None:
    """[system, u1, a1, u2] sent by the first @llm call: all four, then the reply."""
    chat = llm(lambda messages: {"role": "assistant", "content": "r2"})
    with Session(tmp_path / "t.jsonl") as s:
        chat(HISTORY)
        chat([*HISTORY, {"role": "assistant", "content": "r2"}, {"role": "user", "content": "u3"}])
    assert _roles_contents(s.path) == [
        ("system", "Be brief."), ("user", "u1"), ("assistant", "a1"), ("user", "u2"),
        ("assistant", "r2"), ("user", "u3"), ("assistant", "r2"),
    ]


def test_history_tool_calls_and_results_are_recorded_paired(tmp_path: Path) -> None:
    """An earlier turn's tool call and its result, resent in the first call, are both recorded."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
    ]
    chat = llm(lambda messages: "r2")
    with Session(tmp_path / "t.jsonl") as s:
        chat(history)
    msgs = valid_messages(s.path)
    assert [(m["role"], m["content"], m.get("toolCallId")) for m in msgs] == [
        ("user", "u1", None), ("assistant", "", None), ("tool", "42", "c1"),
        ("assistant", "a1", None), ("user", "u2", None), ("assistant", "r2", None),
    ]
    assert msgs[1]["toolCalls"] == [{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]


def test_instrumented_openai_first_call_records_history(tmp_path: Path, patched: None) -> None:
    """The real openai client, instrumented, against the fake server."""
    from fakeapi_fixtures import openai_client
    from ststrace.testing import FakeAPI

    with FakeAPI(text_reply="r2") as api, Session(tmp_path / "t.jsonl") as s:
        client = openai_client(api)
        client.chat.completions.create(model="m", messages=HISTORY)
        client.close()
    assert [(m["role"], m["content"]) for m in strip(valid_messages(s.path))] == [
        ("system", "Be brief."), ("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "r2"),
    ]
