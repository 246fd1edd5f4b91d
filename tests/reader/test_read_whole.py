"""``read()`` parses a well-formed file in one ``orjson.loads`` (issue 32): the
same trace as reading it line by line, and every odd file still read line by
line (so its problems are reported as before)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ststrace import TraceFormatError
from ststrace._reader import _read_lines, _read_whole, read, read_tree
from ststrace._tree import resolve

HEADER = b'{"type":"session","harness":"h","id":"s"}'
USER = orjson.dumps({"type": "message", "message": {"role": "user", "content": "hi, a \\ and \"q\"\nline", "timestamp": 1}})
REPLY = orjson.dumps({"type": "message", "message": {"role": "assistant", "content": "ok", "model": "m"}})
OUTCOME = b'{"type":"outcome","outcome":{"reward":0.5}}'
WELL_FORMED = {
    "plain": b"\n".join([HEADER, USER, REPLY]) + b"\n",
    "crlf": b"\r\n".join([HEADER, USER, REPLY]) + b"\r\n",
    "outcome": b"\n".join([HEADER, USER, OUTCOME, REPLY]) + b"\n",
    "header only": HEADER + b"\n",
    "spaces": b"\n".join([HEADER + b"  ", b" " + USER]) + b"\n",
}
ODD = {
    "blank line": b"\n".join([HEADER, b"", USER]) + b"\n",
    "no final newline": b"\n".join([HEADER, USER]),
    "torn last line": b"\n".join([HEADER, USER]) + b'\n{"type": "message", "mess',
    "a value over two lines": b"\n".join([HEADER, b'[1', b'2]']) + b"\n",
    "a string over two lines": b"\n".join([HEADER, b'"a', b'b"']) + b"\n",
    "invalid json": b"\n".join([HEADER, b"{nope}"]) + b"\n",
    "empty": b"",
    "newline only": b"\n",
}


@pytest.mark.parametrize("name", list(WELL_FORMED))
def test_a_well_formed_file_is_read_whole_and_equals_line_by_line(tmp_path: Path, name: str) -> None:
    """One parse, and the very trace the line reader gives (header, messages, outcome)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(WELL_FORMED[name])
    assert _read_whole(path) is not None
    whole, lines = read_tree(path), _read_lines(path, True)
    assert (whole.header, whole.messages, whole.outcome) == (lines.header, lines.messages, lines.outcome)
    assert read(path).messages == resolve(lines.header, lines.messages)


@pytest.mark.parametrize("name", list(ODD))
def test_an_odd_file_is_read_line_by_line(tmp_path: Path, name: str) -> None:
    """Not read whole: line by line, which reports the same error (or skips a torn last line)."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(ODD[name])
    assert _read_whole(path) is None
    try:
        expected: object = _read_lines(path, False)
    except TraceFormatError as exc:
        with pytest.raises(TraceFormatError) as got:
            read(path, strict=False)
        assert str(got.value) == str(exc)
    else:
        trace = read(path, strict=False)
        assert (trace.header, trace.messages) == (expected.header, expected.messages)  # type: ignore[attr-defined]


def test_a_bad_message_is_reported_at_its_line(tmp_path: Path) -> None:
    """A line that parses but is no message names its line, read whole or not."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join([HEADER, USER, b'{"type":"message","message":{"role":"robot","content":""}}']) + b"\n")
    with pytest.raises(TraceFormatError, match=r":3: unknown role 'robot'"):
        read(path)


def test_a_tree_is_resolved(tmp_path: Path) -> None:
    """A llama.app tree read whole still gives its active path."""
    wild = Path(__file__).resolve().parents[1] / "fixtures" / "convert-wild" / "llama_tools.jsonl"
    path = tmp_path / "t.jsonl"
    path.write_bytes(wild.read_bytes())
    trace = read(path)
    lines = _read_lines(path, True)
    assert trace.messages == resolve(lines.header, lines.messages)
    assert len(trace.messages) < len(lines.messages)  # the placeholder root and other branches left out
