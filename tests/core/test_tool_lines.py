"""``@tool``'s two lines are encoded in one step (``_records.single_call_line``
and ``tool_result_line``): byte for byte what the dict path writes, and a
string orjson refuses still reaches the file through the dict path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ststrace import Session, _records, tool
from ststrace._encode import dumps

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
