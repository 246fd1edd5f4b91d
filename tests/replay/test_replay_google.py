"""``ststrace.testing.replay`` to the real ``google-genai`` client: the Gemini API
(function calls without ids: the recorded ids are ststrace's own, matched by
name and arguments) and with the provider's ids, streamed or not, async, Vertex
AI, automatic function calling; a strict miss gets Gemini's 409.

google-genai runs in .venv-google and .venv-side (see
``test_integration_google_genai.py``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

genai = pytest.importorskip("google.genai", reason="google-genai runs in .venv-google and .venv-side (the test-google / test-side extras)")

from google.genai import errors, types  # noqa: E402

import ststrace  # noqa: E402
import test_integration_google_genai as g  # noqa: E402
from fakeapi_fixtures import gemini_client, quiet_google  # noqa: E402
from ststrace import Session, read  # noqa: E402
from ststrace.testing import FakeAPI, ReplayMismatch, assert_same_conversation, localhost_only, replay  # noqa: E402
from test_instrument_helpers import USER, instrumented, new_trace  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    quiet_google(monkeypatch)


@pytest.fixture
def patched() -> Iterator[None]:
    with instrumented("google_genai"):
        yield


def manual(api: FakeAPI, mode: str, prompt: str = USER, vertexai: bool = False) -> str:
    """The manual function-calling loop, in *mode* json / stream / async."""
    client = gemini_client(api, vertexai=vertexai)
    history: list[Any] = [types.Content(role="user", parts=[types.Part.from_text(text=prompt)])]
    cfg = g.config([g.DECLARATIONS])

    def merged(chunks: list[Any]) -> Any:
        parts: list[Any] = []
        for ch in chunks:
            for p in ch.candidates[0].content.parts or []:
                if p.text and parts and parts[-1].text is not None and bool(parts[-1].thought) == bool(p.thought):
                    parts[-1] = types.Part(text=parts[-1].text + p.text, thought=p.thought, thought_signature=parts[-1].thought_signature)
                else:
                    parts.append(p)
        return types.GenerateContentResponse(candidates=[types.Candidate(content=types.Content(role="model", parts=parts))])

    def done(response: Any) -> str | None:
        parts = response.candidates[0].content.parts or []
        if any(p.function_call for p in parts):
            history.extend(g.answer_turn(response))
            return None
        return "".join(p.text or "" for p in parts if not p.thought)

    async def main() -> str:
        # One event loop for the client's whole conversation.
        for _ in range(3):
            answer = done(await client.aio.models.generate_content(model=g.MODEL, contents=history, config=cfg))
            if answer is not None:
                return answer
        raise AssertionError("the agent did not finish")

    if mode == "async":
        return asyncio.run(main())
    for _ in range(3):
        if mode == "stream":
            response = merged(list(client.models.generate_content_stream(model=g.MODEL, contents=history, config=cfg)))
        else:
            response = client.models.generate_content(model=g.MODEL, contents=history, config=cfg)
        answer = done(response)
        if answer is not None:
            return answer
    raise AssertionError("the agent did not finish")


def automatic(api: FakeAPI, mode: str, prompt: str = USER, vertexai: bool = False) -> str:
    client = gemini_client(api, vertexai=vertexai)
    return str(client.models.generate_content(model=g.MODEL, contents=prompt, config=g.config([g.get_weather, g.get_time])).text)


def run(api: FakeAPI, agent: Any, mode: str, path: Path, **kw: Any) -> str:
    with localhost_only(), Session(path):
        return str(agent(api, mode, **kw))


def record(tmp_path: Path, agent: Any, mode: str, ids: bool = False, **kw: Any) -> Path:
    path = new_trace(tmp_path)
    with FakeAPI(cached_tokens=3) as api:
        api.gemini_call_ids = ids
        run(api, agent, mode, path, **kw)
    return path


CASES = [
    ("json", manual, "json", False, False),
    ("stream", manual, "stream", False, False),
    ("async", manual, "async", False, False),
    ("with-ids", manual, "json", True, False),
    ("vertex", manual, "json", False, True),
    ("automatic", automatic, "json", False, False),
]


@pytest.mark.parametrize(("name", "agent", "mode", "ids", "vertexai"), CASES, ids=[c[0] for c in CASES])
def test_round_trip(name: str, agent: Any, mode: str, ids: bool, vertexai: bool, patched: None, tmp_path: Path) -> None:
    first = record(tmp_path, agent, mode, ids, vertexai=vertexai)
    second = new_trace(tmp_path)
    with replay(first) as api:
        answer = run(api, agent, mode, second, vertexai=vertexai)
    assert api.misses == [] and len(api.requests) == 2
    original, replayed = read(first).messages, read(second).messages
    assert answer == original[-1]["content"] != ""
    assert_same_conversation(first, second)
    assert [p for p in ststrace.validate(second) if p.severity == "error"] == []
    sent = [p.get("functionCall", {}).get("id") for p in api.requests[1].body["contents"][1]["parts"] if "functionCall" in p]
    if ids:
        # The provider's ids, sent and recorded as they were.
        assert sent == ["call_weather01", "call_time02"]
        assert [m.get("toolCalls") for m in replayed] == [m.get("toolCalls") for m in original]
    else:
        # ststrace's own ids are not sent: the Gemini API sends none.
        assert sent == [None, None]
    assert [m.get("usage") for m in replayed] == [m.get("usage") for m in original]
    assert all(m["usage"]["cacheRead"] == 3 for m in replayed if m["role"] == "assistant")
    assert [m.get("reasoningContent") for m in replayed] == [m.get("reasoningContent") for m in original]
    assert [m.get("model") for m in replayed] == [m.get("model") for m in original]


def test_strict_miss_is_geminis_409(patched: None, tmp_path: Path) -> None:
    first = record(tmp_path, manual, "json")
    with pytest.raises(ReplayMismatch) as info:
        with replay(first) as api:
            with pytest.raises(errors.ClientError) as error:
                with localhost_only():
                    manual(api, "json", prompt="What's the weather in Rome?")
            assert error.value.code == 409
    text = str(info.value)
    # google-genai 2 posts to /v1beta/models/…, 3 to /v1/models/….
    assert re.search(r"request 1 \(POST /v1(beta)?/models/gemini-2\.5-flash:generateContent\) continues no recorded conversation", text)
    assert "+ sent:     \"What's the weather in Rome?\"" in text
    assert len(api.requests) == 1  # no retry
