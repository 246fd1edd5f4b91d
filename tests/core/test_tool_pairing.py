"""How ``@tool`` results find the tool call they answer."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

import ststrace
from ststrace import Session, tool, tool_call_id
from test_decorators_helpers import assert_paired, calls_by_id, tool_results, valid_messages


def call(cid: str, fn: str, **arguments: Any) -> dict[str, Any]:
    return {"id": cid, "function": {"name": fn, "arguments": orjson.dumps(arguments).decode()}}


def results_by_id(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["toolCallId"]: m["content"] for m in tool_results(messages)}


@tool
def search(q: str, limit: int = 3) -> str:
    return f"{q}/{limit}"


@tool
async def asearch(q: str, delay: float = 0.0) -> str:
    await asyncio.sleep(delay)
    return q


def test_bound_id_wins_over_the_oldest_pending(tmp_path: Path) -> None:
    """``with tool_call_id(...)`` pairs the next call with that id, whatever its arguments."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "search", q="a"), call("c2", "search", q="b")])
        with tool_call_id("c2"):
            search("a")  # arguments match c1; the bound id still wins
            search("b")  # only the *next* call is bound: this one pairs normally
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert [m["toolCallId"] for m in tool_results(msgs)] == ["c2", "c1"]
    assert [m["role"] for m in msgs] == ["assistant", "tool", "tool"]


def test_bound_id_the_session_never_saw_gets_a_call(tmp_path: Path) -> None:
    """An id from a model call ststrace did not record still yields a valid trace:
    the call is synthesized with exactly that id."""
    path = tmp_path / "t.jsonl"
    with Session(path):
        with tool_call_id("toolu_01XYZ"):
            assert search("q", limit=1) == "q/1"
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert msgs[0]["toolCalls"][0]["id"] == "toolu_01XYZ"
    assert orjson.loads(msgs[0]["toolCalls"][0]["function"]["arguments"]) == {"q": "q", "limit": 1}
    assert msgs[1]["toolCallId"] == "toolu_01XYZ"


def test_bound_id_consumed_once_across_threads(tmp_path: Path) -> None:
    """Two calls submitted inside one ``tool_call_id`` block: only one answers the bound id."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "search", q="x")])
        with ststrace.ThreadPoolExecutor(2) as pool, tool_call_id("c1"):
            futures = [pool.submit(search, "x"), pool.submit(search, "y")]
            assert sorted(f.result() for f in futures) == ["x/3", "y/3"]
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert list(results_by_id(msgs)).count("c1") == 1
    assert len(tool_results(msgs)) == 2


def test_tool_call_id_rejects_bad_ids() -> None:
    """The id must be a non-empty string: a mistake here is the caller's, so it raises."""
    for bad in ("", None, 5):
        with pytest.raises(ValueError):
            with tool_call_id(bad):  # type: ignore[arg-type]
                pass


def test_oldest_pending_of_the_same_name(tmp_path: Path) -> None:
    """With identical arguments, calls are answered oldest first; other names are untouched."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(
            tool_calls=[call("o1", "other"), call("c1", "search", q="a"), call("c2", "search", q="a")]
        )
        search("a")
        search("a")
        assert s.stats()["pending_tool_calls"] == 1  # "other" is still waiting
    msgs = valid_messages(path)
    assert [m["toolCallId"] for m in tool_results(msgs)] == ["c1", "c2"]


def test_oldest_pending_even_when_arguments_differ(tmp_path: Path) -> None:
    """A lone pending call of that name is answered even if the arguments do not match."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "search", q="typo")])
        search("fixed")
    msgs = valid_messages(path)
    assert [m["role"] for m in msgs] == ["assistant", "tool"]
    assert msgs[1]["toolCallId"] == "c1"


def test_argument_match_among_several_pending(tmp_path: Path) -> None:
    """Parallel calls of one tool executed out of order pair by their arguments."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call(f"c{i}", "search", q=f"q{i}", limit=i) for i in range(1, 5)])
        for i in (3, 1, 4, 2):
            search(f"q{i}", limit=i)
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert results_by_id(msgs) == {"c3": "q3/3", "c1": "q1/1", "c4": "q4/4", "c2": "q2/2"}


def test_argument_match_with_defaults_filled_in(tmp_path: Path) -> None:
    """The model sent a defaulted parameter the caller left out, and the other way round."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(
            tool_calls=[
                call("c1", "search", q="a"),  # model omitted limit
                call("c2", "search", q="b", limit=3),  # model spelled out the default
                call("c3", "search", q="c"),
            ]
        )
        search("b")  # matches c2 once the default is filled in
        search("c", limit=3)  # matches c3 once the explicit default is set aside
        search("a")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert [m["toolCallId"] for m in tool_results(msgs)] == ["c2", "c3", "c1"]


def test_argument_match_normalizes_tuples_and_keywords(tmp_path: Path) -> None:
    """Arguments compare as JSON: a tuple matches the model's list, keyword order does not matter."""

    @tool
    def place(points: Any, name: str = "") -> int:
        return len(points)

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "place", points=[1, 2], name="a"), call("c2", "place", name="b", points=[3])])
        place(name="b", points=(3,))
        place((1, 2), "a")
    assert [m["toolCallId"] for m in tool_results(valid_messages(path))] == ["c2", "c1"]


async def test_parallel_async_calls_through_gather(tmp_path: Path) -> None:
    """asyncio.gather of one async tool: finishing order differs from call order, pairing does not."""
    path = tmp_path / "t.jsonl"
    async with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "asearch", q="slow"), call("c2", "asearch", q="fast"), call("c3", "asearch", q="mid")])
        out = await asyncio.gather(asearch("fast", 0.0), asearch("slow", 0.03), asearch("mid", 0.01))
    assert list(out) == ["fast", "slow", "mid"]
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert [m["content"] for m in tool_results(msgs)] == ["fast", "mid", "slow"]  # finishing order
    assert results_by_id(msgs) == {"c1": "slow", "c2": "fast", "c3": "mid"}


def test_parallel_calls_in_threads(tmp_path: Path) -> None:
    """Many parallel calls through ststrace.ThreadPoolExecutor all pair with their own call."""
    n = 40
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call(f"c{i}", "search", q=str(i)) for i in range(n)])
        with ststrace.ThreadPoolExecutor(8) as pool:
            assert list(pool.map(search, [str(i) for i in reversed(range(n))])) == [f"{i}/3" for i in reversed(range(n))]
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert results_by_id(msgs) == {f"c{i}": f"{i}/3" for i in range(n)}


def test_unrequested_call_leaves_other_pending_calls_alone(tmp_path: Path) -> None:
    """A tool with no pending call of its name gets its own synthesized assistant call."""

    @tool
    def clock() -> str:
        return "noon"

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "search", q="a")])
        clock()
        search("a")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert [m["role"] for m in msgs] == ["assistant", "assistant", "tool", "tool"]
    synthesized = msgs[1]["toolCalls"][0]
    assert synthesized["function"] == {"name": "clock", "arguments": "{}"}
    assert synthesized["id"] != "c1"
    assert results_by_id(msgs) == {synthesized["id"]: "noon", "c1": "a/3"}


def test_no_id_answered_twice(tmp_path: Path) -> None:
    """Once a call is answered, more calls of the tool get fresh synthesized calls."""
    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "search", q="a")])
        for _ in range(3):
            search("a")
    msgs = valid_messages(path)
    assert_paired(msgs)
    ids = [m["toolCallId"] for m in tool_results(msgs)]
    assert ids[0] == "c1" and len(set(ids)) == 3
    assert len(calls_by_id(msgs)) == 3


def test_pending_calls_survive_resume(tmp_path: Path) -> None:
    """A call recorded before a restart is answered by a @tool call after ``resume=True``."""
    path = tmp_path / "t.jsonl"
    with Session(path, id="run1") as s:
        s.assistant(tool_calls=[call("c1", "search", q="a"), call("c2", "search", q="b")])
        search("b")
    with Session(path, resume=True):
        search("a")
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert results_by_id(msgs) == {"c2": "b/3", "c1": "a/3"}


def test_pairing_is_per_session(tmp_path: Path) -> None:
    """A pending call in one session is never answered from another session."""
    p1, p2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with Session(p1) as s1:
        s1.assistant(tool_calls=[call("c1", "search", q="a")])
        with Session(p2):
            search("a")
        assert s1.stats()["pending_tool_calls"] == 1
    assert tool_results(valid_messages(p1)) == []
    inner = valid_messages(p2)
    assert inner[1]["toolCallId"] != "c1"


def test_concurrent_sessions_in_threads(tmp_path: Path) -> None:
    """Sessions opened in different threads each record only their own calls."""
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with Session(tmp_path / f"{i}.jsonl") as s:
                s.assistant(tool_calls=[call(f"c{i}", "search", q=str(i))])
                search(str(i))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(6):
        msgs = valid_messages(tmp_path / f"{i}.jsonl")
        assert results_by_id(msgs) == {f"c{i}": f"{i}/3"}


async def test_bound_ids_per_task_through_gather(tmp_path: Path) -> None:
    """The usual pattern: each task binds its own call's id; arguments do not matter."""
    path = tmp_path / "t.jsonl"

    async def run(cid: str, q: str) -> str:
        with tool_call_id(cid):
            return await asearch(q, 0.01 if cid == "c1" else 0.0)

    async with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "asearch", q="same"), call("c2", "asearch", q="same")])
        assert list(await asyncio.gather(run("c2", "two"), run("c1", "one"))) == ["two", "one"]
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert results_by_id(msgs) == {"c1": "one", "c2": "two"}


def test_bound_id_for_a_generator_tool(tmp_path: Path) -> None:
    """A generator's bound id is taken when it is called, even if it is iterated after the block."""

    @tool
    def chunks(q: str) -> Any:
        yield q
        yield "!"

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "chunks", q="a"), call("c2", "chunks", q="b")])
        with tool_call_id("c2"):
            gen = chunks("a")
        other = chunks("b")
        assert list(gen) == ["a", "!"]
        assert list(other) == ["b", "!"]
    assert results_by_id(valid_messages(path)) == {"c2": "a!", "c1": "b!"}


def test_bound_generator_iterated_after_an_unbound_one(tmp_path: Path) -> None:
    """A generator bound to c2 but started last: an unbound generator whose arguments match c2
    must not take c2 first (that would answer c2 twice)."""

    @tool
    def chunks(q: str) -> Any:
        yield q

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "chunks", q="a"), call("c2", "chunks", q="b")])
        with tool_call_id("c2"):
            bound_gen = chunks("a")
        unbound = chunks("b")
        assert list(unbound) == ["b"]
        assert list(bound_gen) == ["a"]
    msgs = valid_messages(path)
    assert_paired(msgs)
    assert results_by_id(msgs) == {"c1": "b", "c2": "a"}


def test_capture_args_false_still_pairs_by_arguments(tmp_path: Path) -> None:
    """Arguments that are not written still choose the right pending call."""

    @tool(capture_args=False)
    def secret(token: str) -> str:
        return token[::-1]

    path = tmp_path / "t.jsonl"
    with Session(path) as s:
        s.assistant(tool_calls=[call("c1", "secret", token="ab"), call("c2", "secret", token="cd")])
        secret("cd")
        secret("ab")
        secret("zy")  # nobody asked: its synthesized call shows no arguments
    msgs = valid_messages(path)
    assert_paired(msgs)
    ids = [m["toolCallId"] for m in tool_results(msgs)]
    assert ids[:2] == ["c2", "c1"]
    assert calls_by_id(msgs)[ids[2]]["arguments"] == "{}"
    assert "zy" not in path.read_text()  # only its reversal, the result, is written
