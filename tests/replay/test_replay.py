"""``ststrace.testing.replay``: a recorded trace answers the real SDKs' requests.

The proof is the round trip: record a run against the fake server, replay the
trace to the same agent, record again, and the two traces hold the same
conversation (roles, contents, reasoning, tool-call ids and arguments, results,
usage, model)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

import replay_agents as agents  # noqa: E402
from fakeapi_fixtures import (  # noqa: E402
    anthropic_client,
    async_anthropic_client,
    async_openai_client,
    hf_client,
    openai_client,
)
import ststrace  # noqa: E402
from ststrace import Session, read  # noqa: E402
from ststrace.testing import ScriptedToolCall  # noqa: E402
from ststrace.testing.fakeapi import _Failure, _Reply  # noqa: E402
from ststrace.testing import (  # noqa: E402
    FakeAPI,
    ReplayMismatch,
    assert_same_conversation,
    conversation_differences,
    localhost_only,
    replay,
)
from test_instrument_helpers import USER, new_trace, patched  # noqa: E402

__all__ = ["patched"]

Agent = Callable[[Any], Any]

# (name, client factory, loop, async?)
LOOPS: list[tuple[str, Callable[..., Any], Callable[..., Any], bool]] = [
    ("chat", openai_client, agents.chat, False),
    ("chat-async", async_openai_client, agents.achat, True),
    ("responses", openai_client, agents.responses, False),
    ("responses-async", async_openai_client, agents.aresponses, True),
    ("messages", anthropic_client, agents.messages, False),
    ("messages-async", async_anthropic_client, agents.amessages, True),
]


@pytest.fixture(autouse=True)
def _tools_reset() -> Iterator[None]:
    agents.CALLS.clear()
    weather = dict(agents.WEATHER)
    yield
    agents.WEATHER.clear()
    agents.WEATHER.update(weather)


def run(api: FakeAPI, factory: Callable[..., Any], loop: Callable[..., Any], is_async: bool, stream: bool, path: Path, **kw: Any) -> str:
    """Run one agent loop against *api*, recorded into *path*."""
    client = factory(api)
    with localhost_only():
        if is_async:

            async def main() -> str:
                async with Session(path):
                    return str(await loop(client, stream, **kw))

            return asyncio.run(main())
        with Session(path):
            return str(loop(client, stream, **kw))


def record(tmp_path: Path, factory: Callable[..., Any], loop: Callable[..., Any], is_async: bool, stream: bool) -> Path:
    path = new_trace(tmp_path)
    with FakeAPI(cached_tokens=3, cache_write_tokens=2) as api:
        run(api, factory, loop, is_async, stream, path)
    return path


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(("name", "factory", "loop", "is_async"), LOOPS, ids=[x[0] for x in LOOPS])
def test_round_trip(
    name: str, factory: Callable[..., Any], loop: Callable[..., Any], is_async: bool, stream: bool, patched: None, tmp_path: Path
) -> None:
    """Record -> replay -> record again gives the same conversation, in every
    API and mode, with the tools run live again."""
    first = record(tmp_path, factory, loop, is_async, stream)
    second = new_trace(tmp_path)
    with replay(first) as api:
        answer = run(api, factory, loop, is_async, stream, second)
    assert len(api.requests) == 2 and api.misses == []
    original = read(first).messages
    assert answer == original[-1]["content"]
    assert agents.CALLS == ["get_weather(Paris)", "get_time(Europe/Paris)"] * 2
    assert_same_conversation(first, second)
    assert [p for p in ststrace.validate(second) if p.severity == "error"] == []
    replayed = read(second).messages
    # Exact ids and usage, not just "equal after normalising".
    assert [m.get("toolCalls") for m in replayed] == [m.get("toolCalls") for m in original]
    assert [m.get("usage") for m in replayed] == [m.get("usage") for m in original]
    assert any(m.get("usage") for m in replayed)
    assert all(m.get("model") == "gpt-test" for m in replayed if m["role"] == "assistant")


def test_stateful_responses_round_trip(patched: None, tmp_path: Path) -> None:
    """``previous_response_id``: a request sends only the new turn; the replay
    knows which reply it continues from the response id it gave."""
    first = record(tmp_path, openai_client, agents.responses_stateful, False, False)
    second = new_trace(tmp_path)
    with replay(first) as api:
        run(api, openai_client, agents.responses_stateful, False, False, second)
    assert api.misses == [] and len(api.requests) == 2
    assert api.requests[1].body["previous_response_id"] == "resp_fake0001"
    assert_same_conversation(first, second)


def test_stateful_responses_changed_result_is_a_mismatch(patched: None, tmp_path: Path) -> None:
    first = record(tmp_path, openai_client, agents.responses_stateful, False, False)
    agents.WEATHER["Paris"] = "Fog"
    with pytest.raises(ReplayMismatch, match="request 2 .*\n.*first difference"):
        with replay(first) as api:
            agents.responses_stateful(openai_client(api), False)


def test_hugging_face_route_round_trip(patched: None, tmp_path: Path) -> None:
    """``huggingface_hub.InferenceClient`` against ``hf_base_url``."""
    pytest.importorskip("huggingface_hub")
    first = record(tmp_path, hf_client, agents.hf_chat, False, False)
    second = new_trace(tmp_path)
    with replay(first) as api:
        run(api, hf_client, agents.hf_chat, False, False, second)
    assert api.misses == [] and len(api.requests) == 2
    assert_same_conversation(first, second)


@pytest.mark.parametrize(
    ("recorded_with", "replayed_with"),
    [(LOOPS[0], LOOPS[4]), (LOOPS[4], LOOPS[2]), (LOOPS[2], LOOPS[1])],
    ids=["chat->messages", "messages->responses", "responses->chat-async"],
)
def test_one_recording_serves_another_sdk(recorded_with: Any, replayed_with: Any, patched: None, tmp_path: Path) -> None:
    """An agent moved from one SDK to another replays the same recording: the
    same replies, tool-call ids and arguments, in the other API's wire shape."""
    first = record(tmp_path, *recorded_with[1:], False)
    second = new_trace(tmp_path)
    with replay(first) as api:
        run(api, *replayed_with[1:], True, second)
    diffs = [d for d in conversation_differences(first, second) if ": usage differs" not in d]
    assert diffs == []


# --------------------------------------------------------------------------- misses


def _chat_recording(tmp_path: Path) -> Path:
    return record(tmp_path, openai_client, agents.chat, False, False)


def test_changed_prompt_is_a_mismatch_naming_the_message(patched: None, tmp_path: Path) -> None:
    """A changed user prompt: the SDK gets a 409 (no retry), and leaving the
    block raises ReplayMismatch with the message, recorded against sent."""
    path = _chat_recording(tmp_path)
    import openai

    with pytest.raises(ReplayMismatch) as info:
        with replay(path) as api:
            with pytest.raises(openai.ConflictError):
                agents.chat(openai_client(api), False, prompt="What's the weather in Rome?")
    text = str(info.value)
    assert "request 1 (POST /v1/chat/completions) continues no recorded conversation" in text
    assert "first difference: message 2 of the request (user)" in text
    assert f"- recorded: {USER!r}" in text
    assert "+ sent:     \"What's the weather in Rome?\"" in text
    assert "closest recorded turn: reply 1 of session" in text
    assert len(api.requests) == 1  # not retried


def test_streamed_miss_fails_fast(patched: None, tmp_path: Path) -> None:
    """A streamed request that misses gets the 409 before any event: the SDK
    raises at once (no retry, no hang), the block names the mismatch."""
    path = record(tmp_path, anthropic_client, agents.messages, False, True)
    import anthropic

    with pytest.raises(ReplayMismatch, match=r"\+ sent:     'Weather in Oslo\?'"):
        with replay(path) as api:
            with pytest.raises(anthropic.APIStatusError) as error:
                agents.messages(anthropic_client(api), True, prompt="Weather in Oslo?")
            assert error.value.status_code == 409
            assert error.value.body["error"]["type"] == "invalid_request_error"
    assert len(api.requests) == 1


def test_changed_tool_result_is_a_mismatch(patched: None, tmp_path: Path) -> None:
    path = _chat_recording(tmp_path)
    agents.WEATHER["Paris"] = "Rain, 9 C"
    with pytest.raises(ReplayMismatch) as info:
        with replay(path) as api:
            agents.chat(openai_client(api), False)
    text = str(info.value)
    assert "request 2 (POST /v1/chat/completions)" in text
    assert "first difference: message 4 of the request (tool)" in text
    assert "- recorded: 'Sunny, 21 C'" in text and "+ sent:     'Rain, 9 C'" in text
    assert "closest recorded turn: reply 2 of session" in text


def test_extra_request_is_a_mismatch(patched: None, tmp_path: Path) -> None:
    """A model call past the end of the recording (a follow-up question)."""
    path = _chat_recording(tmp_path)
    with pytest.raises(ReplayMismatch) as info:
        with replay(path) as api:
            client = openai_client(api)
            agents.chat(client, False)
            history = [{"role": m["role"], "content": m["content"]} for m in read(path).messages if m["role"] != "tool"]
            history = history[:1] + history[1:2]
            client.chat.completions.create(model="gpt-test", messages=[*history, {"role": "user", "content": "And Rome?"}])
    text = str(info.value)
    assert "request 3" in text
    assert "first difference: message 3 of the request (user)" in text or "And Rome?" in text


def test_extra_request_past_the_end(patched: None, tmp_path: Path) -> None:
    """The same conversation asked once more after its final answer."""
    path = _chat_recording(tmp_path)
    messages = read(path).messages
    with pytest.raises(ReplayMismatch) as info:
        with replay(path) as api:
            client = openai_client(api)
            agents.chat(client, False)
            sent: list[dict[str, Any]] = []
            for m in messages:
                if m["role"] == "tool":
                    sent.append({"role": "tool", "tool_call_id": m["toolCallId"], "content": m["content"]})
                elif m["role"] == "assistant" and m.get("toolCalls"):
                    sent.append(
                        {
                            "role": "assistant",
                            "content": m["content"],
                            "tool_calls": [{"type": "function", **c} for c in m["toolCalls"]],
                        }
                    )
                else:
                    sent.append({"role": m["role"], "content": m["content"]})
            sent.append({"role": "user", "content": "Thanks! Anything else?"})
            client.chat.completions.create(model="gpt-test", messages=sent)
    text = str(info.value)
    assert "request 3" in text
    assert "message 7 of the request (user: 'Thanks! Anything else?') continues past the end of session" in text


def test_missing_request_is_a_mismatch(patched: None, tmp_path: Path) -> None:
    """The run stops before the recording's last model call."""
    path = _chat_recording(tmp_path)
    with pytest.raises(ReplayMismatch, match=r"fewer model calls than the recording: reply 2 of session .* was never requested"):
        with replay(path) as api:
            openai_client(api).chat.completions.create(
                model="gpt-test", messages=[{"role": "system", "content": agents.SYSTEM}, {"role": "user", "content": USER}]
            )
    assert api.misses == []


def test_not_strict_falls_back_to_the_fake_server(patched: None, tmp_path: Path) -> None:
    path = _chat_recording(tmp_path)
    with replay(path, strict=False) as api:
        answer = agents.chat(openai_client(api), False, prompt="Another question")
    # The first reply is FakeAPI's planning; its tool calls have the recorded
    # ids, so the tool results continue the recording again.
    assert answer == read(path).messages[-1]["content"]
    assert [m.request for m in api.misses] == [1]
    assert "Another question" in api.misses[0].message
    api.check()  # no raise


def test_check_raises_inside_the_block(patched: None, tmp_path: Path) -> None:
    path = _chat_recording(tmp_path)
    with replay(path, strict=True) as api:
        with pytest.raises(ReplayMismatch, match="was never requested"):
            api.check()
        agents.chat(openai_client(api), False)
        api.check()


# --------------------------------------------------------------------------- concurrency


class PerAgent(FakeAPI):
    """Replies that depend on the agent's prompt: tool-call ids, arguments and
    answer are the agent's own, so a reply served to the wrong conversation
    cannot pass for the right one."""

    def _reply_for(self, endpoint: Any, body: dict[str, Any], n: int, request: Any) -> _Reply | _Failure:
        messages = body["messages"]
        i = int(re.search(r"Question (\d+)", messages[1]["content"]).group(1))  # type: ignore[union-attr]
        if messages[-1]["role"] == "tool":
            return _Reply("answer", f"Agent {i} has its result.", f"Agent {i}: {messages[-1]['content']}")
        return _Reply("tools", None, None, (ScriptedToolCall("get_weather", {"city": f"City{i}"}, f"w{i:02d}"),))


def test_fifty_agents_replay_one_recording_at_once(patched: None, tmp_path: Path) -> None:
    """50 agents with their own prompts ran concurrently, each in its own
    sub-agent session; replayed at once, each is served its own conversation."""
    prompts = [f"Question {i}: weather?" for i in range(50)]

    async def fleet(api: FakeAPI, path: Path) -> list[str]:
        client = async_openai_client(api)
        async with Session(path):

            async def one(i: int) -> str:
                async with Session(path.with_name(f"agent{i:02d}.jsonl"), name=f"agent {i}"):
                    return await agents.achat(client, False, prompt=prompts[i])

            return list(await asyncio.gather(*(one(i) for i in range(50))))

    first = tmp_path / "rec" / "fleet.jsonl"
    first.parent.mkdir()
    with PerAgent() as fake, localhost_only():
        answers = asyncio.run(fleet(fake, first))
    assert answers == [f"Agent {i}: Clear in City{i}" for i in range(50)]
    second = tmp_path / "again" / "fleet.jsonl"
    second.parent.mkdir()
    with replay(first) as api, localhost_only():
        replayed = asyncio.run(fleet(api, second))
    assert replayed == answers
    assert len(api.requests) == 100 and api.misses == []
    assert_same_conversation(first, second)
    for i in (0, 17, 49):
        assert read(second.with_name(f"agent{i:02d}.jsonl")).messages[2]["toolCalls"][0]["id"] == f"call_w{i:02d}"


def test_fifty_concurrent_replays_of_one_conversation(patched: None, tmp_path: Path) -> None:
    """One recorded conversation answers 50 concurrent copies of the agent: a
    request is matched by what it says, not by the order it arrives in."""
    path = record(tmp_path, openai_client, agents.chat, False, False)
    expected = read(path).messages[-1]["content"]

    async def many(api: FakeAPI) -> list[str]:
        client = async_openai_client(api)
        return list(await asyncio.gather(*(agents.achat(client, False) for _ in range(50))))

    with replay(path) as api, localhost_only():
        answers = asyncio.run(many(api))
    assert answers == [expected] * 50
    assert len(api.requests) == 100 and api.misses == []


# --------------------------------------------------------------------------- loading


def test_a_trace_object_and_a_missing_path(tmp_path: Path, patched: None) -> None:
    path = _chat_recording(tmp_path)
    with replay(read(path)) as api:
        agents.chat(openai_client(api), False)
    with pytest.raises(FileNotFoundError, match="no trace at"):
        replay(tmp_path / "nope.jsonl")


def test_assert_same_conversation_says_where(tmp_path: Path, patched: None) -> None:
    path = _chat_recording(tmp_path)
    trace = read(path)
    changed = read(path)
    changed.messages[3] = {**changed.messages[3], "content": "Cloudy"}
    changed.messages[2]["toolCalls"][0]["function"]["arguments"] = '{"city": "Paris"}'  # spacing only
    with pytest.raises(AssertionError, match=r"message 4 \(tool\): content differs: 'Sunny, 21 C' != 'Cloudy'"):
        assert_same_conversation(trace, changed)
    shorter = read(path)
    del shorter.messages[-1]
    assert conversation_differences(trace, shorter) == [
        f"6 messages != 5; the first goes on with message 6 (assistant: {trace.messages[-1]['content']!r})"
    ]
    # Timestamps aside.
    later = read(path)
    for m in later.messages:
        m["timestamp"] += 1000
    assert_same_conversation(trace, later)



# --------------------------------------------------------------------------- tools="recorded"


@pytest.mark.parametrize(("name", "factory", "loop", "is_async"), [LOOPS[0], LOOPS[3]], ids=["chat", "responses-async"])
def test_recorded_tools_do_not_run(name: str, factory: Any, loop: Any, is_async: bool, patched: None, tmp_path: Path) -> None:
    """``tools="recorded"``: the ``@tool`` functions return what they returned
    when the trace was recorded, without running: the world may have changed."""
    first = record(tmp_path, factory, loop, is_async, False)
    agents.CALLS.clear()
    agents.WEATHER["Paris"] = "Rain, 9 C"  # would be a mismatch with live tools
    second = new_trace(tmp_path)
    with replay(first, tools="recorded") as api:
        run(api, factory, loop, is_async, False, second)
    assert agents.CALLS == []
    assert api.recorded_tools.answered == [("get_weather", "call_weather01"), ("get_time", "call_time02")]
    assert_same_conversation(first, second)
    # After the block the functions run again.
    assert agents.get_weather("Paris") == "Rain, 9 C"


def test_recorded_tools_outside_a_session_match_by_arguments(patched: None, tmp_path: Path) -> None:
    """No session, so no tool-call id: the recorded call with the same name and
    arguments answers; unknown arguments run the function."""
    first = _chat_recording(tmp_path)
    agents.CALLS.clear()
    with replay(first, tools="recorded") as api:
        agents.chat(openai_client(api), False)
        assert agents.get_weather("Oslo") == "Clear in Oslo"
    assert agents.CALLS == ["get_weather(Oslo)"]


def test_recorded_tools_keep_dicts(tmp_path: Path) -> None:
    """A result ``@tool`` wrote as JSON comes back as the dict it was; a string as the string."""
    from ststrace import tool

    ran: list[str] = []

    @tool
    def lookup(key: str) -> Any:
        ran.append(key)
        return {"key": key, "values": [1, 2]} if key == "a" else "{not json"

    path = new_trace(tmp_path)
    with Session(path):
        lookup("a")
        lookup("b")
    ran.clear()
    with replay(path, tools="recorded", strict=False):
        assert lookup("a") == {"key": "a", "values": [1, 2]}
        assert lookup("b") == "{not json"
    assert ran == []


# --------------------------------------------------------------------------- protocols


def test_a_protocol_plugs_in_by_endpoint(patched: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``register_protocol``: the replay server reads a protocol's requests with
    the protocol's own function (here a Chat dialect whose prompts carry a
    volatile ``[request N]`` prefix the recording has not)."""
    from ststrace.testing import ReplayProtocol, register_protocol
    from ststrace.testing import _replay as replay_module

    path = _chat_recording(tmp_path)
    plain = replay_module.PROTOCOLS["chat"]

    def conversation(body: dict[str, Any]) -> Any:
        messages = plain.conversation(body) or []
        return [{**m, "content": re.sub(r"^\[request \d+\] ", "", m["content"])} for m in messages]

    monkeypatch.setitem(replay_module.PROTOCOLS, "chat", plain)
    register_protocol(ReplayProtocol("chat", conversation))
    with replay(path) as api:
        assert agents.chat(openai_client(api), False, prompt=f"[request 7] {USER}") == read(path).messages[-1]["content"]
    assert api.misses == []
