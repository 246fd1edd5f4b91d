"""``@llm`` given a conversation that only grew converts only the new
messages (issue 32), and records exactly what converting it whole records.

Each scenario runs twice in real sessions, with the fast path
(``_dedup.INCREMENTAL``) on and off, and the two files must hold the same
messages. The edits claimed to be seen (a replaced or edited latest message,
truncation, compaction, a new system prompt) fall back to the full comparison;
edits claimed not to be seen (a message before the latest one replaced or
edited in place, in the same list) record what the full comparison records.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import orjson
import pytest

from ststrace import Session, _dedup, llm
from ststrace._adapters import inputs

Msgs = list[dict[str, Any]]
Scenario = Callable[[Session, Callable[..., Any]], None]


def _model() -> Callable[..., Any]:
    count = iter(range(10**6))

    @llm(model="fake")
    def model(messages: Any = None, system: Any = None, extra: Any = None) -> dict[str, Any]:
        k = next(count)
        if k == 1:
            call = {"id": f"call_{k}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            return {"role": "assistant", "content": "", "tool_calls": [call]}
        return {"role": "assistant", "content": f"reply {k}"}

    return model


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_bytes().splitlines()[1:]:  # not the header (ids, times)
        msg = orjson.loads(line).get("message")
        if isinstance(msg, dict):
            msg.pop("timestamp", None)
            out.append(msg)
    return out


def _run(tmp_path: Path, name: str, scenario: Scenario, incremental: bool, monkeypatch: Any) -> list[dict[str, Any]]:
    monkeypatch.setattr(_dedup, "INCREMENTAL", incremental)
    path = tmp_path / f"{name}-{incremental}.jsonl"
    with Session(path=path) as s:
        scenario(s, _model())
    return _lines(path)


def _start() -> Msgs:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


def _grow(messages: Msgs, k: int) -> None:
    messages.append({"role": "assistant", "content": f"reply {k}"})
    messages.append({"role": "user", "content": f"more {k}"})


def append_only(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    model(messages=messages)
    reply = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}
    messages.append(reply)
    model(messages=messages)  # nothing new
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": "a.py b.py"})
    model(messages=messages)
    s.user("typed by hand")
    messages.append({"role": "user", "content": "typed by hand"})
    for k in range(2, 6):
        _grow(messages, k)
        model(messages=messages)


def new_list_same_dicts(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    for k in range(4):
        model(messages=messages)
        messages = [*messages, {"role": "assistant", "content": f"reply {k}"}, {"role": "user", "content": f"u{k}"}]


def rebuilt_equal_dicts(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    for k in range(4):
        model(messages=copy.deepcopy(messages))
        _grow(messages, k)


def replaced_latest(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    model(messages=messages)
    messages[-1] = {"role": "user", "content": "hi, in other words"}
    model(messages=messages)
    _grow(messages, 1)
    model(messages=messages)


def latest_edited_in_place(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    model(messages=messages)
    messages[-1]["content"] = "hi there, edited"
    model(messages=messages)
    _grow(messages, 1)
    model(messages=messages)


def earlier_edited_in_place(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    _grow(messages, 0)
    model(messages=messages)
    messages[1]["content"] = "an earlier message, edited"
    _grow(messages, 1)
    model(messages=messages)
    _grow(messages, 2)
    model(messages=messages)


def earlier_replaced(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    _grow(messages, 0)
    model(messages=messages)
    messages[1] = {"role": "user", "content": "an earlier message, replaced"}
    _grow(messages, 1)
    model(messages=messages)


def truncated(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    for k in range(4):
        _grow(messages, k)
        model(messages=messages)
    del messages[1:5]
    model(messages=messages)
    _grow(messages, 9)
    model(messages=messages)


def compacted(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    for k in range(4):
        _grow(messages, k)
        model(messages=messages)
    messages = [messages[0], {"role": "user", "content": "summary so far"}, *messages[-2:]]
    model(messages=messages)
    _grow(messages, 9)
    model(messages=messages)


def new_system_prompt(s: Session, model: Callable[..., Any]) -> None:
    messages = _start()
    model(messages=messages)
    messages[0] = {"role": "system", "content": "now be verbose"}
    _grow(messages, 1)
    model(messages=messages)


def positional_and_system_kwarg(s: Session, model: Callable[..., Any]) -> None:
    messages: Msgs = [{"role": "user", "content": "hi"}]
    model(messages, system="be brief")
    _grow(messages, 0)
    model(messages, system="be brief")
    _grow(messages, 1)
    model(messages, system="now be verbose")
    messages.append({"not": "a message"})
    model(messages, system="now be verbose")


def two_agents(s: Session, model: Callable[..., Any]) -> None:
    a: Msgs = [{"role": "system", "content": "planner"}, {"role": "user", "content": "plan"}]
    b: Msgs = [{"role": "system", "content": "worker"}, {"role": "user", "content": "work"}]
    for k in range(3):
        model(messages=a)
        model(messages=b)
        _grow(a, k)
        _grow(b, k + 10)


SCENARIOS = [
    append_only, new_list_same_dicts, rebuilt_equal_dicts, replaced_latest, latest_edited_in_place,
    earlier_edited_in_place, earlier_replaced, truncated, compacted, new_system_prompt,
    positional_and_system_kwarg, two_agents,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_the_fast_path_records_what_the_full_comparison_records(
    scenario: Scenario, tmp_path: Path, monkeypatch: Any
) -> None:
    fast = _run(tmp_path, scenario.__name__, scenario, True, monkeypatch)
    full = _run(tmp_path, scenario.__name__, scenario, False, monkeypatch)
    assert fast == full
    assert any(m["role"] == "user" for m in fast)


def _count_conversions(monkeypatch: Any) -> list[int]:
    seen: list[int] = []
    real = inputs._message

    def counting(item: Any) -> Any:
        seen.append(1)
        return real(item)

    monkeypatch.setattr(inputs, "_message", counting)
    return seen


def test_a_grown_list_converts_only_its_new_messages(tmp_path: Path, monkeypatch: Any) -> None:
    seen = _count_conversions(monkeypatch)
    model = _model()
    messages = _start() + [{"role": "user", "content": f"m{i}"} for i in range(2000)]
    with Session(path=tmp_path / "t.jsonl"):
        model(messages=messages)
        assert len(seen) >= 2002
        for k in range(3):
            seen.clear()
            _grow(messages, k)
            model(messages=messages)
            # the two new items, the latest known item checked again, the new latest kept
            assert len(seen) <= 4
        seen.clear()
        messages[-1] = {"role": "user", "content": "replaced"}
        model(messages=messages)
        assert len(seen) >= 2000  # a replaced latest message: converted whole
    users = [m["content"] for m in _lines(tmp_path / "t.jsonl") if m["role"] == "user"]
    assert users[-3:] == ["more 1", "more 2", "replaced"]


def test_a_new_list_holding_the_same_messages_converts_only_the_new_ones(tmp_path: Path, monkeypatch: Any) -> None:
    seen = _count_conversions(monkeypatch)
    model = _model()
    messages = _start() + [{"role": "user", "content": f"m{i}"} for i in range(2000)]
    with Session(path=tmp_path / "t.jsonl"):
        model(messages=messages)
        seen.clear()
        messages = [*messages, {"role": "assistant", "content": "reply 0"}, {"role": "user", "content": "next"}]
        model(messages=messages)
        assert len(seen) <= 4
    assert _lines(tmp_path / "t.jsonl")[-2]["content"] == "next"
