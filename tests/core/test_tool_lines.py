"""``@tool``'s two lines are encoded in one step (``_records.single_call_line``
and ``tool_result_line``): byte for byte what the dict path writes, and a
string orjson refuses still reaches the file through the dict path."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest

from ststrace import Session, _records, tool
from ststrace._encode import dumps
from test_decorators_helpers import assert_paired, valid_messages

TEXTS = [
    "",
    "plain",
    'quotes " and \\ backslashes',
    "lines\nand\ttabs\r and \x00\x01\x1f controls",
    "unicode é ñ 中文 and emoji 🧪 \u2028 \u2029",
    '{"query": "weather in Paris", "limit": 3}',
]


def _envelope(msg: dict[str, Any]) -> bytes:
    return b'{"type":"message","message":' + orjson.dumps(msg) + b"}\n"


@pytest.fixture
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_records, "_time_ns", lambda: 1_796_000_000_123_456_789)


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("name", ["search", 'odd "name" ✓'])
def test_the_call_line_is_the_dict_paths_bytes(name: str, text: str, frozen_time: None) -> None:
    for call_id in ("call_abc", text or "x"):
        fast = _records.single_call_line(call_id, orjson.dumps(name), text)
        assert fast == _envelope(_records.single_call(call_id, name, text))
        assert orjson.loads(fast)["message"]["toolCalls"][0]["function"]["arguments"] == text


@pytest.mark.parametrize("text", TEXTS)
def test_the_result_line_is_the_dict_paths_bytes(text: str, frozen_time: None) -> None:
    fast = _records.tool_result_line("call_abc", text)
    assert fast == _envelope(_records.tool_result("call_abc", text))


def test_a_lone_surrogate_is_refused_here_and_written_by_the_dict_path(tmp_path: Path) -> None:
    with pytest.raises(orjson.JSONEncodeError):
        _records.tool_result_line("call_abc", "bad \ud800 text")

    @tool
    def echo(text: str) -> str:
        return text

    path = tmp_path / "t.jsonl"
    with Session(path=path):
        echo("first")  # opens the file: the next call takes the one-step path
        assert echo("bad \ud800 text") == "bad \ud800 text"
    lines = [orjson.loads(line)["message"] for line in path.read_bytes().splitlines()[1:]]
    assert [m["role"] for m in lines] == ["assistant", "tool", "assistant", "tool"]
    # The encoder's fallback replaces the surrogate; the line is whole and valid.
    assert lines[3]["content"] == orjson.loads(dumps("bad \ud800 text"))
    assert lines[2]["toolCalls"][0]["function"]["name"] == "echo"
    assert lines[3]["toolCallId"] == lines[2]["toolCalls"][0]["id"]


# -- the lean path (issue 32): decided at decoration, the same bytes ------------------


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("name", ["search", 'odd "name" ✓', "100% sure", "%d%b%s"])
def test_the_lean_call_format_gives_the_call_lines_bytes(name: str, text: str, frozen_time: None) -> None:
    """The call line with the name put in at decoration (a ``%`` in the name
    escaped) is byte for byte the one-step line, for an id ststrace made."""
    from ststrace import _ids

    call_id = _ids.new_tool_call_id()
    fmt = _records.call_line_format(orjson.dumps(name))
    lean = fmt % (call_id.encode(), orjson.dumps(text), _records._time_ns() // 1_000_000)
    assert lean == _records.single_call_line(call_id, orjson.dumps(name), text)


@pytest.mark.parametrize("text", TEXTS)
def test_the_lean_result_format_gives_the_result_lines_bytes(text: str, frozen_time: None) -> None:
    from ststrace import _ids

    call_id = _ids.new_tool_call_id()
    lean = _records.RESULT_LINE_OWN_ID % (orjson.dumps(text), call_id.encode(), _records._time_ns() // 1_000_000)
    assert lean == _records.tool_result_line(call_id, text)


RESULTS: list[Any] = [
    "text",
    "",
    5,
    -7,
    2.5,
    float("nan"),
    True,
    2**70,  # beyond 64 bits: orjson refuses it, the general path's encoder writes the digits
    None,
    {"a": [1, 2]},
    [1, "x"],
    "bad \ud800 text",
    "token ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "Paris: 18 C, light rain, wind 12 km/h",
]
ARGUMENTS: list[Any] = ["plain", "", "quote \" and \\", "lone \ud800", "key sk-" + "abcdefghijklmnopqrstuvwxyz012345", {"nested": [1.5, None]}]


def _record_all(path: Path, monkeypatch: pytest.MonkeyPatch, lean: bool, redact: bool) -> bytes:
    """Every argument and result above through one @tool, the lean path on or
    off (off: its line format refused at decoration), time and ids fixed."""
    from ststrace import _ids, _tool_calls

    monkeypatch.setattr(_records, "_time_ns", lambda: 1_796_000_000_123_456_789)
    monkeypatch.setattr(_tool_calls, "_time_ns", lambda: 1_796_000_000_123_456_789)
    monkeypatch.setattr(_ids, "call_ids", map("call_000000000000%06x".__mod__, itertools.count(1)))
    if not lean:
        monkeypatch.setattr(_records, "call_line_format", lambda name_json: None)

    @tool
    def echo(arg: Any, result: Any) -> Any:
        return result

    monkeypatch.undo()
    monkeypatch.setattr(_records, "_time_ns", lambda: 1_796_000_000_123_456_789)
    monkeypatch.setattr(_tool_calls, "_time_ns", lambda: 1_796_000_000_123_456_789)
    monkeypatch.setattr(_ids, "call_ids", map("call_000000000000%06x".__mod__, itertools.count(1)))
    with Session(path=path, id="same", redact=redact):
        for arg in ARGUMENTS:
            for result in RESULTS:
                assert echo(arg, result=result) is result
                assert echo(arg, result) is result
    return path.read_bytes()


@pytest.mark.parametrize("redact", [True, False])
def test_the_lean_path_writes_the_general_paths_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redact: bool
) -> None:
    """The same calls through the lean path and through the general one give
    the same file, byte for byte: odd results (numbers, a 70-bit int, None,
    lone surrogates, secrets) and odd arguments included."""
    lean = _record_all(tmp_path / "lean.jsonl", monkeypatch, lean=True, redact=redact)
    monkeypatch.undo()
    general = _record_all(tmp_path / "general.jsonl", monkeypatch, lean=False, redact=redact)
    assert lean == general
    lines = lean.splitlines()
    assert len(lines) == 1 + 4 * len(ARGUMENTS) * len(RESULTS)
    messages = [orjson.loads(line)["message"] for line in lines[1:]]
    if redact:
        assert not any("ghp_A1b2" in m.get("content", "") for m in messages)
    contents = [m["content"] for m in messages if m["role"] == "tool"][: 2 * len(RESULTS) : 2]
    assert contents[:8] == ["text", "", "5", "-7", "2.5", "null", "true", '"1180591620717411303424"']


def test_the_lean_path_is_taken_in_the_common_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain function's call with nothing pending goes through _lean_call once
    its schema is recorded; a method, a bound id and a pending call do not."""
    from ststrace import _tool_calls, tool_call_id

    taken: list[str] = []
    real = _tool_calls._lean_call

    def spy(spec: Any, session: Any, append: Any, args: Any, kwargs: Any) -> str:
        taken.append(spec.name)
        return real(spec, session, append, args, kwargs)

    monkeypatch.setattr(_tool_calls, "_lean_call", spy)

    @tool
    def f(x: int) -> int:
        return x

    class K:
        @tool
        def m(self, x: int) -> int:
            return x

    with Session(tmp_path / "t.jsonl") as s:
        f(1)  # first call: records the schema (general path)
        f(2)
        K().m(3)
        with tool_call_id("call_given"):
            f(4)
        s.assistant(tool_calls=[{"id": "call_asked", "name": "f", "arguments": {"x": 5}}])
        f(5)  # answers the pending call
        f(6)
    assert taken == ["f", "f"]
    msgs = valid_messages(tmp_path / "t.jsonl")
    assert_paired(msgs)
    results = [m for m in msgs if m["role"] == "tool"]
    assert [m["toolCallId"] for m in results][3:5] == ["call_given", "call_asked"]
