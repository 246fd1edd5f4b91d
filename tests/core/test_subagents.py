"""Sub-agent sessions: a Session opened while another is current is linked to it
(``parentSessionId``, and ``parentToolCallId`` inside a tool call)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ststrace import Session, tool
from ststrace._subagents import tool_scope
from ststrace.testing import FakeAPI
from fakeapi_fixtures import openai_client
from test_instrument_helpers import CHAT_TOOLS, MODEL, chat_messages, instrumented


def read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return lines[0], [env["message"] for env in lines[1:]]


def tool_results(path: Path) -> dict[str, str]:
    return {m["toolCallId"]: m["content"] for m in read(path)[1] if m["role"] == "tool"}


def test_child_inside_a_tool_links_to_session_and_call(tmp_path: Path) -> None:
    """The child header names the parent and the tool call; the parent's tool
    result, since the tool returned nothing, names the child."""
    children: list[Session] = []

    @tool
    def research(topic: str) -> None:
        with Session(tmp_path / "child.jsonl", name=f"research {topic}") as child:
            child.user(topic)
            children.append(child)

    with Session(tmp_path / "parent.jsonl") as parent:
        research("otters")
    header, _ = read(tmp_path / "child.jsonl")
    (call_id, result), = tool_results(tmp_path / "parent.jsonl").items()
    assert header["parentSessionId"] == parent.id
    assert header["parentToolCallId"] == call_id
    assert result == f"[sub-agent session {children[0].id}]"
    parent_header, _ = read(tmp_path / "parent.jsonl")
    assert "parentSessionId" not in parent_header


def test_a_returned_result_is_never_rewritten(tmp_path: Path) -> None:
    @tool
    def research() -> str:
        with Session(tmp_path / "child.jsonl"):
            pass
        return "the otters are fine"

    with Session(tmp_path / "parent.jsonl"):
        research()
    assert list(tool_results(tmp_path / "parent.jsonl").values()) == ["the otters are fine"]
    assert "parentToolCallId" in read(tmp_path / "child.jsonl")[0]


def test_a_failing_tool_records_its_error_and_the_child_stays_linked(tmp_path: Path) -> None:
    @tool
    def research() -> None:
        with Session(tmp_path / "child.jsonl"):
            raise RuntimeError("sub-agent gave up")

    with Session(tmp_path / "parent.jsonl") as parent:
        with pytest.raises(RuntimeError, match="gave up"):
            research()
    assert list(tool_results(tmp_path / "parent.jsonl").values()) == ["Error: RuntimeError: sub-agent gave up"]
    assert read(tmp_path / "child.jsonl")[0]["parentSessionId"] == parent.id


def test_outside_a_tool_only_the_session_is_linked(tmp_path: Path) -> None:
    with Session(tmp_path / "parent.jsonl") as parent:
        with Session(tmp_path / "child.jsonl"):
            pass
    header, _ = read(tmp_path / "child.jsonl")
    assert header["parentSessionId"] == parent.id
    assert "parentToolCallId" not in header


def test_parent_none_opts_out(tmp_path: Path) -> None:
    @tool
    def research() -> None:
        with Session(tmp_path / "child.jsonl", parent=None):
            pass

    with Session(tmp_path / "parent.jsonl"):
        research()
    header, _ = read(tmp_path / "child.jsonl")
    assert "parentSessionId" not in header and "parentToolCallId" not in header
    assert list(tool_results(tmp_path / "parent.jsonl").values()) == [""]


def test_explicit_parent_session_or_id(tmp_path: Path) -> None:
    """``parent=`` names the parent outright, e.g. from a worker process by id."""
    with Session(tmp_path / "p.jsonl") as p:
        pass
    with Session(tmp_path / "a.jsonl", parent=p):
        pass
    with Session(tmp_path / "b.jsonl", parent="sess-from-elsewhere"):
        pass
    assert read(tmp_path / "a.jsonl")[0]["parentSessionId"] == p.id
    assert read(tmp_path / "b.jsonl")[0]["parentSessionId"] == "sess-from-elsewhere"


def test_bad_parent_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="parent must be"):
        Session(parent=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="parent must be"):
        Session(parent="")


def test_metadata_given_by_the_user_wins(tmp_path: Path) -> None:
    """A converter that sets the link itself (metadata) is not overridden."""
    with Session(tmp_path / "p.jsonl"):
        with Session(tmp_path / "c.jsonl", metadata={"parentSessionId": "original"}):
            pass
    assert read(tmp_path / "c.jsonl")[0]["parentSessionId"] == "original"


def test_tool_scope_hook_for_integrations(tmp_path: Path) -> None:
    """The hook framework integrations use: sessions opened in the scope are its children."""
    with Session(tmp_path / "p.jsonl") as p:
        ids = p.assistant(tool_calls=[{"name": "handoff", "arguments": {}}])
        with tool_scope(p, ids[0]) as scope:
            with Session(tmp_path / "c.jsonl") as c:
                pass
    assert scope.children == [c.id]
    header = read(tmp_path / "c.jsonl")[0]
    assert (header["parentSessionId"], header["parentToolCallId"]) == (p.id, ids[0])


async def test_subagent_in_tool_in_session_in_asyncio_tasks(tmp_path: Path) -> None:
    """Concurrent agents (tasks), each running an async tool that runs a
    sub-agent in tasks of its own: every child links to its own parent and call."""

    @tool
    async def delegate(task: str) -> None:
        async def sub(part: int) -> str:
            async with Session(tmp_path / f"{task}-{part}.jsonl") as child:
                await asyncio.sleep(0.001 * part)
                child.user(f"{task} part {part}")
                return child.id

        await asyncio.gather(sub(1), sub(2))

    async def agent(name: str) -> tuple[str, str]:
        async with Session(tmp_path / f"{name}.jsonl") as s:
            await asyncio.sleep(0)
            await delegate(name)
            return s.id, name

    results = await asyncio.gather(*(asyncio.create_task(agent(f"agent{i}")) for i in range(4)))
    for session_id, name in results:
        (call_id, result), = tool_results(tmp_path / f"{name}.jsonl").items()
        kids = []
        for part in (1, 2):
            header = read(tmp_path / f"{name}-{part}.jsonl")[0]
            assert header["parentSessionId"] == session_id
            assert header["parentToolCallId"] == call_id
            kids.append(header["id"])
        assert result.startswith("[sub-agent sessions ")
        assert sorted(result[len("[sub-agent sessions ") : -1].split(", ")) == sorted(kids)


def test_model_tool_call_id_is_the_link(fake_api: FakeAPI, tmp_path: Path) -> None:
    """With a real client, the child's parentToolCallId is the model's own call id."""
    client = openai_client(fake_api)

    @tool
    def get_weather(city: str) -> None:
        with Session(tmp_path / "weather.jsonl"):
            pass

    @tool
    def get_time(tz: str) -> str:
        return "15:00"

    with instrumented("openai"):
        with Session(tmp_path / "p.jsonl"):
            reply = client.chat.completions.create(model=MODEL, messages=chat_messages(), tools=CHAT_TOOLS)
            for call in reply.choices[0].message.tool_calls:
                args = json.loads(call.function.arguments)
                (get_weather if call.function.name == "get_weather" else get_time)(**args)
    assert read(tmp_path / "weather.jsonl")[0]["parentToolCallId"] == "call_weather01"
    results = tool_results(tmp_path / "p.jsonl")
    assert results["call_time02"] == "15:00"
    assert results["call_weather01"].startswith("[sub-agent session ")


def test_links_holding_a_secret_still_match_the_parent_after_redaction(tmp_path: Path) -> None:
    """A tool-call id (and a parent session id) holding a token: the parent writes it redacted
    with a keyed digest; the child's parentToolCallId / parentSessionId were redacted as plain
    text ("call_[REDACTED:github_token]"), so they no longer named the parent's call or session."""
    token = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    call_id, parent_id = "call_" + token, "run-" + token
    with Session(tmp_path / "parent.jsonl", id=parent_id) as s:
        s.user("x")
        s.assistant("", tool_calls=[{"id": call_id, "name": "research", "arguments": {}}])
        with tool_scope(s, call_id):
            with Session(tmp_path / "child.jsonl") as child:
                child.user("y")
        s.tool(call_id, "done")
    parent_header, parent_messages = read(tmp_path / "parent.jsonl")
    child_header, _ = read(tmp_path / "child.jsonl")
    text = (tmp_path / "parent.jsonl").read_text() + (tmp_path / "child.jsonl").read_text()
    assert token not in text
    assert child_header["parentToolCallId"] == parent_messages[1]["toolCalls"][0]["id"]
    assert child_header["parentSessionId"] == parent_header["id"]


def test_children_of_a_lean_path_call_link_and_are_named(tmp_path: Path) -> None:
    """A tool called again in its session takes @tool's lean path, whose scope
    is a (session, call id) tuple: a child opened inside still links to the
    call, the result names it, a failing call leaves nothing behind."""
    children: list[str] = []

    @tool
    def research(topic: str, fail: bool = False) -> None:
        with Session(tmp_path / f"child-{topic}.jsonl") as child:
            children.append(child.id)
            if fail:
                raise RuntimeError("sub-agent gave up")

    with Session(tmp_path / "parent.jsonl") as parent:
        research("first")  # records the schema: the general path
        research("second")  # the lean path
        with pytest.raises(RuntimeError, match="gave up"):
            research("third", fail=True)
        assert parent._call_children == {}
    calls = [m for m in read(tmp_path / "parent.jsonl")[1] if m["role"] == "assistant"]
    ids = [c["toolCalls"][0]["id"] for c in calls]
    results = tool_results(tmp_path / "parent.jsonl")
    assert [results[i] for i in ids] == [
        f"[sub-agent session {children[0]}]",
        f"[sub-agent session {children[1]}]",
        "Error: RuntimeError: sub-agent gave up",
    ]
    for topic, call_id in zip(("first", "second", "third"), ids):
        header = read(tmp_path / f"child-{topic}.jsonl")[0]
        assert header["parentSessionId"] == parent.id
        assert header["parentToolCallId"] == call_id


async def test_children_of_a_lean_path_async_call_in_tasks(tmp_path: Path) -> None:
    """The async lean path: children opened in tasks inside the call link to it."""

    @tool
    async def delegate(task: str) -> None:
        async def sub(part: int) -> str:
            async with Session(tmp_path / f"{task}-{part}.jsonl") as child:
                return child.id

        await asyncio.gather(sub(1), sub(2))

    async with Session(tmp_path / "parent.jsonl") as parent:
        await delegate("a")
        await delegate("b")  # lean
        assert parent._call_children == {}
    results = tool_results(tmp_path / "parent.jsonl")
    for task in ("a", "b"):
        headers = [read(tmp_path / f"{task}-{part}.jsonl")[0] for part in (1, 2)]
        call_id = headers[0]["parentToolCallId"]
        assert headers[1]["parentToolCallId"] == call_id
        assert results[call_id].startswith("[sub-agent sessions ")
        assert sorted(results[call_id][len("[sub-agent sessions ") : -1].split(", ")) == sorted(h["id"] for h in headers)
