"""Which threads and tasks see the current session."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import sys
import threading
from pathlib import Path

import pytest

import ststrace
from ststrace import Session, current_session, tool
from test_decorators_helpers import assert_paired, tool_results, trace_dir_files, valid_messages


@tool
def double(x: int) -> int:
    return 2 * x


@tool
async def adouble(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


def contents(path: Path) -> list[str]:
    msgs = valid_messages(path)
    assert_paired(msgs)
    return sorted(m["content"] for m in tool_results(msgs))


async def test_gather_sees_the_session(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    async with Session(path):
        assert list(await asyncio.gather(adouble(1), adouble(2), adouble(3))) == [2, 4, 6]
    assert contents(path) == ["2", "4", "6"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="TaskGroup is 3.11+")
async def test_task_group_sees_the_session(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    async with Session(path):
        async with asyncio.TaskGroup() as tg:  # type: ignore[attr-defined]
            tasks = [tg.create_task(adouble(i)) for i in range(3)]
    assert [t.result() for t in tasks] == [0, 2, 4]
    assert contents(path) == ["0", "2", "4"]


async def test_to_thread_sees_the_session(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    async with Session(path):
        assert await asyncio.to_thread(double, 5) == 10
    assert contents(path) == ["10"]


def test_ststrace_executor_carries_the_session(tmp_path: Path) -> None:
    """submit() and map() both run the work inside the submitter's context."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        with ststrace.ThreadPoolExecutor(max_workers=3) as pool:
            assert pool.submit(double, 1).result() == 2
            assert list(pool.map(double, [2, 3])) == [4, 6]
            assert pool.submit(current_session).result() is s
    assert contents(path) == ["2", "4", "6"]


async def test_run_in_executor_with_the_ststrace_executor(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    loop = asyncio.get_running_loop()
    with ststrace.ThreadPoolExecutor(max_workers=1) as pool:
        async with Session(path):
            assert await loop.run_in_executor(pool, double, 7) == 14
    assert contents(path) == ["14"]


def test_executor_is_a_concurrent_futures_executor() -> None:
    assert issubclass(ststrace.ThreadPoolExecutor, concurrent.futures.ThreadPoolExecutor)


def test_executor_workers_do_not_keep_a_later_session(tmp_path: Path) -> None:
    """Each submission carries the session current at submit time, not the worker's last one."""
    with ststrace.ThreadPoolExecutor(max_workers=1) as pool:
        with Session(tmp_path / "a.jsonl") as a:
            assert pool.submit(current_session).result() is a
        assert pool.submit(current_session).result() is None
        with Session(tmp_path / "b.jsonl") as b:
            assert pool.submit(current_session).result() is b


def test_plain_thread_records_nothing(tmp_path: Path) -> None:
    """A threading.Thread starts with an empty context: the tool runs, nothing is recorded."""
    path = tmp_path / "t.jsonl"
    out: list[int] = []
    seen: list[object] = []

    def work() -> None:
        seen.append(current_session())
        out.append(double(4))

    with Session(path) as s:
        s.user("start")
        t = threading.Thread(target=work)
        t.start()
        t.join()
    assert out == [8] and seen == [None]
    assert [m["role"] for m in valid_messages(path)] == ["user"]


def test_plain_executor_records_nothing(tmp_path: Path) -> None:
    """The standard library executor does not carry the context (use ststrace's)."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.user("start")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            assert pool.submit(double, 2).result() == 4
    assert [m["role"] for m in valid_messages(path)] == ["user"]


def test_nested_sessions_restore_the_outer_one(tmp_path: Path) -> None:
    outer, inner = tmp_path / "o.jsonl", tmp_path / "i.jsonl"
    with Session(outer) as o:
        double(1)
        with Session(inner) as i:
            assert current_session() is i
            double(2)
        assert current_session() is o
        double(3)
    assert current_session() is None
    assert contents(outer) == ["2", "6"]
    assert contents(inner) == ["4"]


async def test_sibling_tasks_keep_their_own_sessions(tmp_path: Path) -> None:
    """Sessions opened inside concurrent tasks stay in those tasks."""

    async def agent(i: int) -> None:
        async with Session(tmp_path / f"{i}.jsonl"):
            for _ in range(3):
                await adouble(i)
                await asyncio.sleep(0)

    await asyncio.gather(*(agent(i) for i in range(4)))
    for i in range(4):
        assert contents(tmp_path / f"{i}.jsonl") == [str(2 * i)] * 3


def test_no_session_no_file() -> None:
    """Outside any session the decorators write nothing anywhere."""
    assert double(1) == 2
    assert current_session() is None
    assert trace_dir_files() == []


# --------------------------------------------------------------------------- instrument(): executor threads

_USER_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("user_var", default="unset")


def test_instrumented_stdlib_executor_carries_the_session_and_nothing_else(tmp_path: Path) -> None:
    """After ``instrument()`` (with any names), work submitted to the standard library's pool while
    a session is open runs in it; the user's own context variables do not travel
    (as without ststrace), and the worker is back to no session afterwards."""
    from test_instrument_helpers import instrumented

    path = tmp_path / "t.jsonl"
    original = concurrent.futures.ThreadPoolExecutor.submit
    with instrumented("openai"):
        assert concurrent.futures.ThreadPoolExecutor.submit is not original
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            assert pool.submit(current_session).result() is None  # no session: nothing carried
            token = _USER_VAR.set("submitter")
            try:
                with Session(path) as s:
                    assert pool.submit(double, 2).result() == 4
                    assert pool.submit(current_session).result() is s
                    assert pool.submit(_USER_VAR.get).result() == "unset"
                    assert list(pool.map(double, [3])) == [6]  # map() submits too
            finally:
                _USER_VAR.reset(token)
            assert pool.submit(current_session).result() is None
    assert concurrent.futures.ThreadPoolExecutor.submit is original
    assert contents(path) == ["4", "6"]


async def test_instrumented_run_in_executor_carries_the_session(tmp_path: Path) -> None:
    """``loop.run_in_executor(None, ...)`` (the loop's default pool), as frameworks use it."""
    from test_instrument_helpers import instrumented

    path = tmp_path / "t.jsonl"
    loop = asyncio.get_running_loop()
    with instrumented("openai"):
        async with Session(path) as s:
            assert await loop.run_in_executor(None, double, 7) == 14
            assert await loop.run_in_executor(None, current_session) is s
        assert await loop.run_in_executor(None, current_session) is None
    assert contents(path) == ["14"]


def test_instrumented_executor_passes_user_exceptions_through(tmp_path: Path) -> None:
    from test_instrument_helpers import instrumented

    def boom() -> None:
        raise KeyError("mine")

    with instrumented("openai"), Session(tmp_path / "t.jsonl"):
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            with pytest.raises(KeyError, match="mine"):
                pool.submit(boom).result()


def test_uninstrumenting_the_last_library_by_name_restores_the_executor() -> None:
    """``uninstrument("openai")`` after ``instrument("openai")`` leaves nothing
    patched, the thread pool included (it stayed patched, so a later plain
    executor carried sessions the user never asked it to)."""
    import ststrace

    original = concurrent.futures.ThreadPoolExecutor.submit
    ststrace.instrument("openai")
    try:
        ststrace.instrument("anthropic")
        ststrace.uninstrument("openai")
        assert concurrent.futures.ThreadPoolExecutor.submit is not original  # anthropic still wants it
        ststrace.uninstrument("anthropic")
        assert concurrent.futures.ThreadPoolExecutor.submit is original
    finally:
        ststrace.uninstrument()
