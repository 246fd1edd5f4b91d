"""Opening sessions from an event loop: files are created off the loop thread,
in batches, with the header on disk before the first message; errors and
cancellation still reach the task that entered the block."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from ststrace import Session, _files, _registry, current_session


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


async def test_many_sessions_opened_in_one_iteration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 tasks enter their sessions in the same loop iteration: every file is
    created on a worker thread, each task sees its own session, and each file
    starts with its header, then the task's message."""
    loop_thread = threading.get_ident()
    opened_on: list[int] = []
    real_open = Session._open_file

    def spy(self: Session) -> None:
        opened_on.append(threading.get_ident())
        real_open(self)

    monkeypatch.setattr(Session, "_open_file", spy)

    async def episode(i: int) -> None:
        async with Session(tmp_path, id=f"s{i}") as s:
            assert current_session() is s
            s.user(f"hello {i}")
            await asyncio.sleep(0)

    await asyncio.gather(*(episode(i) for i in range(300)))
    assert len(opened_on) == 300 and loop_thread not in opened_on
    assert len(set(opened_on)) <= _files.THREADS
    for i in range(300):
        lines = _lines(tmp_path / f"s{i}.jsonl")
        assert lines[0]["type"] == "session" and lines[0]["id"] == f"s{i}"
        assert [m["message"]["content"] for m in lines[1:]] == [f"hello {i}"]


async def test_durable_header_is_on_disk_when_the_block_starts(tmp_path: Path) -> None:
    """With ``durable=True`` the header is written (and fsynced) before ``async with`` returns."""
    async with Session(tmp_path / "d.jsonl", durable=True, id="d") as s:
        assert _lines(s.path) == [{"type": "session", "harness": "ststrace", "id": "d"}]
        s.user("first")
    assert [line.get("message", {}).get("content") for line in _lines(tmp_path / "d.jsonl")] == [None, "first"]


async def test_existing_file_error_reaches_the_task(tmp_path: Path) -> None:
    """A file that exists already raises FileExistsError from ``async with`` and is left as it was."""
    path = tmp_path / "taken.jsonl"
    path.write_text("mine\n")
    with pytest.raises(FileExistsError, match="already exists"):
        async with Session(path):
            pytest.fail("the block must not run")  # pragma: no cover
    assert path.read_text() == "mine\n"
    assert current_session() is None


async def test_task_cancelled_while_its_file_is_created_leaves_nothing_open(tmp_path: Path) -> None:
    """A task cancelled before its file is ready: the session is closed in the background, not leaked."""
    entered: list[Session] = []
    session = Session(tmp_path / "c.jsonl")

    async def enter() -> None:
        async with session as s:
            entered.append(s)  # pragma: no cover - cancelled before

    task = asyncio.create_task(enter())
    await asyncio.sleep(0)  # the task queued its file job and waits for it
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Marked closed first, then taken out of the registry: wait for both.
    deadline = time.monotonic() + 60
    while (not session.closed or session in _registry.open_sessions()) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert entered == [] and session.closed
    assert session not in _registry.open_sessions()
    assert _lines(session.path)[0]["type"] == "session"  # created whole, then closed


async def test_sync_with_inside_a_running_loop_opens_on_the_spot(tmp_path: Path) -> None:
    """Plain ``with`` in a coroutine still works: it creates the file on the calling thread."""
    with Session(tmp_path / "sync.jsonl") as s:
        assert s.path.exists()
        s.user("x")
    assert len(_lines(tmp_path / "sync.jsonl")) == 2


async def test_aclose_and_reentering_an_open_session(tmp_path: Path) -> None:
    """``aclose`` closes through the workers; entering a session that is open already does not reopen it."""
    s = Session(tmp_path / "a.jsonl")
    s.user("before the block")  # opens the file on first use
    async with s:
        s.user("inside")
    assert s.closed
    s2 = Session(tmp_path / "b.jsonl")
    await s2.__aenter__()
    s2.user("x")
    await s2.aclose()
    assert s2.closed and len(_lines(tmp_path / "b.jsonl")) == 2
    assert [m["message"]["content"] for m in _lines(tmp_path / "a.jsonl")[1:]] == ["before the block", "inside"]


async def test_disabled_sessions_need_no_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``STSTRACE_DISABLED=1``: ``async with`` creates nothing and records nothing."""
    monkeypatch.setenv("STSTRACE_DISABLED", "1")
    async with Session(tmp_path / "off.jsonl") as s:
        s.user("x")
    assert not (tmp_path / "off.jsonl").exists()


def test_workers_after_fork_start_empty(tmp_path: Path) -> None:
    """A child forked while the workers exist gets fresh ones and can open sessions."""
    if not hasattr(os, "fork"):  # pragma: no cover
        pytest.skip("no fork")

    async def open_one(name: str) -> None:
        async with Session(tmp_path / name) as s:
            s.user(name)

    asyncio.run(open_one("parent.jsonl"))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        signal.alarm(20)  # a hang here would be the bug; die rather than block the suite
        try:
            asyncio.run(open_one("child.jsonl"))
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _lines(tmp_path / "child.jsonl")[1]["message"]["content"] == "child.jsonl"


def test_environment_is_read_as_it_is_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast environment reads see variables set, changed and deleted after import."""
    from ststrace._env import getenv

    monkeypatch.setenv("STSTRACE_HARNESS", "h1")
    assert Session(tmp_path / "a.jsonl").harness == "h1" and getenv("STSTRACE_HARNESS") == "h1"
    monkeypatch.setenv("STSTRACE_HARNESS", "h\u00e9")
    assert Session(tmp_path / "b.jsonl").harness == "h\u00e9"
    monkeypatch.delenv("STSTRACE_HARNESS")
    assert Session(tmp_path / "c.jsonl").harness == "ststrace" and getenv("STSTRACE_HARNESS") is None
    monkeypatch.setenv("STSTRACE_DIR", str(tmp_path / "here"))
    assert Session(id="x").path == tmp_path / "here" / "x.jsonl"
    monkeypatch.setenv("STSTRACE_REDACT", "off")
    s = Session(tmp_path / "d.jsonl")
    assert s._guard is not None and s._guard.redactor is None
    assert getenv("SOME_OTHER_VARIABLE_NOT_LISTED") == os.environ.get("SOME_OTHER_VARIABLE_NOT_LISTED")
