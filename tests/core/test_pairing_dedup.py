"""``_pairing`` (tool calls waiting for results) and ``_dedup`` (the
conversation across turns), tested on their own, without a session or a file."""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from ststrace import _dedup, _pairing


def _call(cid: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def _pending(*calls: dict[str, Any]) -> OrderedDict[str, _pairing.Call]:
    table: OrderedDict[str, _pairing.Call] = OrderedDict()
    _pairing.register(table, calls)
    return table


def test_register_keeps_order_and_forgets_the_oldest_past_the_cap(monkeypatch: Any) -> None:
    monkeypatch.setattr(_pairing, "MAX_PENDING", 2)
    table = _pending(_call("a", "f"), _call("b", "g"), _call("c", "f"))
    assert list(table) == ["b", "c"]
    assert (table["c"].name, table["c"].arguments) == ("f", "{}")


def test_claim_takes_the_oldest_of_the_name_unless_arguments_match_a_later_one() -> None:
    table = _pending(_call("a", "add", '{"x": 1}'), _call("b", "add", '{"x": 2}'), _call("c", "mul"))
    assert _pairing.claim(table, "add", [{"x": 2}]) == "b"
    assert _pairing.claim(table, "add", [{"x": 9}]) == "a"
    assert _pairing.claim(table, "add", []) is None
    assert list(table) == ["c"]


def test_unparsable_arguments_parse_to_none_once() -> None:
    table = _pending(_call("a", "f", "not json"), _call("b", "f", "{}"))
    assert table["a"].parsed is None
    assert _pairing.claim(table, "f", [None]) == "a"


def test_answer_oldest_named_take_all_and_replay() -> None:
    table = _pending(_call("a", "f"), _call("b", "g"), _call("c", "g"))
    assert _pairing.answer(table, "a") is True
    assert _pairing.answer(table, "a") is False
    assert _pairing.oldest_named(table, "g") == "b"
    assert _pairing.oldest_named(table, None) == "b"
    assert _pairing.oldest_named(table, "h") is None
    assert _pairing.take_all(table) == ["b", "c"]
    assert not table
    _pairing.replay(table, {"role": "assistant", "toolCalls": [_call("x", "f"), _call("y", "f")]})
    _pairing.replay(table, {"role": "tool", "toolCallId": "x", "content": "1"})
    _pairing.replay(table, {"role": "user", "content": "hi"})
    assert list(table) == ["y"]


class _State:
    """What a ``Session`` keeps for ``_dedup.new_inputs``."""

    def __init__(self) -> None:
        self._conversations: deque[list[int]] = deque(maxlen=_dedup.MAX_CONVERSATIONS)
        self._stateful_turns: deque[tuple[str, tuple[int, ...]]] = deque(maxlen=_dedup.MAX_CONVERSATIONS)
        self._replies: deque[int] = deque(maxlen=_dedup.MAX_REPLIES)
        self._direct: deque[dict[str, Any]] = deque(maxlen=64)
        self._last_system: int | None = None
        self._pending: OrderedDict[str, _pairing.Call] = OrderedDict()

    def inputs(self, messages: list[dict[str, Any]], stateful: str | None = None) -> list[tuple[str, Any]]:
        fps = [_dedup.fingerprint(m) for m in messages]
        return [(m["role"], m["content"]) for m in _dedup.new_inputs(self, messages, fps, stateful)]

    def reply(self, message: dict[str, Any]) -> None:
        self._replies.append(_dedup.fingerprint(message))
        if message.get("toolCalls"):
            _pairing.register(self._pending, message["toolCalls"])


def _m(role: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **extra}


def test_a_resent_conversation_records_only_its_new_messages() -> None:
    state = _State()
    sys, u1 = _m("system", "be brief"), _m("user", "hi")
    assert state.inputs([sys, u1]) == [("system", "be brief"), ("user", "hi")]
    a1 = _m("assistant", "", toolCalls=[_call("c1", "f")])
    state.reply(a1)
    result = _m("tool", "42", toolCallId="c1")
    u2 = _m("user", "thanks")
    assert state.inputs([sys, u1, a1, result, u2]) == [("tool", "42"), ("user", "thanks")]
    assert not state._pending  # the result answered c1
    # Resent again unchanged (a retry): nothing new.
    assert state.inputs([sys, u1, a1, result, u2]) == []


def test_a_result_already_recorded_is_not_recorded_again() -> None:
    state = _State()
    state.inputs([_m("user", "go")])
    a1 = _m("assistant", "", toolCalls=[_call("c1", "f")])
    state.reply(a1)
    _pairing.answer(state._pending, "c1")  # @tool recorded it
    assert state.inputs([_m("user", "go"), a1, _m("tool", "42", toolCallId="c1")]) == []


def test_a_message_recorded_directly_is_skipped_once() -> None:
    state = _State()
    state._direct.append({"role": "user", "content": "hi"})
    assert state.inputs([_m("user", "hi")]) == []
    assert not state._direct
    assert state.inputs([_m("user", "hi"), _m("user", "hi")]) == [("user", "hi")]


def test_stateful_turns_record_all_but_a_retry_and_repeated_instructions() -> None:
    state = _State()
    turn = [_m("system", "rules"), _m("user", "q1")]
    assert state.inputs(turn, stateful="resp_1") == [("system", "rules"), ("user", "q1")]
    assert state.inputs(turn, stateful="resp_1") == []  # the same turn again: a retry
    assert state.inputs([_m("system", "rules"), _m("user", "q2")], stateful="resp_2") == [("user", "q2")]


def test_continue_conversation_picks_the_one_it_extends() -> None:
    assert _dedup.continue_conversation([[1, 2], [5, 6, 7]], [5, 6, 7, 8]) == (3, 1)
    assert _dedup.continue_conversation([[1, 2]], [9]) == (0, -1)
    # A sliding window: [sys, reply 0, ok] then [sys, reply 1, ok]; reply 1 anchors.
    assert _dedup.continue_conversation([[0, 10, 3]], [0, 11, 3], replies=[10, 11]) == (2, 0)
    assert _dedup.new_start([1, 2, 3], [2, 3, 4]) == 2
