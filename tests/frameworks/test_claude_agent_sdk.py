"""The Claude Agent SDK (``claude-agent-sdk``) under ``ststrace.instrument()``
alone: the REAL SDK runs its bundled ``claude`` CLI (shipped in the wheel), which
calls the fake server's Anthropic Messages SSE route on 127.0.0.1.

The CLI is a subprocess, out of reach of the suite's Python network guard, so
it runs offline by configuration: ``ANTHROPIC_BASE_URL`` points at the fake
server, a temporary ``CLAUDE_CONFIG_DIR`` and ``HOME``, no setting sources,
every switch that stops its telemetry, error reports, update checks and
feature-flag fetches, and HTTP(S) proxies set to a trap on 127.0.0.1 that
fails the test if anything (other than the fake server, under ``NO_PROXY``)
tries to go out through it. ``strace -f -e trace=connect`` of these runs shows
one connection only, to the fake server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

sdk = pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed (pip install 'ststrace[test]')")

from claude_agent_sdk import (  # noqa: E402
    AgentDefinition,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    create_sdk_mcp_server,
    query,
    tool,
)

import ststrace  # noqa: E402
from ststrace import Session  # noqa: E402
from ststrace._instrument import instrumented as patched_now  # noqa: E402
from ststrace.testing import FakeAPI, ScriptedReply, ScriptedToolCall  # noqa: E402
from hooks_helpers import Trap  # noqa: E402
from test_decorators_helpers import valid_messages  # noqa: E402
from test_instrument_helpers import instrumented  # noqa: E402

MODEL = "claude-opus-5-5"  # the CLI's default model: it sends this name, the fake echoes it
SYSTEM = "You are a weather bot. Use the tools for facts."
USER = "What's the weather in Paris?"
WEATHER = "mcp__weather__get_weather"
WEATHER_RESULT = "Sunny, 21 C"
ANSWER = "It is sunny in Paris, 21 C."

pytestmark = pytest.mark.usefixtures("no_external_network")


@tool("get_weather", "Current weather for a city.", {"city": str})
async def get_weather(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": WEATHER_RESULT if args["city"] == "Paris" else "unknown"}]}


@pytest.fixture
def trap() -> Iterator[Trap]:
    t = Trap()
    yield t
    t.close()
    assert not t.attempts, f"the claude CLI tried to reach the network: {t.attempts}"


@pytest.fixture
def cli_env(fake_api: FakeAPI, trap: Trap, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    return {
        "ANTHROPIC_BASE_URL": fake_api.url,
        "ANTHROPIC_API_KEY": "test-key",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ENABLE_TOOL_SEARCH": "false",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_UPDATES": "1",
        "DISABLE_GROWTHBOOK": "1",
        "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "DISABLE_INSTALLATION_CHECKS": "1",
        "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
        "HTTPS_PROXY": trap.url,
        "HTTP_PROXY": trap.url,
        "https_proxy": trap.url,
        "http_proxy": trap.url,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def options(cli_env: dict[str, str], tmp_path: Path, **kwargs: Any) -> ClaudeAgentOptions:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    values: dict[str, Any] = dict(
        env=cli_env,
        cwd=str(work),
        setting_sources=[],
        system_prompt=SYSTEM,
        tools=[],
        mcp_servers={"weather": create_sdk_mcp_server("weather", tools=[get_weather])},
        allowed_tools=[WEATHER],
        max_turns=5,
    )
    values.update(kwargs)
    return ClaudeAgentOptions(**values)


@pytest.fixture
def traced() -> Iterator[None]:
    with instrumented("claude_agent_sdk"):
        yield


def weather_call(suffix: str = "w1") -> ScriptedToolCall:
    return ScriptedToolCall(WEATHER, {"city": "Paris"}, suffix)


def messages(path: Path) -> list[dict[str, Any]]:
    """The trace's messages, timestamps checked and dropped."""
    out = []
    for m in valid_messages(path):
        m = dict(m)
        ts = m.pop("timestamp")
        assert isinstance(ts, int) and ts > 1_600_000_000_000
        out.append(m)
    return out


def turn_usage(result: ResultMessage, before: dict[str, float] | None = None) -> dict[str, Any]:
    """What the trace must say a turn used: the CLI's totals (grown since *before*)."""
    counts = next(iter((result.model_usage or {}).values()))
    prev = before or {}
    usage = {
        "input": counts["inputTokens"] - prev.get("inputTokens", 0),
        "output": counts["outputTokens"] - prev.get("outputTokens", 0),
        "cacheRead": counts["cacheReadInputTokens"] - prev.get("cacheReadInputTokens", 0),
        "cacheWrite": counts["cacheCreationInputTokens"] - prev.get("cacheCreationInputTokens", 0),
    }
    usage["totalTokens"] = sum(usage.values())
    assert result.total_cost_usd is not None
    usage["cost"] = {"total": pytest.approx(result.total_cost_usd - prev.get("cost", 0.0))}
    return usage


async def run_query(prompt: Any, opts: ClaudeAgentOptions) -> list[Any]:
    return [m async for m in query(prompt=prompt, options=opts)]


def result_of(received: list[Any]) -> ResultMessage:
    results = [m for m in received if isinstance(m, ResultMessage)]
    assert len(results) == 1
    return results[0]


# --------------------------------------------------------------------------- query()


async def test_query_records_the_tool_call_its_result_and_the_answer(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """One session holds the system prompt and prompt once, the reply the CLI
    streamed block by block as one message (thinking, text, the call under its
    ``toolu_`` id), the tool's result paired with it, and the answer with the
    turn's usage and cost; the CLI sent exactly two model calls."""
    fake_api.script(
        ScriptedReply(text="Let me check.", tool_calls=(weather_call(),), reasoning="I need the weather."),
        ScriptedReply(text=ANSWER),
    )
    path = tmp_path / "trace.jsonl"
    with Session(path):
        received = await run_query(USER, options(cli_env, tmp_path))
    assert [r.endpoint for r in fake_api.requests] == ["messages", "messages"]
    assert fake_api.requests[0].body["messages"][0] == {"role": "user", "content": USER}
    assert messages(path) == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": "Let me check.",
            "reasoningContent": "I need the weather.",
            "toolCalls": [{"id": "toolu_w1", "function": {"name": WEATHER, "arguments": '{"city":"Paris"}'}}],
            "model": MODEL,
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "toolu_w1"},
        {"role": "assistant", "content": ANSWER, "model": MODEL, "usage": turn_usage(result_of(received))},
    ]


async def test_a_streamed_prompt_is_recorded_as_it_is_sent(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """``query(prompt=<async iterable>)``: each user message as the SDK takes it."""
    fake_api.script(ScriptedReply(text=ANSWER))

    async def prompts() -> AsyncIterator[dict[str, Any]]:
        yield {"type": "user", "message": {"role": "user", "content": USER}, "parent_tool_use_id": None}

    path = tmp_path / "trace.jsonl"
    with Session(path):
        received = await run_query(prompts(), options(cli_env, tmp_path, system_prompt=None))
    assert messages(path) == [
        {"role": "user", "content": USER},
        {"role": "assistant", "content": ANSWER, "model": MODEL, "usage": turn_usage(result_of(received))},
    ]


async def test_a_run_stopped_by_max_turns_ends_with_a_note(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """The error result is noted once (not again for the ``ResultError`` the SDK
    raises after it); the turn's usage goes on its last reply, the tool call."""
    fake_api.script(ScriptedReply(text=None, tool_calls=(weather_call(),)))
    path = tmp_path / "trace.jsonl"
    received: list[Any] = []
    with Session(path):
        with pytest.raises(sdk.ResultError, match="maximum number of turns"):
            async for m in query(prompt=USER, options=options(cli_env, tmp_path, max_turns=1)):
                received.append(m)
    assert result_of(received).subtype == "error_max_turns"
    got = messages(path)
    assert got[:4] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "toolu_w1", "function": {"name": WEATHER, "arguments": '{"city":"Paris"}'}}],
            "model": MODEL,
            "usage": turn_usage(result_of(received)),
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "toolu_w1"},
    ]
    assert len(got) == 5 and got[4]["role"] == "system"
    assert got[4]["content"].startswith("The agent run stopped: error_max_turns")


async def test_parallel_tool_calls_stay_in_one_reply(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """The CLI runs a tool as soon as its block is complete, so the first
    call's result comes before the second call's block: the reply is still
    recorded once with both calls, then both results."""
    lyon = ScriptedToolCall(WEATHER, {"city": "Lyon"}, "w2")
    fake_api.script(
        ScriptedReply(text="Checking both.", tool_calls=(weather_call(), lyon), reasoning="Two cities."),
        ScriptedReply(text=ANSWER),
    )
    path = tmp_path / "trace.jsonl"
    with Session(path):
        received = await run_query(USER, options(cli_env, tmp_path))
    assert messages(path) == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": "Checking both.",
            "reasoningContent": "Two cities.",
            "toolCalls": [
                {"id": "toolu_w1", "function": {"name": WEATHER, "arguments": '{"city":"Paris"}'}},
                {"id": "toolu_w2", "function": {"name": WEATHER, "arguments": '{"city":"Lyon"}'}},
            ],
            "model": MODEL,
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "toolu_w1"},
        {"role": "tool", "content": "unknown", "toolCallId": "toolu_w2"},
        {"role": "assistant", "content": ANSWER, "model": MODEL, "usage": turn_usage(result_of(received))},
    ]


async def test_no_session_records_nothing_and_uninstrument_restores(
    fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a session the run goes on untouched and no trace is written."""
    monkeypatch.setenv("STSTRACE_DIR", str(tmp_path / "traces"))
    monkeypatch.chdir(tmp_path)
    fake_api.script(ScriptedReply(text=ANSWER))
    with instrumented("claude_agent_sdk"):
        received = await run_query(USER, options(cli_env, tmp_path))
    assert result_of(received).result == ANSWER
    assert not (tmp_path / "traces").exists()
    assert not list(tmp_path.glob("*.jsonl"))


async def test_a_decorated_sdk_mcp_tool_answers_its_call_once(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """An SDK MCP handler that is also an ``@ststrace.tool``: still one call
    (the model's ``toolu_`` id) and one result. The CLI runs the tool while the
    reply is still coming in, so the handler records nothing and the stream's
    result stands (were the reply recorded already, the handler would answer)."""

    @tool("get_weather", "Current weather for a city.", {"city": str})
    @ststrace.tool
    async def traced_weather(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": WEATHER_RESULT}]}

    fake_api.script(ScriptedReply(text=None, tool_calls=(weather_call(),)), ScriptedReply(text=ANSWER))
    servers = {"weather": create_sdk_mcp_server("weather", tools=[traced_weather])}
    path = tmp_path / "trace.jsonl"
    with Session(path):
        await run_query(USER, options(cli_env, tmp_path, mcp_servers=servers))
    got = messages(path)
    assert [(m["role"], [c["id"] for c in m.get("toolCalls", ())], m.get("toolCallId")) for m in got] == [
        ("system", [], None),
        ("user", [], None),
        ("assistant", ["toolu_w1"], None),
        ("tool", [], "toolu_w1"),
        ("assistant", [], None),
    ]
    assert got[3]["content"] == WEATHER_RESULT


# --------------------------------------------------------------------------- ClaudeSDKClient


async def test_client_conversation_records_each_turn_once(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """Two turns of one ``ClaudeSDKClient``: each prompt and answer once, and
    each turn's own usage (the CLI reports running totals)."""
    fake_api.script(
        ScriptedReply(text=None, tool_calls=(weather_call(),)),
        ScriptedReply(text=ANSWER),
        ScriptedReply(text="You are welcome."),
    )
    path = tmp_path / "trace.jsonl"
    with Session(path):
        async with ClaudeSDKClient(options(cli_env, tmp_path)) as client:
            await client.query(USER)
            first = [m async for m in client.receive_response()]
            await client.query("Thanks!")
            second = [m async for m in client.receive_response()]
    r1, r2 = result_of(first), result_of(second)
    counts = next(iter((r1.model_usage or {}).values()))
    before = {**counts, "cost": r1.total_cost_usd}
    assert messages(path) == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "toolu_w1", "function": {"name": WEATHER, "arguments": '{"city":"Paris"}'}}],
            "model": MODEL,
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "toolu_w1"},
        {"role": "assistant", "content": ANSWER, "model": MODEL, "usage": turn_usage(r1)},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You are welcome.", "model": MODEL, "usage": turn_usage(r2, before)},
    ]


# --------------------------------------------------------------------------- sub-agents


async def test_a_sub_agent_records_into_a_linked_child_session(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """The ``Agent`` tool: the sub-agent's messages (``parent_tool_use_id``)
    go to a child session linked to that call, with the agent definition's
    prompt, the task, its own tool call and result and its final report; the
    parent keeps the call, the CLI's hand-back as its result, and the answer."""
    task = {
        "description": "Check weather",
        "prompt": "Find the weather in Paris",
        "subagent_type": "weather-agent",
        "run_in_background": False,
    }
    fake_api.script(
        ScriptedReply(text="Delegating.", tool_calls=(ScriptedToolCall("Agent", task, "task1"),)),
        # The CLI forwards a sub-agent's tool calls, not its thinking (nor,
        # by default, its text: the final report comes from the task notification).
        ScriptedReply(text=None, tool_calls=(weather_call("w2"),), reasoning="Call the tool."),
        ScriptedReply(text="Paris: sunny, 21 C."),
        ScriptedReply(text=ANSWER),
    )
    agents = {"weather-agent": AgentDefinition(description="Finds weather", prompt="You find weather.", tools=[WEATHER])}
    opts = options(cli_env, tmp_path, tools=["Agent"], allowed_tools=[WEATHER, "Agent"], agents=agents)
    path = tmp_path / "trace.jsonl"
    with Session(path) as s:
        received = await run_query(USER, opts)
    # The sub-agent's calls were the 2nd and 3rd, under its own prompt.
    assert [r.body["messages"][0]["content"] for r in fake_api.requests] == [USER, task["prompt"], task["prompt"], USER]
    files = sorted(tmp_path.glob("trace.*.jsonl"))
    assert len(files) == 1
    header = json.loads(files[0].read_text().splitlines()[0])
    assert header["name"] == "weather-agent"
    assert header["parentSessionId"] == s.id and header["parentToolCallId"] == "toolu_task1"
    assert messages(files[0]) == [
        {"role": "system", "content": "You find weather."},
        {"role": "user", "content": task["prompt"]},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "toolu_w2", "function": {"name": WEATHER, "arguments": '{"city":"Paris"}'}}],
            "model": MODEL,
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "toolu_w2"},
        {"role": "assistant", "content": "Paris: sunny, 21 C.", "model": MODEL},
    ]
    parent = messages(path)
    call_args = json.dumps(task, separators=(",", ":"))
    assert parent[:3] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": "Delegating.",
            "toolCalls": [{"id": "toolu_task1", "function": {"name": "Agent", "arguments": call_args}}],
            "model": MODEL,
        },
    ]
    assert parent[3]["role"] == "tool" and parent[3]["toolCallId"] == "toolu_task1"
    assert "Paris: sunny, 21 C." in parent[3]["content"]
    assert parent[4:] == [
        {"role": "assistant", "content": ANSWER, "model": MODEL, "usage": turn_usage(result_of(received))}
    ]



async def test_a_background_sub_agent_and_the_notification(
    traced: None, fake_api: FakeAPI, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """The CLI's default: the sub-agent runs in the background. The parent's
    call is answered at once ("launched"), the child stays open while the
    parent goes on, and closes with the task's report; the parent notes the
    notification that starts its next turn, and each turn has its own usage.
    Each agent's replies are scripted for its own conversation (they run at once)."""
    task = {"description": "Check weather", "prompt": "Find the weather in Paris", "subagent_type": "weather-agent"}
    fake_api.script(
        ScriptedReply(text="Delegating.", tool_calls=(ScriptedToolCall("Agent", task, "task1"),), when=USER),
        ScriptedReply(text="I started a weather agent.", when=USER),
        ScriptedReply(text=ANSWER, when=USER),
        # The delay lets the parent's next reply come first, as with a real model.
        ScriptedReply(text=None, tool_calls=(weather_call("w2"),), when=task["prompt"], delay=0.5),
        ScriptedReply(text="Paris: sunny, 21 C.", when=task["prompt"]),
    )
    agents = {"weather-agent": AgentDefinition(description="Finds weather", prompt="You find weather.", tools=[WEATHER])}
    opts = options(cli_env, tmp_path, tools=["Agent"], allowed_tools=[WEATHER, "Agent"], agents=agents)
    path = tmp_path / "trace.jsonl"
    with Session(path):
        received = await run_query(USER, opts)
    results = [m for m in received if isinstance(m, ResultMessage)]
    assert len(results) == 2  # the CLI's second turn answers the notification
    (child,) = tmp_path.glob("trace.*.jsonl")
    assert messages(child) == [
        {"role": "system", "content": "You find weather."},
        {"role": "user", "content": task["prompt"]},
        {
            "role": "assistant",
            "content": "",
            "toolCalls": [{"id": "toolu_w2", "function": {"name": WEATHER, "arguments": '{"city":"Paris"}'}}],
            "model": MODEL,
        },
        {"role": "tool", "content": WEATHER_RESULT, "toolCallId": "toolu_w2"},
        {"role": "assistant", "content": "Paris: sunny, 21 C.", "model": MODEL},
    ]
    parent = messages(path)
    assert parent[3]["toolCallId"] == "toolu_task1" and parent[3]["content"].startswith("Async agent launched")
    counts = next(iter((results[0].model_usage or {}).values()))
    assert parent[4:] == [
        {"role": "assistant", "content": "I started a weather agent.", "model": MODEL, "usage": turn_usage(results[0])},
        {"role": "system", "content": "The background agent of tool call toolu_task1 completed: Paris: sunny, 21 C."},
        {
            "role": "assistant",
            "content": ANSWER,
            "model": MODEL,
            "usage": turn_usage(results[1], {**counts, "cost": results[0].total_cost_usd}),
        },
    ]


def test_instrument_by_name_and_alias() -> None:
    for name in ("claude_agent_sdk", "claude-agent-sdk"):
        with instrumented(name):
            assert patched_now() == ["claude_agent_sdk"]
