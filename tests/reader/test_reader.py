"""read / iter_messages: well-formed files, malformed input, torn tails."""

from __future__ import annotations

import logging
import tracemalloc
from pathlib import Path

import pytest

from ststrace import Session, Trace, TraceFormatError, iter_messages, read

HEADER = b'{"type":"session","harness":"h","id":"abc","name":"n"}\n'


def msg(role: str = "user", content: str = "x", extra: str = "") -> bytes:
    return b'{"type":"message","message":{"role":"%s","content":"%s"%s}}\n' % (
        role.encode(),
        content.encode(),
        extra.encode(),
    )


def write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "t.jsonl"
    p.write_bytes(data)
    return p


def test_read_returns_header_and_inner_messages(tmp_path: Path) -> None:
    with Session(tmp_path, id="r", name="title") as s:
        s.user("q")
        s.assistant("a", model="m")
    trace = read(s.path)
    assert isinstance(trace, Trace)
    assert trace.header == {"type": "session", "harness": "ststrace", "id": "r", "name": "title"}
    assert trace.id == "r"
    assert [(m["role"], m["content"]) for m in trace.messages] == [("user", "q"), ("assistant", "a")]
    assert trace.messages[1]["model"] == "m"
    assert list(iter_messages(s.path)) == trace.messages
    assert read(str(s.path)).messages == trace.messages


def test_blank_lines_and_crlf_are_tolerated(tmp_path: Path) -> None:
    p = write(tmp_path, HEADER + b"\n" + msg(content="a").replace(b"\n", b"\r\n") + b"   \n" + msg(content="b"))
    assert [m["content"] for m in read(p).messages] == ["a", "b"]


def test_last_line_without_newline_but_complete_is_read(tmp_path: Path) -> None:
    p = write(tmp_path, HEADER + msg(content="a") + msg(content="b")[:-1])
    assert [m["content"] for m in read(p).messages] == ["a", "b"]


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"", 1, "empty"),
        (b"\n\n", 1, "empty"),
        (b'{"type":"message","message":{"role":"user","content":"x"}}\n', 1, "header"),
        (b'{"type":"session","id":"x"}\n', 1, "harness"),
        (b'{"type":"session","harness":"h","id":5}\n', 1, "'id'"),
        (b"[1,2]\n", 1, "header"),
        (HEADER + msg() + b"{not json}\n" + msg(), 3, "not valid JSON"),
        (HEADER + msg() + b'{"type":"other"}\n', 3, "not a message line"),
        (HEADER + b'{"type":"message","message":"hi"}\n', 2, "not a message line"),
        (HEADER + msg(role="robot"), 2, "unknown role"),
        (HEADER + b'{"type":"message","message":{"role":"user"}}\n', 2, "content"),
        (HEADER + b'{"type":"message","message":{"role":"user","content":null}}\n', 2, "content"),
        (HEADER + b'{"type":"message","message":{"role":"user","content":[1]}}\n', 2, "content"),
        (HEADER + msg() + b'{"type":"message","mess', 3, "incomplete"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path: Path, data: bytes, line: int, words: str) -> None:
    p = write(tmp_path, data)
    with pytest.raises(TraceFormatError) as info:
        read(p)
    assert info.value.line == line
    assert info.value.path == p
    assert str(info.value).startswith(f"{p}:{line}: ")
    assert words in str(info.value)
    with pytest.raises(TraceFormatError):
        list(iter_messages(p))


def test_trace_format_error_is_a_value_error(tmp_path: Path) -> None:
    p = write(tmp_path, b"nope\n")
    with pytest.raises(ValueError):
        read(p)


def test_torn_tail_strict_and_lenient(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """strict=False skips a torn last line with a warning; a torn middle line is still an error."""
    p = write(tmp_path, HEADER + msg(content="a") + msg(content="b") + msg(content="c")[:25])
    with pytest.raises(TraceFormatError, match="strict=False"):
        read(p)
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        trace = read(p, strict=False)
        streamed = list(iter_messages(p, strict=False))
    assert [m["content"] for m in trace.messages] == ["a", "b"]
    assert streamed == trace.messages
    assert f"{p}:4" in caplog.text and "torn" in caplog.text

    middle = write(tmp_path, HEADER + msg(content="a")[:20] + b"\n" + msg(content="b"))
    with pytest.raises(TraceFormatError) as info:
        read(middle, strict=False)
    assert info.value.line == 2


def test_torn_header_is_an_error_even_when_lenient(tmp_path: Path) -> None:
    """A file whose only line is a torn header has no header: TraceFormatError, not StopIteration."""
    p = write(tmp_path, HEADER[:20])
    with pytest.raises(TraceFormatError) as info:
        read(p, strict=False)
    assert info.value.line == 1
    with pytest.raises(TraceFormatError):
        list(iter_messages(p, strict=False))


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        read(tmp_path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "nope.jsonl")


def test_iter_messages_streams_in_constant_memory(tmp_path: Path) -> None:
    """iter_messages holds one line at a time: peak memory does not grow with the file."""
    body = msg(content="z" * 1000)
    p = write(tmp_path, HEADER + body * 20_000)  # ~20 MB
    tracemalloc.start()
    try:
        count = 0
        for m in iter_messages(p):
            count += len(m["content"]) == 1000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000
    assert peak < 2_000_000, peak


def test_iter_messages_is_lazy(tmp_path: Path) -> None:
    """Problems past the first message are only raised when iteration reaches them."""
    p = write(tmp_path, HEADER + msg(content="ok") + b"garbage\n")
    it = iter_messages(p)
    assert next(it)["content"] == "ok"
    with pytest.raises(TraceFormatError):
        next(it)
