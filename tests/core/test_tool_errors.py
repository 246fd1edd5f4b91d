"""Exceptions, cancellation and ststrace's own failures around ``@tool`` calls."""

from __future__ import annotations

import asyncio
import logging
import traceback
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest

from ststrace import Session, _records, tool
from ststrace._session import Session as _SessionClass
from test_decorators_helpers import assert_paired, tool_results, valid_messages


class Boom(Exception):
    pass


def raise_boom(msg: str) -> None:
    raise Boom(msg)


@tool
def failing(msg: str) -> None:
    raise_boom(msg)


@tool
async def afailing(msg: str) -> None:
    await asyncio.sleep(0)
    raise_boom(msg)


@tool
def gfailing(msg: str) -> Iterator[str]:
    yield "partial"
    raise_boom(msg)


@tool
async def agfailing(msg: str) -> AsyncIterator[str]:
    yield "partial"
    raise_boom(msg)


async def drive(kind: str, msg: str) -> None:
    if kind == "sync":
        failing(msg)
    elif kind == "async":
        await afailing(msg)
    elif kind == "gen":
        list(gfailing(msg))
    else:
        [v async for v in agfailing(msg)]


@pytest.mark.parametrize("kind", ["sync", "async", "gen", "agen"])
async def test_exception_propagates_unchanged_and_is_recorded(kind: str, tmp_path: Path) -> None:
    """The very same exception object reaches the caller, its user frames intact, and
    the result reads ``Error: <Type>: <message>``."""
    path = tmp_path / "t.jsonl"
    with Session(path):
        with pytest.raises(Boom) as info:
            await drive(kind, "disk on fire")
    exc = info.value
    assert exc.args == ("disk on fire",)
    frames = [f.name for f in traceback.extract_tb(exc.__traceback__)]
    assert frames[-1] == "raise_boom"
    assert frames[-2] in ("failing", "afailing", "gfailing", "agfailing")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert tool_results(msgs)[0]["content"] == "Error: Boom: disk on fire"


def test_same_exception_object(tmp_path: Path) -> None:
    """``raise`` hands back the identical object, not a copy or a wrapper."""
    err = Boom("x")

    @tool
    def f() -> None:
        raise err

    with Session(tmp_path / "t.jsonl"):
        with pytest.raises(Boom) as info:
            f()
    assert info.value is err
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_exception_without_message(tmp_path: Path) -> None:
    """An exception with an empty message records just its type."""

    @tool
    def f() -> None:
        raise KeyError()

    path = tmp_path / "t.jsonl"
    with Session(path):
        with pytest.raises(KeyError):
            f()
    assert tool_results(valid_messages(path))[0]["content"] == "Error: KeyError"


def test_exception_whose_str_fails(tmp_path: Path) -> None:
    """An exception that cannot be printed still records a result and still propagates."""

    class Ugly(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    @tool
    def f() -> None:
        raise Ugly()

    path = tmp_path / "t.jsonl"
    with Session(path):
        with pytest.raises(Ugly):
            f()
    assert tool_results(valid_messages(path))[0]["content"].startswith("Error: Ugly")


async def test_cancellation_is_reraised_and_recorded(tmp_path: Path) -> None:
    """A cancelled async tool re-raises CancelledError; its result says it was cancelled."""
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    path = tmp_path / "t.jsonl"
    async with Session(path):
        task = asyncio.ensure_future(slow())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    results = tool_results(valid_messages(path))
    assert len(results) == 1
    assert "cancelled" in results[0]["content"]
    assert "CancelledError" in results[0]["content"]


async def test_timeout_cancels_and_records_once(tmp_path: Path) -> None:
    """asyncio.wait_for cancelling a tool records exactly one cancelled result."""

    @tool
    async def slow() -> str:
        await asyncio.sleep(10)
        return "never"

    path = tmp_path / "t.jsonl"
    async with Session(path):
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow(), 0.01)
    results = tool_results(valid_messages(path))
    assert [("cancelled" in r["content"]) for r in results] == [True]


def test_keyboard_interrupt(tmp_path: Path) -> None:
    """KeyboardInterrupt passes through untouched; the result says the call was cancelled."""

    @tool
    def interrupted() -> None:
        raise KeyboardInterrupt

    path = tmp_path / "t.jsonl"
    with pytest.raises(KeyboardInterrupt):
        with Session(path):
            interrupted()
    results = tool_results(valid_messages(path))
    assert results[0]["content"] == "Error: the call was cancelled (KeyboardInterrupt)"


async def test_wrong_arguments_raise_like_the_original(tmp_path: Path) -> None:
    """Calling with bad arguments raises the TypeError at the call, for every kind; async and
    generator kinds record nothing (their body never ran) and leave no dangling call."""

    @tool
    async def a(x: int) -> int:
        return x

    @tool
    def g(x: int) -> Iterator[int]:
        yield x

    @tool
    async def ag(x: int) -> AsyncIterator[int]:
        yield x

    path = tmp_path / "t.jsonl"
    with Session(path):
        fns: list[Any] = [a, g, ag]
        for fn in fns:
            with pytest.raises(TypeError):
                fn(1, 2)
    assert not path.exists() or valid_messages(path) == []


# -- ststrace's own failures never reach the caller -----------------------------


@pytest.mark.allow_internal_errors
@pytest.mark.parametrize("kind", ["sync", "async", "gen", "agen"])
async def test_failing_emit_never_reaches_the_caller(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, _fail_on_internal_errors: list[BaseException]
) -> None:
    """With Session._write (where every record is encoded) raising, every kind still returns its value and the error is logged."""

    def broken_emit(self: Any, msg: Any) -> None:
        raise RuntimeError("emit is broken")

    @tool
    def s(x: int) -> int:
        return x

    @tool
    async def a(x: int) -> int:
        return x

    @tool
    def g(x: int) -> Iterator[int]:
        yield x

    @tool
    async def ag(x: int) -> AsyncIterator[int]:
        yield x

    with Session(tmp_path / "t.jsonl"):
        monkeypatch.setattr(_SessionClass, "_write", broken_emit)
        with caplog.at_level(logging.ERROR, logger="ststrace"):
            if kind == "sync":
                assert s(5) == 5
            elif kind == "async":
                assert await a(5) == 5
            elif kind == "gen":
                assert list(g(5)) == [5]
            else:
                assert [v async for v in ag(5)] == [5]
        monkeypatch.undo()
    assert _fail_on_internal_errors, "the internal error was not reported"
    assert all(isinstance(e, RuntimeError) for e in _fail_on_internal_errors)
    assert any("internal error" in r.getMessage() and r.exc_info for r in caplog.records if r.name == "ststrace")


@pytest.mark.allow_internal_errors
def test_failing_emit_on_the_result_keeps_user_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _fail_on_internal_errors: list[BaseException]
) -> None:
    """When recording the error result fails, the user still gets their own exception."""
    calls = {"n": 0}
    real_emit = _SessionClass._write

    def emit_then_break(self: Any, msg: Any) -> None:
        calls["n"] += 1
        if msg["role"] == "tool":
            raise RuntimeError("emit is broken")
        real_emit(self, msg)

    def refused(*args: Any) -> bytes:
        raise ValueError("not encodable in one step")

    path = tmp_path / "t.jsonl"
    with Session(path):
        monkeypatch.setattr(_SessionClass, "_write", emit_then_break)
        # The one-step line of the result refused: it takes the dict path, _write.
        monkeypatch.setattr(_records, "tool_result_line", refused)
        with pytest.raises(Boom, match="mine"):
            failing("mine")
        monkeypatch.undo()
    assert calls["n"] == 2
    assert len(_fail_on_internal_errors) == 1


@pytest.mark.allow_internal_errors
def test_failing_pairing_still_runs_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _fail_on_internal_errors: list[BaseException]
) -> None:
    """A crash while choosing the call to answer skips recording, not the tool."""

    def broken(self: Any, name: str, arguments: str, call_id: Any = None) -> str:
        raise RuntimeError("no ids today")

    ran = []

    @tool
    def f(x: int) -> int:
        ran.append(x)
        return x

    with Session(tmp_path / "t.jsonl"):
        monkeypatch.setattr(_SessionClass, "_tool_call_then_result", broken)
        assert f(3) == 3
    assert ran == [3]
    assert len(_fail_on_internal_errors) == 1


@pytest.mark.allow_internal_errors
def test_unencodable_arguments_never_break_the_call(tmp_path: Path) -> None:
    """Arguments the encoder chokes on (a recursive structure) are still recorded as valid JSON."""
    loop: list[Any] = []
    loop.append(loop)

    @tool
    def f(x: Any) -> int:
        return 1

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert f(loop) == 1
    msgs = valid_messages(path)
    assert_paired(msgs)


def test_recording_after_the_session_closed(tmp_path: Path) -> None:
    """A tool finishing after its session closed loses only the record (counted), never the value."""

    @tool
    def g() -> Iterator[int]:
        yield 1
        yield 2

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        it = g()
        assert next(it) == 1
    assert list(it) == [2]
    assert s.stats()["lost"] == 1
    msgs = valid_messages(path)
    assert [m["role"] for m in msgs] == ["assistant"]
