"""Session: file creation rules, the recording API, context handling and stats."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall

import ststrace
from ststrace import Session, current_session, read, validate


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def errors_of(path: Path) -> list[ststrace.Problem]:
    return [p for p in validate(path) if p.severity == "error"]


# -- paths, ids, header ---------------------------------------------------------


def test_directory_path_gives_id_named_file(tmp_path: Path) -> None:
    """A directory path holds `<id>.jsonl`; missing parents are created."""
    target = tmp_path / "a" / "b"
    with Session(target, id="run-1") as s:
        pass
    assert s.path == target / "run-1.jsonl"
    assert s.path.is_file()


def test_jsonl_path_is_used_as_is(tmp_path: Path) -> None:
    """A path ending in .jsonl is the file itself."""
    with Session(tmp_path / "x" / "mine.jsonl") as s:
        pass
    assert s.path == tmp_path / "x" / "mine.jsonl"
    assert lines_of(s.path)[0]["id"] == s.id


def test_default_path_comes_from_ststrace_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """path=None writes into $STSTRACE_DIR."""
    monkeypatch.setenv("STSTRACE_DIR", str(tmp_path / "env-dir"))
    with Session() as s:
        s.user("hi")
    assert s.path.parent == tmp_path / "env-dir"
    assert read(s.path).messages[0]["content"] == "hi"


def test_default_path_without_env_is_traces_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without STSTRACE_DIR the file goes to ./traces."""
    monkeypatch.delenv("STSTRACE_DIR")
    monkeypatch.chdir(tmp_path)
    with Session() as s:
        pass
    assert s.path.resolve().parent == (tmp_path / "traces").resolve()
    assert s.path.exists()


def test_header_is_on_disk_as_soon_as_the_session_opens(tmp_path: Path) -> None:
    """Entering writes the header line immediately, not with the first flush."""
    with Session(tmp_path, id="h1", name="my run", harness="my-agent", metadata={"k": [1, 2]}, flush_interval=60) as s:
        header = lines_of(s.path)
        assert header == [{"type": "session", "harness": "my-agent", "id": "h1", "name": "my run", "k": [1, 2]}]


def test_harness_defaults_to_env_then_ststrace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """harness: STSTRACE_HARNESS when set, else "ststrace"."""
    with Session(tmp_path) as a:
        pass
    monkeypatch.setenv("STSTRACE_HARNESS", "env-harness")
    with Session(tmp_path) as b:
        pass
    assert read(a.path).header["harness"] == "ststrace"
    assert read(b.path).header["harness"] == "env-harness"


def test_generated_ids_are_uuid7_and_time_ordered(tmp_path: Path) -> None:
    """Default ids look like UUIDv7 and sort in creation order."""
    ids = [Session(tmp_path).id for _ in range(300)]
    pattern = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
    assert all(pattern.fullmatch(i) for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    ms = int(ids[0].replace("-", "")[:12], 16)
    assert abs(ms - time.time() * 1000) < 60_000


@pytest.mark.parametrize(
    "bad",
    ["../x", "/etc/passwd", "a/b", "a\\b", "a\x00b", "", ".", "..", "a b", "é", "x" * 129, 123, None.__class__],
)
def test_invalid_ids_are_rejected_before_any_file(tmp_path: Path, bad: Any) -> None:
    """An id must match [A-Za-z0-9._-]{1,128}: it becomes a file name."""
    with pytest.raises(ValueError, match="invalid session id"):
        Session(tmp_path, id=bad)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("good", ["a", "A-b_c.1", "x" * 128, "...", "01J9Z"])
def test_valid_ids_name_the_file(tmp_path: Path, good: str) -> None:
    with Session(tmp_path, id=good) as s:
        pass
    assert s.path == tmp_path / f"{good}.jsonl"
    assert read(s.path).header["id"] == good


@pytest.mark.parametrize("key", ["type", "harness", "id", "name"])
def test_metadata_may_not_override_reserved_keys(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match=repr(key)):
        Session(tmp_path, metadata={key: "x"})
    assert list(tmp_path.iterdir()) == []


def test_metadata_must_be_a_mapping_with_string_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Session(tmp_path, metadata=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Session(tmp_path, metadata={1: "a"})
    with Session(tmp_path, metadata={"team": "x", "unset": None}) as s:
        pass
    header = read(s.path).header
    assert header["team"] == "x"
    assert "unset" not in header  # optional fields are omitted, never null


@pytest.mark.parametrize(
    "kwargs",
    [{"name": 5}, {"harness": ""}, {"flush_interval": 0}, {"flush_interval": -1}, {"buffer_size": 0}],
)
def test_bad_arguments_raise_value_error(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Session(tmp_path, **kwargs)


# -- existing files, symlinks, permissions --------------------------------------


def test_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    """Opening an existing path raises FileExistsError; the file is byte-for-byte unchanged."""
    path = tmp_path / "t.jsonl"
    original = b'{"type":"session","harness":"x","id":"t"}\nnot even json\x00\xff'
    path.write_bytes(original)
    before = os.stat(path)
    with pytest.raises(FileExistsError, match="resume=True"):
        with Session(path):
            pytest.fail("the block must not run")
    after = os.stat(path)
    assert path.read_bytes() == original
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (before.st_mtime_ns, before.st_size, before.st_ino)


def test_existing_file_by_id_in_directory(tmp_path: Path) -> None:
    """The same id twice in one directory: the second session refuses."""
    with Session(tmp_path, id="dup") as s:
        s.user("first")
    content = s.path.read_bytes()
    with pytest.raises(FileExistsError):
        Session(tmp_path, id="dup").open()
    assert s.path.read_bytes() == content
    assert current_session() is None


def test_symlink_at_target_is_not_followed(tmp_path: Path) -> None:
    """A symlink (dangling or not) at the final path is refused, and its target untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    link = tmp_path / "t.jsonl"
    link.symlink_to(victim)
    with pytest.raises(FileExistsError):
        Session(link).open()
    assert victim.read_bytes() == b"precious"

    dangling = tmp_path / "d.jsonl"
    nowhere = tmp_path / "created-through-link"
    dangling.symlink_to(nowhere)
    with pytest.raises(FileExistsError):
        Session(dangling).open()
    assert not nowhere.exists()


def test_resume_refuses_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_bytes(b'{"type":"session","harness":"x","id":"r"}\n')
    link = tmp_path / "r.jsonl"
    link.symlink_to(real)
    with pytest.raises(ValueError, match="symlink"):
        Session(link, resume=True).open()
    assert real.read_bytes() == b'{"type":"session","harness":"x","id":"r"}\n'


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_file_mode_0600_and_directory_mode_0700(tmp_path: Path, umask: int) -> None:
    """Trace files hold prompts: 0600 whatever the umask; a created directory is 0700."""
    old = os.umask(umask)
    try:
        with Session(tmp_path / "new-dir", id="m") as s:
            s.user("secret")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(s.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(s.path.parent).st_mode) == 0o700 & ~umask


# -- context: with, async with, nesting, exceptions --------------------------------


def test_nested_sessions_restore_the_previous_one(tmp_path: Path) -> None:
    assert current_session() is None
    with Session(tmp_path, id="outer") as outer:
        assert current_session() is outer
        with Session(tmp_path, id="inner") as inner:
            assert current_session() is inner
            inner.user("in")
        assert current_session() is outer
        outer.user("out")
    assert current_session() is None
    assert [m["content"] for m in read(outer.path).messages] == ["out"]
    assert [m["content"] for m in read(inner.path).messages] == ["in"]


def test_open_close_without_with(tmp_path: Path) -> None:
    s = Session(tmp_path).open()
    assert current_session() is s
    s.user("x")
    s.close()
    s.close()  # idempotent
    assert s.closed
    assert current_session() is None
    assert read(s.path).messages[0]["content"] == "x"


def test_closing_in_open_order_leaves_no_closed_session_current(tmp_path: Path) -> None:
    """Sessions opened with open() and closed first-in-first-out: a closed session
    must never be left as the current one (decorated calls would record nowhere)."""
    sessions = [Session(tmp_path).open() for _ in range(3)]
    assert current_session() is sessions[-1]
    for s in sessions:
        s.close()
        current = current_session()
        assert current is None or not current.closed
    assert current_session() is None


def test_recording_into_a_closed_session_does_not_raise(tmp_path: Path) -> None:
    """Tracing never breaks the user's code: a late record is not written, not raised."""
    with Session(tmp_path) as s:
        s.user("kept")
    s.user("late")
    s.assistant("late")
    assert [m["content"] for m in read(s.path).messages] == ["kept"]
    with pytest.raises(RuntimeError):
        s.open()


def test_exception_inside_with_propagates_unchanged(tmp_path: Path) -> None:
    """The very same exception object leaves the block; the file is closed and valid."""

    class Boom(Exception):
        pass

    boom = Boom("user error")
    with pytest.raises(Boom) as info:
        with Session(tmp_path, flush_interval=60) as s:
            s.user("before")
            raise boom
    assert info.value is boom
    assert info.value.__context__ is None
    assert s.closed
    assert current_session() is None
    assert errors_of(s.path) == []
    assert [m["content"] for m in read(s.path).messages] == ["before"]


async def test_exception_inside_async_with_propagates_unchanged(tmp_path: Path) -> None:
    boom = KeyError("k")
    with pytest.raises(KeyError) as info:
        async with Session(tmp_path, flush_interval=60) as s:
            s.user("before")
            raise boom
    assert info.value is boom
    assert s.closed
    assert [m["content"] for m in read(s.path).messages] == ["before"]


async def test_async_with_aflush_aclose(tmp_path: Path) -> None:
    async with Session(tmp_path, flush_interval=60) as s:
        assert current_session() is s
        s.user("a")
        await s.aflush()
        assert read(s.path).messages[0]["content"] == "a"
    assert current_session() is None
    s2 = Session(tmp_path).open()
    s2.user("b")
    await s2.aclose()
    assert s2.closed
    assert read(s2.path).messages[0]["content"] == "b"


async def test_500_tasks_each_with_their_own_session(tmp_path: Path) -> None:
    """Concurrent tasks each see their own current session and write their own file."""

    async def episode(i: int) -> Session:
        async with Session(tmp_path, id=f"task-{i}") as s:
            for turn in range(3):
                assert current_session() is s
                s.user(f"{i}:{turn}")
                await asyncio.sleep(0)
                assert current_session() is s
                s.assistant(f"reply {i}:{turn}", model="m")
        return s

    sessions = await asyncio.gather(*(episode(i) for i in range(500)))
    assert current_session() is None
    for i, s in enumerate(sessions):
        trace = read(s.path)
        assert trace.header["id"] == f"task-{i}"
        assert [m["content"] for m in trace.messages] == [
            x for t in range(3) for x in (f"{i}:{t}", f"reply {i}:{t}")
        ]
    assert len(list(tmp_path.iterdir())) == 500


async def test_500_tasks_sharing_one_session(tmp_path: Path) -> None:
    """Tasks started inside a session inherit it; all their records land in its file."""
    async with Session(tmp_path, buffer_size=512) as shared:

        async def worker(i: int) -> None:
            for turn in range(4):
                assert current_session() is shared
                shared.user(f"{i}:{turn}")
                await asyncio.sleep(0)

        await asyncio.gather(*(worker(i) for i in range(500)))
    contents = [m["content"] for m in read(shared.path).messages]
    assert len(contents) == 2000
    assert sorted(contents) == sorted(f"{i}:{t}" for i in range(500) for t in range(4))
    for i in range(0, 500, 37):
        mine = [c for c in contents if c.split(":")[0] == str(i)]
        assert mine == [f"{i}:{t}" for t in range(4)]


def test_8_threads_x_5000_messages(tmp_path: Path) -> None:
    """All 40,000 messages present, each line whole, each thread's order kept."""
    n_threads, per_thread = 8, 5000
    with Session(tmp_path, buffer_size=4096, flush_interval=0.01) as s:
        start = threading.Barrier(n_threads)

        def work(t: int) -> None:
            start.wait()
            for i in range(per_thread):
                s.user(f"t{t}-{i}-" + "x" * (i % 50))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    raw_lines = s.path.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""
    assert len(raw_lines) == 1 + n_threads * per_thread + 1
    seen: dict[int, list[int]] = {t: [] for t in range(n_threads)}
    for m in read(s.path).messages:
        t, i, pad = m["content"].split("-")
        assert pad == "x" * (int(i) % 50)
        seen[int(t[1:])].append(int(i))
    assert all(seen[t] == list(range(per_thread)) for t in seen)
    stats = s.stats()
    assert stats["messages"] == n_threads * per_thread
    assert stats["bytes"] == s.path.stat().st_size
    assert stats["lost"] == 0 and stats["write_errors"] == 0
    assert errors_of(s.path) == []


# -- recording API ------------------------------------------------------------


def test_message_shapes(tmp_path: Path) -> None:
    """Content that is not a string is JSON text, None is "", optional fields omitted."""
    with Session(tmp_path) as s:
        s.system("be brief")
        s.user({"q": [1, 2]})
        s.user(None)
        ids = s.assistant("thinking done", reasoning="because", model="gpt-x")
        s.assistant()
    assert ids == []
    msgs = read(s.path).messages
    for m in msgs:
        assert isinstance(m.pop("timestamp"), int)
    assert msgs == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": '{"q":[1,2]}'},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "thinking done", "reasoningContent": "because", "model": "gpt-x"},
        {"role": "assistant", "content": ""},
    ]


def test_timestamps_are_epoch_milliseconds(tmp_path: Path) -> None:
    before = time.time_ns() // 1_000_000
    with Session(tmp_path) as s:
        s.user("x")
    after = time.time_ns() // 1_000_000
    ts = read(s.path).messages[0]["timestamp"]
    assert type(ts) is int and before <= ts <= after


def test_content_is_serialized_when_recorded(tmp_path: Path) -> None:
    """A later mutation of the user's object cannot change the trace."""
    data = {"n": 1, "items": ["a"]}
    with Session(tmp_path, flush_interval=60) as s:
        s.user(data)
        data["n"] = 2
        data["items"].append("b")
    assert orjson.loads(read(s.path).messages[0]["content"]) == {"n": 1, "items": ["a"]}


def test_tool_call_shapes(tmp_path: Path) -> None:
    """STS, OpenAI (dict and the real pydantic class) and simple shapes are accepted."""
    openai_obj = ChatCompletionMessageFunctionToolCall(
        id="call_obj", type="function", function={"name": "lookup", "arguments": '{"q": "x"}'}
    )
    with Session(tmp_path) as s:
        ids = s.assistant(
            "",
            tool_calls=[
                {"id": "sts1", "function": {"name": "add", "arguments": '{"a": 1}'}},
                {"id": "oai1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}},
                {"name": "mul", "arguments": {"x": 3, "y": [1]}},
                {"name": "noargs", "arguments": "{}", "id": "given"},
                openai_obj,
            ],
        )
        for cid in ids:
            s.tool(cid, {"ok": cid})
    assert ids[:2] == ["sts1", "oai1"] and ids[3:] == ["given", "call_obj"]
    assert ids[2] and len(set(ids)) == 5
    msgs = read(s.path).messages
    calls = msgs[0]["toolCalls"]
    assert calls[1] == {"id": "oai1", "function": {"name": "add", "arguments": '{"a": 2}'}}
    assert calls[2]["function"] == {"name": "mul", "arguments": '{"x":3,"y":[1]}'}
    assert calls[4] == {"id": "call_obj", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
    assert [m["toolCallId"] for m in msgs[1:]] == ids
    assert validate(s.path) == []
    assert s.stats()["pending_tool_calls"] == 0


def test_bad_tool_calls_raise_and_write_nothing(tmp_path: Path) -> None:
    with Session(tmp_path) as s:
        with pytest.raises(ValueError):
            s.assistant("", tool_calls=[{"arguments": "{}"}])
        with pytest.raises(ValueError):
            s.assistant("", tool_calls=["not a call"])
        with pytest.raises(ValueError):
            s.tool("", "result")
        with pytest.raises(ValueError):
            s.tool(None, "result")  # type: ignore[arg-type]
    assert read(s.path).messages == []
    assert s.stats()["messages"] == 0


@pytest.mark.parametrize(
    "message",
    [
        {"role": "robot", "content": "x"},
        {"content": "x"},
        {"role": "user"},
        {"role": "user", "content": None},
        {"role": "user", "content": "x", "toolCalls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "x"},
        {"role": "tool", "content": "x", "toolCallId": 5},
        {"role": "user", "content": "x", "timestamp": 1.5},
        {"role": "user", "content": "x", "timestamp": True},
        {"role": "user", "content": "x", "timestamp": "2026-01-01"},
        {"role": "assistant", "content": "", "model": 5},
        {"role": "assistant", "content": "", "toolCalls": [{"function": {"arguments": "{}"}}]},
        ["role", "user"],
    ],
)
def test_record_rejects_malformed_messages(tmp_path: Path, message: Any) -> None:
    """s.record checks the message; a ValueError writes nothing."""
    with Session(tmp_path) as s:
        with pytest.raises(ValueError):
            s.record(message)
    assert s.path.read_bytes().count(b"\n") == 1
    assert s.stats()["messages"] == 0


def test_record_accepts_and_cleans_sts_messages(tmp_path: Path) -> None:
    with Session(tmp_path) as s:
        s.record({"role": "user", "content": "q", "timestamp": 1700000000000})
        s.record(
            {
                "role": "assistant",
                "content": "",
                "reasoningContent": None,
                "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
                "model": "m",
            }
        )
        s.record({"role": "tool", "toolCallId": "c1", "content": [1, 2]})
        s.record({"role": "assistant", "content": "", "toolCalls": []})
    msgs = read(s.path).messages
    assert msgs[0] == {"role": "user", "content": "q", "timestamp": 1700000000000}
    assert "reasoningContent" not in msgs[1]
    assert msgs[1]["toolCalls"] == [{"id": "c1", "function": {"name": "f", "arguments": '{"a":1}'}}]
    assert msgs[2]["content"] == "[1,2]" and isinstance(msgs[2]["timestamp"], int)
    assert "toolCalls" not in msgs[3]
    assert [p for p in validate(s.path) if p.severity == "error"] == []


def test_recording_before_enter_opens_the_file(tmp_path: Path) -> None:
    """Recording on a Session that was never entered opens it on first use."""
    s = Session(tmp_path)
    s.user("early")
    s.close()
    assert [m["content"] for m in read(s.path).messages] == ["early"]


def test_stats_counters(tmp_path: Path) -> None:
    with Session(tmp_path, flush_interval=60) as s:
        assert s.stats()["messages"] == 0
        for i in range(10):
            s.user(str(i))
        st = s.stats()
        assert st["messages"] == 10
        header_bytes = len(s.path.read_bytes())
        assert st["bytes"] == header_bytes and st["flushes"] == 0
        s.flush()
        st = s.stats()
        assert st["bytes"] == s.path.stat().st_size > header_bytes
        assert st["flushes"] == 1
        s.flush()  # nothing new: not counted as a write
        assert s.stats()["flushes"] == 1
    st = s.stats()
    assert {k: st[k] for k in ("messages", "write_errors", "lost")} == {"messages": 10, "write_errors": 0, "lost": 0}
    assert st["bytes"] == s.path.stat().st_size


def test_flush_interval_writes_in_the_background(tmp_path: Path) -> None:
    """Records reach the file within about flush_interval without any flush call."""
    with Session(tmp_path, flush_interval=0.05) as s:
        s.user("timed")
        deadline = time.monotonic() + 60
        # The counter is bumped just after the write: poll for both.
        while b"timed" not in s.path.read_bytes() or s.stats()["flushes"] < 1:
            assert time.monotonic() < deadline, "the flusher never wrote the record"
            time.sleep(0.01)


def test_buffer_size_triggers_a_background_write(tmp_path: Path) -> None:
    with Session(tmp_path, flush_interval=3600, buffer_size=1000) as s:
        for i in range(20):
            s.user("y" * 100)
        deadline = time.monotonic() + 60
        while s.path.read_bytes().count(b"\n") < 10:
            assert time.monotonic() < deadline, "a full buffer was not written"
            time.sleep(0.01)
        # Only whole lines are ever written.
        assert s.path.read_bytes().endswith(b"\n")


def test_durable_writes_each_record_without_waiting(tmp_path: Path) -> None:
    with Session(tmp_path, durable=True, flush_interval=3600) as s:
        s.user("d")
        deadline = time.monotonic() + 60
        while b'"d"' not in s.path.read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.005)


# -- resume -------------------------------------------------------------------


def _make_trace(path: Path, sid: str = "r1") -> bytes:
    with Session(path, id=sid, name="first part") as s:
        s.user("one")
        s.assistant("", tool_calls=[{"id": "open-call", "name": "f", "arguments": {}}])
    return s.path.read_bytes()


def test_resume_appends_with_the_given_id(tmp_path: Path) -> None:
    before = _make_trace(tmp_path / "r1.jsonl")
    with Session(tmp_path / "r1.jsonl", id="r1", resume=True) as s:
        assert s.name == "first part"
        assert s.stats()["pending_tool_calls"] == 1  # rebuilt from the file
        s.tool("open-call", "done")
        s.user("two")
    data = s.path.read_bytes()
    assert data.startswith(before)
    trace = read(s.path)
    assert data.count(b'"type":"session"') == 1
    assert [m["content"] for m in trace.messages] == ["one", "", "done", "two"]
    assert validate(s.path) == []


def test_resume_adopts_the_file_id_when_none_given(tmp_path: Path) -> None:
    _make_trace(tmp_path / "x.jsonl", sid="from-file")
    with Session(tmp_path / "x.jsonl", resume=True) as s:
        assert s.id == "from-file"
        s.user("more")
    assert read(s.path).header["id"] == "from-file"


def test_resume_by_directory_and_id(tmp_path: Path) -> None:
    _make_trace(tmp_path, sid="dir-id")
    with Session(tmp_path, id="dir-id", resume=True) as s:
        s.user("again")
    assert s.path == tmp_path / "dir-id.jsonl"
    assert read(s.path).messages[-1]["content"] == "again"


def test_resume_with_a_different_id_refuses_and_writes_nothing(tmp_path: Path) -> None:
    before = _make_trace(tmp_path / "r1.jsonl")
    with pytest.raises(ValueError, match="'r1'.*'other'|other"):
        Session(tmp_path / "r1.jsonl", id="other", resume=True).open()
    assert (tmp_path / "r1.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    "content",
    [b"", b"plain text\n", b'{"type":"message","message":{"role":"user","content":"x"}}\n', b'{"type":"session"}\n', b"[1]\n"],
)
def test_resume_refuses_a_file_without_a_valid_header(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="header"):
        Session(path, resume=True).open()
    assert path.read_bytes() == content


def test_resume_cuts_a_torn_last_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    full = _make_trace(tmp_path / "r1.jsonl")
    torn = full + b'{"type":"message","message":{"role":"user","con'
    (tmp_path / "r1.jsonl").write_bytes(torn)
    with caplog.at_level(logging.WARNING, logger="ststrace"):
        with Session(tmp_path / "r1.jsonl", resume=True) as s:
            s.user("after crash")
    assert "torn" in caplog.text
    data = s.path.read_bytes()
    assert data.startswith(full) and b'"con' + b"\n" not in data
    assert [m["content"] for m in read(s.path).messages] == ["one", "", "after crash"]
    assert [p for p in validate(s.path) if p.severity == "error"] == []


def test_resume_of_a_missing_file_creates_it(tmp_path: Path) -> None:
    with Session(tmp_path / "new.jsonl", id="n", resume=True) as s:
        s.user("fresh")
    assert read(s.path).header["id"] == "n"
    assert stat.S_IMODE(os.stat(s.path).st_mode) == 0o600


# -- STSTRACE_DISABLED -----------------------------------------------------------


def test_disabled_creates_no_file_and_no_thread(tmp_path: Path) -> None:
    """STSTRACE_DISABLED=1: Session is a no-op (checked in a fresh interpreter)."""
    script = textwrap.dedent(
        """
        import sys, threading
        from pathlib import Path
        import ststrace
        d = Path(sys.argv[1])
        with ststrace.Session(d / "sub", id="x") as s:
            s.user("hi")
            ids = s.assistant("", tool_calls=[{"name": "f", "arguments": {}}])
            s.tool(ids[0], "r")
            s.record({"role": "user", "content": "y"})
            s.flush()
            st = s.stats()
        assert st["messages"] == 0, st
        assert not (d / "sub").exists()
        assert [t.name for t in threading.enumerate()] == ["MainThread"], threading.enumerate()
        print("ok")
        """
    )
    env = dict(os.environ, STSTRACE_DISABLED="1")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert list(tmp_path.iterdir()) == []


def test_disabled_still_validates_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STSTRACE_DISABLED", "1")
    with pytest.raises(ValueError):
        Session(tmp_path, id="../x")
    with Session(tmp_path) as s:
        s.user("x")
    assert list(tmp_path.iterdir()) == []



# -- recording after close() is counted and said, once ----------------------------


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


# -- resume refuses anything but a regular file, without blocking ------------------


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
