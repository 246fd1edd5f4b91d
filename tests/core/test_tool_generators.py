"""Decorated generators behave exactly like the undecorated ones (send, throw,
close, return value) and record one result however they end."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Generator, Iterator

import orjson
import pytest

from ststrace import Session, tool
from test_decorators_helpers import assert_paired, tool_results, valid_messages


class Stop(Exception):
    pass


def echo(limit: int, log: list[str]) -> Generator[int, int | None, int]:
    """Yields a running total of what is sent; swallows ValueError; returns the total."""
    total = 0
    try:
        while True:
            try:
                got = yield total
            except ValueError:
                got = -1
            total += 1 if got is None else got
            if total > limit:
                return total * 10
    finally:
        log.append("finally")


def stubborn(log: list[str]) -> Iterator[int]:
    """Ignores the first GeneratorExit: close() must raise RuntimeError."""
    while True:
        try:
            yield 1
        except GeneratorExit:
            if log:
                return
            log.append("ignored")


def empty(log: list[str]) -> Generator[int, None, int]:
    log.append("ran")
    return 42
    yield 0  # pragma: no cover


def delegating(log: list[str]) -> Iterator[int]:
    result = yield from echo(5, log)
    yield result


Op = tuple[str, Any]

# Each factory is a generator function called with the log list last.
SCENARIOS: dict[str, tuple[Callable[..., Iterator[int]], tuple[Any, ...], list[Op]]] = {
    "send-throw-return": (
        echo,
        (10,),
        [("next", None), ("send", 2), ("send", 3), ("throw", ValueError("v")), ("send", 100), ("next", None)],
    ),
    "throw-propagates": (echo, (10,), [("next", None), ("throw", KeyError("k")), ("next", None)]),
    "close-early": (echo, (10,), [("next", None), ("send", 1), ("close", None), ("next", None)]),
    "close-unstarted": (echo, (10,), [("close", None), ("next", None)]),
    "throw-unstarted": (echo, (10,), [("throw", Stop("s")), ("next", None)]),
    "send-non-none-unstarted": (echo, (10,), [("send", 5), ("next", None)]),
    # Only up to the failed close: after it the undecorated generator is still
    # suspended, the decorated one is finished (a known, documented difference).
    "ignores-generator-exit": (stubborn, (), [("next", None), ("close", None)]),
    "returns-at-once": (empty, (), [("next", None), ("next", None)]),
    "yield-from": (
        delegating,
        (),
        [("next", None), ("send", 4), ("throw", ValueError()), ("send", 9), ("next", None)],
    ),
    "stop-exhausted-then-throw": (empty, (), [("next", None), ("throw", Stop("late"))]),
}


def apply(gen: Iterator[int], ops: list[Op]) -> list[tuple[Any, ...]]:
    """Run *ops* against *gen*; the observable outcome of each step."""
    out: list[tuple[Any, ...]] = []
    for op, arg in ops:
        try:
            if op == "next":
                value = next(gen)
            elif op == "send":
                value = gen.send(arg)  # type: ignore[attr-defined]
            elif op == "throw":
                value = gen.throw(arg)  # type: ignore[attr-defined]
            else:
                value = gen.close()  # type: ignore[attr-defined]
            out.append(("value", value))
        except StopIteration as stop:
            out.append(("stop", stop.value))
        except Exception as exc:
            out.append(("raise", type(exc), exc.args, exc is arg))
    return out


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_generator_parity(scenario: str, tmp_path: Path) -> None:
    """The same sequence of values, return values and exceptions as undecorated; one result at most."""
    factory, args, ops = SCENARIOS[scenario]
    plain_log: list[str] = []
    expected = apply(factory(*args, plain_log), ops)

    traced_log: list[str] = []
    decorated = tool(name="gen")(factory)
    path = tmp_path / "t.jsonl"
    with Session(path):
        got = apply(decorated(*args, traced_log), ops)
    assert got == expected
    assert traced_log == plain_log
    msgs = valid_messages(path)
    assert_paired(msgs)
    started = bool(plain_log)  # every scenario's generator logs something once its body ran
    assert len(tool_results(msgs)) == (1 if started else 0)


def test_generator_result_is_recorded_once_with_all_items(tmp_path: Path) -> None:
    """Items of mixed types are recorded as a JSON list; the return value is passed on."""

    @tool
    def items() -> Generator[Any, None, str]:
        yield "a"
        yield 1
        yield {"k": None}
        return "done"

    path = tmp_path / "t.jsonl"
    with Session(path):
        gen = items()
        assert list(gen) == ["a", 1, {"k": None}]
    results = tool_results(valid_messages(path))
    assert len(results) == 1
    assert orjson.loads(results[0]["content"]) == ["a", 1, {"k": None}]


def test_string_items_are_concatenated(tmp_path: Path) -> None:
    @tool
    def words() -> Iterator[str]:
        yield "hel"
        yield "lo"

    path = tmp_path / "t.jsonl"
    with Session(path):
        assert "".join(words()) == "hello"
    assert tool_results(valid_messages(path))[0]["content"] == "hello"


def test_break_then_garbage_collection_records_once(tmp_path: Path) -> None:
    """Leaving a for loop early and dropping the generator records what was produced, once."""
    log: list[str] = []

    @tool
    def counter() -> Iterator[str]:
        try:
            for i in range(100):
                yield str(i)
        finally:
            log.append("closed")

    path = tmp_path / "t.jsonl"
    with Session(path):
        for item in counter():
            if item == "2":
                break
        gc.collect()
        assert log == ["closed"]
    results = tool_results(valid_messages(path))
    assert [r["content"] for r in results] == ["012"]


def test_unstarted_generator_records_nothing(tmp_path: Path) -> None:
    """A generator created but never iterated never ran: no call, no result."""

    @tool
    def never() -> Iterator[int]:
        yield 1

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.user("hi")
        gen = never()
        del gen
        gc.collect()
    assert [m["role"] for m in valid_messages(path)] == ["user"]


def test_generator_iterated_outside_the_session_block(tmp_path: Path) -> None:
    """A generator created inside the session records into it even if consumed later in the block
    from another context (the session is captured at call time)."""
    import contextvars

    @tool
    def g() -> Iterator[str]:
        yield "x"

    path = tmp_path / "t.jsonl"
    with Session(path):
        gen = g()
        assert contextvars.Context().run(list, gen) == ["x"]
    assert tool_results(valid_messages(path))[0]["content"] == "x"


def test_no_context_held_across_a_yield(tmp_path: Path) -> None:
    """Between items the caller's context is untouched: a session entered and left while a
    generator is suspended is not affected by it."""

    @tool
    def g() -> Iterator[int]:
        yield 1
        yield 2

    outer = tmp_path / "outer.jsonl"
    inner = tmp_path / "inner.jsonl"
    with Session(outer):
        gen = g()
        next(gen)
        with Session(inner) as s2:
            s2.user("inside")
            next(gen)
        with pytest.raises(StopIteration):
            next(gen)
    assert [m["role"] for m in valid_messages(inner)] == ["user"]
    assert len(tool_results(valid_messages(outer))) == 1


# -- async generators -------------------------------------------------------------


async def aecho(limit: int, log: list[str]) -> AsyncIterator[int]:
    total = 0
    try:
        while True:
            try:
                got = yield total
            except ValueError:
                got = -1
            await asyncio.sleep(0)
            total += 1 if got is None else got
            if total > limit:
                return
    finally:
        log.append("finally")


ASCENARIOS: dict[str, list[Op]] = {
    "asend-athrow-end": [("next", None), ("send", 2), ("throw", ValueError()), ("send", 50), ("next", None)],
    "athrow-propagates": [("next", None), ("throw", KeyError("k")), ("next", None)],
    "aclose-early": [("next", None), ("close", None), ("next", None)],
    "aclose-unstarted": [("close", None), ("next", None)],
    "athrow-unstarted": [("throw", Stop("s")), ("next", None)],
}


async def aapply(agen: Any, ops: list[Op]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for op, arg in ops:
        try:
            if op == "next":
                value = await agen.__anext__()
            elif op == "send":
                value = await agen.asend(arg)
            elif op == "throw":
                value = await agen.athrow(arg)
            else:
                value = await agen.aclose()
            out.append(("value", value))
        except StopAsyncIteration:
            out.append(("stop",))
        except Exception as exc:
            out.append(("raise", type(exc), exc.args, exc is arg))
    return out


@pytest.mark.parametrize("scenario", list(ASCENARIOS))
async def test_async_generator_parity(scenario: str, tmp_path: Path) -> None:
    """asend / athrow / aclose behave as on the undecorated async generator."""
    ops = ASCENARIOS[scenario]
    plain_log: list[str] = []
    expected = await aapply(aecho(10, plain_log), ops)
    traced_log: list[str] = []
    path = tmp_path / "t.jsonl"
    with Session(path):
        got = await aapply(tool(name="aecho")(aecho)(10, traced_log), ops)
    assert got == expected
    assert traced_log == plain_log
    msgs = valid_messages(path)
    assert_paired(msgs)
    started = bool(plain_log)
    assert len(tool_results(msgs)) == (1 if started else 0)


async def test_async_generator_break_and_gc_records_once(tmp_path: Path) -> None:
    """An abandoned async generator is finalized by the event loop and records once."""
    log: list[str] = []

    @tool
    async def ticks() -> AsyncIterator[str]:
        try:
            for i in range(100):
                yield str(i)
        finally:
            log.append("closed")

    path = tmp_path / "t.jsonl"
    async with Session(path):
        async for item in ticks():
            if item == "1":
                break
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
        assert log == ["closed"]
    results = tool_results(valid_messages(path))
    assert [r["content"] for r in results] == ["01"]
