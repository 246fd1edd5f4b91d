"""Issue 13, second safety round: records lost, misplaced or hung, and bad input
that crashed the CLI. The cases that need real signals, forks or a full disk
are in tests/reliability/; the viewer's long strings in tests/browser/."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from ststrace import Session, read, validate
from ststrace import _writer
from ststrace.cli import main

# -- 14: an evicted descriptor is reopened only if the file is still the same ----------


def test_evicted_descriptor_is_not_reopened_on_a_replaced_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More sessions than pooled descriptors: the first session's descriptor is
    closed. Its file is then replaced; later records must not reach the
    replacement. They are counted lost, and the error names the file."""
    monkeypatch.setattr(_writer._fd_pool, "limit", 4)
    first = Session(tmp_path / "first.jsonl", flush_interval=3600).open()
    first.user("before")
    first.flush()
    others = [Session(tmp_path / f"other{i}.jsonl", flush_interval=3600).open() for i in range(6)]
    try:
        assert first._writer is not None and first._writer._fd is None, "the first descriptor was not evicted"
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(b"somebody else's file\n")
        os.replace(foreign, first.path)
        caplog.set_level(logging.WARNING, logger="ststrace")
        first.user("after 1")
        first.user("after 2")
        err = None
        try:
            first.close()
        except OSError as exc:
            err = exc
    finally:
        for s in others:
            s.close()
    assert first.path.read_bytes() == b"somebody else's file\n"
    assert first.stats()["lost"] == 2
    assert err is not None and str(first.path) in str(err)
    assert any("replaced" in r.getMessage() and str(first.path) in r.getMessage() for r in caplog.records)


def test_evicted_descriptor_reopens_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the file left alone is reopened and gets every record."""
    monkeypatch.setattr(_writer._fd_pool, "limit", 4)
    first = Session(tmp_path / "first.jsonl", flush_interval=3600).open()
    others = [Session(tmp_path / f"other{i}.jsonl", flush_interval=3600).open() for i in range(6)]
    assert first._writer is not None and first._writer._fd is None
    first.user("after")
    first.close()
    for s in others:
        s.close()
    assert [m["content"] for m in read(first.path).messages] == ["after"]
    assert first.stats()["lost"] == 0


# -- 16: recording after close() is counted and said, once ----------------------------


def test_recording_after_close_logs_a_warning_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Both records are counted lost; the warning comes once and names the session."""
    s = Session(tmp_path, id="closed-early")
    with s:
        s.user("inside")
    caplog.set_level(logging.WARNING, logger="ststrace")
    s.user("late 1")
    s.assistant("late 2")
    assert s.stats()["lost"] == 2
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "closed" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "closed-early" in warnings[0].getMessage()
    assert [m["content"] for m in read(s.path).messages] == ["inside"]


def test_recording_into_a_session_closed_before_it_opened_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Closed without ever writing: no file is made, records are counted and said once."""
    s = Session(tmp_path, id="never-opened")
    s.close()
    caplog.set_level(logging.WARNING, logger="ststrace")
    for i in range(3):
        s.user(f"late {i}")
    assert s.stats()["lost"] == 3
    warnings = [r.getMessage() for r in caplog.records if "never-opened" in r.getMessage()]
    assert len(warnings) == 1 and "closed" in warnings[0]
    assert not s.path.exists()


# -- 17: resume refuses anything but a regular file, without blocking ------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_resume_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    """Opening a FIFO for reading blocks until a writer comes: the session must
    not wait for one. If it does, the test unblocks it and fails."""
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            Session(fifo, resume=True).open().close()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # lets the blocked open return
        os.close(fd)
        t.join(5)
        pytest.fail("Session(fifo, resume=True) blocked opening the FIFO")
    assert len(outcome) == 1 and isinstance(outcome[0], ValueError), outcome
    assert "not a regular file" in str(outcome[0]) and str(fifo) in str(outcome[0])


def test_resume_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    with pytest.raises(ValueError, match="not a regular file"):
        Session(tmp_path / "dir.jsonl", resume=True).open()


# -- 18: objects that raise on __class__ (lazy proxies) never reach the caller ----------


class BrokenProxy:
    """A lazy proxy whose set-up failed: even isinstance() on it raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D401
        raise RuntimeError("lazy object could not be set up")

    def __repr__(self) -> str:
        raise RuntimeError("lazy object could not be set up")


RECORDINGS = {
    "user": lambda s, p: s.user(p),
    "system": lambda s, p: s.system(p),
    "tool": lambda s, p: s.tool("call_1", p),
    "assistant content": lambda s, p: s.assistant(p),
    "reasoning": lambda s, p: s.assistant("ok", reasoning=p),
    "arguments": lambda s, p: s.assistant("", tool_calls=[{"name": "f", "arguments": p}]),
    "tool call": lambda s, p: s.assistant("", tool_calls=[p]),
    "model": lambda s, p: s.assistant("ok", model=p),
    "record content": lambda s, p: s.record({"role": "user", "content": p}),
    "record message": lambda s, p: s.record(p),
}


@pytest.mark.parametrize("where", list(RECORDINGS))
def test_a_raising_proxy_never_reaches_user_code(tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture) -> None:
    """The record is dropped, counted in ``lost`` and logged; the session goes on."""
    caplog.set_level(logging.WARNING, logger="ststrace")
    with Session(tmp_path) as s:
        RECORDINGS[where](s, BrokenProxy())
        s.user("still recording")
    assert [m["content"] for m in read(s.path).messages][-1] == "still recording"
    assert s.stats()["lost"] == 1
    assert any("not recorded" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert [p for p in validate(s.path) if p.severity == "error"] == []


# -- 20: cat and tail print deeply nested values ---------------------------------------


def _nested(depth: int) -> str:
    """JSON text of a value *depth* objects deep (json.dumps itself recurses)."""
    return '{"k":' * depth + '"bottom"' + "}" * depth


def _deep_trace(path: Path) -> Path:
    deep = _nested(1000)
    call = {"id": "c1", "function": {"name": "f", "arguments": deep}}
    lines = [
        '{"type": "session", "harness": "h", "id": "deep", "config": ' + deep + "}",
        json.dumps({"type": "message", "message": {"role": "assistant", "content": "", "toolCalls": [call]}}),
        json.dumps({"type": "message", "message": {"role": "tool", "toolCallId": "c1", "content": "done"}}),
    ]
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["cat", "tail"])
def test_cat_and_tail_print_values_nested_1000_deep(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate accepts the file; cat and tail print it, the deep part cut visibly."""
    path = _deep_trace(tmp_path / "deep.jsonl")
    assert [p for p in validate(path) if p.severity == "error"] == []
    args = [command, str(path)] if command == "cat" else [command, str(path), "--timeout", "0.1"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "→ f" in out and "done" in out
    assert "nested deeper" in out
    assert "bottom" not in out  # below the cut
    assert out.count("nested deeper") == 2  # the header's value and the arguments
