"""Replay matching and miss diagnosis cost about the request's length, not the
recording's times it (issue 31, item 8): bounded by counting message
comparisons on a 10,000-turn recording, not by timing."""

from __future__ import annotations

from typing import Any

import pytest

from ststrace._reader import Trace
from ststrace.testing import _replay
from ststrace.testing._replay import ReplayAPI

TURNS = 10_000


class Budget(Exception):
    pass


@pytest.fixture()
def compares(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts same_message calls; past a budget the test stops at once (the
    quadratic code would take minutes)."""
    count = [0, 0]  # calls, budget
    real = _replay.same_message

    def counting(a: Any, b: Any) -> bool:
        count[0] += 1
        if count[1] and count[0] > count[1]:
            raise Budget(f"more than {count[1]} message comparisons")
        return real(a, b)

    monkeypatch.setattr(_replay, "same_message", counting)
    return count


def _recording() -> Trace:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(TURNS):
        messages.append({"role": "user", "content": f"question {i}"})
        if i % 2:
            messages.append({"role": "assistant", "content": f"answer {i}"})
        else:
            messages.append({"role": "assistant", "content": "", "toolCalls": [
                {"id": f"call_{i}", "function": {"name": "look", "arguments": "{}"}}]})
            messages.append({"role": "tool", "toolCallId": f"call_{i}", "content": f"found {i}"})
    return Trace(header={"type": "session", "harness": "h", "id": "big"}, messages=messages)


def _request(trace: Trace, turn: int) -> list[dict[str, Any]]:
    """What an agent sends for the *turn*-th reply: the history before it."""
    replies = [i for i, m in enumerate(trace.messages) if m["role"] == "assistant"]
    return [dict(m) for m in trace.messages[: replies[turn]]]


def test_a_matched_request_compares_about_its_own_length(compares: list[int]) -> None:
    trace = _recording()
    api = ReplayAPI([trace])
    for turn in (0, 1, 2, TURNS // 2, TURNS - 2, TURNS - 1):
        sent = _request(trace, turn)
        compares[0], compares[1] = 0, 2 * len(sent) + 20
        found = api._match(sent, None)
        assert found is not None and found.index == len(sent), turn


def test_a_miss_is_diagnosed_in_about_the_request_length(compares: list[int]) -> None:
    trace = _recording()
    api = ReplayAPI([trace])
    sent = _request(trace, TURNS - 1)
    sent[-1] = {"role": "user", "content": "question changed"}
    compares[0], compares[1] = 0, 4 * len(sent) + 20
    assert api._match(sent, None) is None
    text = api._explain(1, "/v1/chat/completions", sent)
    assert f"first difference: message {len(sent)} of the request (user)" in text
    assert "- recorded: 'question 9999'" in text and "+ sent:     'question changed'" in text
    assert f"closest recorded turn: reply {TURNS} of session 'big'" in text


def test_a_request_past_the_end_is_named_so(compares: list[int]) -> None:
    trace = _recording()
    api = ReplayAPI([trace])
    sent = [dict(m) for m in trace.messages] + [{"role": "user", "content": "one more"}]
    compares[0], compares[1] = 0, 4 * len(sent) + 20
    text = api._explain(1, "/v1/chat/completions", sent)
    assert "continues past the end of session 'big'" in text
